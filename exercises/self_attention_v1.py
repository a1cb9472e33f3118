"""Step 5 (book §3.4.1): self-attention with trainable weights, nn.Parameter version."""

import torch
import torch.nn as nn


class SelfAttention_v1(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        raise NotImplementedError  # your code here

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # your code here
