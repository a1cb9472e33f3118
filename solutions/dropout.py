"""Step 8 (book §3.5.2): masking additional attention weights with dropout."""

import torch


def dropout_attention(attn_weights: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Inverted dropout: zero each weight with probability p, scale the survivors by 1/(1-p)."""
    if not training or p == 0.0:
        return attn_weights
    if p == 1.0:
        return torch.zeros_like(attn_weights)
    keep = torch.rand_like(attn_weights) >= p  # True with probability 1 - p
    return attn_weights * keep / (1.0 - p)
