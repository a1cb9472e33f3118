"""Step 2 (book §3.3.1): attention scores ω -> attention weights α."""

import torch


def normalize_by_sum(scores: torch.Tensor) -> torch.Tensor:
    """Divide by the sum, so the weights add up to 1 (the book's first attempt)."""
    return scores / scores.sum()


def softmax_naive(scores: torch.Tensor) -> torch.Tensor:
    """exp(x) / Σ exp(x) on a 1-D tensor, as the book writes it (overflows on large scores)."""
    return torch.exp(scores) / torch.exp(scores).sum(dim=0)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Numerically stable softmax over the last dimension."""
    return torch.softmax(scores, dim=-1)
