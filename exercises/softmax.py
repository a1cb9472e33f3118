"""Step 2 (book §3.3.1): attention scores ω -> attention weights α."""

import torch


def normalize_by_sum(scores: torch.Tensor) -> torch.Tensor:
    """Divide by the sum, so the weights add up to 1 (the book's first attempt)."""
    raise NotImplementedError  # your code here


def softmax_naive(scores: torch.Tensor) -> torch.Tensor:
    """exp(x) / Σ exp(x) on a 1-D tensor, as the book writes it (overflows on large scores)."""
    raise NotImplementedError  # your code here


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Numerically stable softmax over the last dimension."""
    raise NotImplementedError  # your code here
