"""Step 7 (book §3.5.1): hide future words with a causal mask."""

import torch


def causal_mask(num_tokens: int) -> torch.Tensor:
    """Bool (num_tokens, num_tokens), True above the diagonal: the future positions to hide."""
    raise NotImplementedError  # your code here


def masked_attention_weights(attn_scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """(..., num_tokens, num_tokens) scores -> causal attention weights of the same shape."""
    raise NotImplementedError  # your code here
