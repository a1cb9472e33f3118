"""Step 1 (book §3.3.1): input embeddings -> attention scores ω."""

import torch


def attention_scores(inputs: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """ω_i = x_i · query for every token; inputs (num_tokens, d_in), query (d_in,) -> (num_tokens,)."""
    raise NotImplementedError  # your code here
