"""Step 6 (book §3.4.2): self-attention with nn.Linear layers."""

import torch
import torch.nn as nn


class SelfAttention_v2(nn.Module):
    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        raise NotImplementedError  # your code here

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # your code here
