"""Step 11 (book §3.6.2): multi-head attention with weight splits."""

import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        raise NotImplementedError  # your code here

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # your code here
