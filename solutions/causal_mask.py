"""Step 7 (book §3.5.1): hide future words with a causal mask."""

import torch


def causal_mask(num_tokens: int) -> torch.Tensor:
    """Bool (num_tokens, num_tokens), True above the diagonal: the future positions to hide."""
    return torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool()


def masked_attention_weights(attn_scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """(..., num_tokens, num_tokens) scores -> causal attention weights of the same shape."""
    num_tokens = attn_scores.shape[-1]
    mask = causal_mask(num_tokens)
    masked = attn_scores.masked_fill(mask, -torch.inf)
    return torch.softmax(masked / d_k**0.5, dim=-1)
