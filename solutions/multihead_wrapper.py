"""Step 10 (book §3.6.1): stacking single-head attention layers."""

import torch
import torch.nn as nn
from causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # each head: (b, num_tokens, d_out) -> concatenated (b, num_tokens, num_heads * d_out)
        return torch.cat([head(x) for head in self.heads], dim=-1)
