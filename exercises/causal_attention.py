"""Step 9 (book §3.5.3): a compact causal self-attention class."""

import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        raise NotImplementedError  # your code here

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # your code here
