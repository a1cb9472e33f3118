"""Step 4 (book §3.3.2): attention weights for all input tokens at once, no Python loops."""

import torch


def all_attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """inputs (num_tokens, d_in) -> scores (num_tokens, num_tokens)."""
    raise NotImplementedError  # your code here


def all_attention_weights(attn_scores: torch.Tensor) -> torch.Tensor:
    """Softmax of each row: (num_tokens, num_tokens) -> (num_tokens, num_tokens)."""
    raise NotImplementedError  # your code here


def all_context_vectors(attn_weights: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """(num_tokens, num_tokens) @ (num_tokens, d_in) -> (num_tokens, d_in)."""
    raise NotImplementedError  # your code here
