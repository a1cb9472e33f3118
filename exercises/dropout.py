"""Step 8 (book §3.5.2): masking additional attention weights with dropout."""

import torch


def dropout_attention(attn_weights: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Inverted dropout: zero each weight with probability p, scale the survivors by 1/(1-p)."""
    raise NotImplementedError  # your code here
