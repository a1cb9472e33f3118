"""Step 10 (book §3.6.1): stacking single-head attention layers."""

import torch
import torch.nn as nn
from causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        raise NotImplementedError  # your code here

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # each head: (b, num_tokens, d_out) -> concatenated (b, num_tokens, num_heads * d_out)
        raise NotImplementedError  # your code here
