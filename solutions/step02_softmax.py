"""Step 2 (book §3.3.1): attention scores ω -> attention weights α.

Normalise the attention scores so they are positive and sum to 1, in the book's three
attempts: divide by the sum, a naive softmax, and a numerically stable softmax.

Shapes: scores (num_tokens,) -> weights (num_tokens,); attention_weights also takes
(..., num_tokens) and normalises over the last dim.

中文：第 2 步 · ω → α（注意力权重）（§3.3.1）——把注意力得分归一化为和为 1 的注意力权重。

Check: `attn-kata check softmax`; stuck? `attn-kata hint softmax`.
"""

import torch


def normalize_by_sum(scores: torch.Tensor) -> torch.Tensor:
    """Divide the scores by their sum so the weights add up to 1 (book §3.3.1, first attempt).

    Args:
        scores: (num_tokens,) attention scores ω.

    Returns:
        (num_tokens,) weights that sum to 1 (not necessarily positive: that is why softmax follows).

    中文：把注意力得分除以其总和，使权重之和为 1（书中的第一种做法）。
    """
    return scores / scores.sum()


def softmax_naive(scores: torch.Tensor) -> torch.Tensor:
    """exp(ω) / Σ exp(ω) on a 1-D tensor, written out as the book does (§3.3.1).

    It overflows (inf / nan) for large scores; that is expected for this naive version.

    Args:
        scores: (num_tokens,) attention scores ω.

    Returns:
        (num_tokens,) positive attention weights α that sum to 1.

    中文：按书中写法手动实现朴素 softmax：exp(ω) / Σ exp(ω)（得分很大时会溢出）。
    """
    return torch.exp(scores) / torch.exp(scores).sum(dim=0)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Numerically stable softmax over the last dimension (book §3.3.1, torch.softmax).

    Must not overflow for large scores (subtract the max first, or use torch.softmax).

    Args:
        scores: (..., num_tokens) attention scores; any leading dims.

    Returns:
        (..., num_tokens) attention weights; each slice along the last dim sums to 1.

    中文：在最后一维上做数值稳定的 softmax，得到注意力权重 α。
    """
    return torch.softmax(scores, dim=-1)
