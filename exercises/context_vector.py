"""Step 3 (book §3.3.1): attention weights α -> context vector z."""

import torch


def context_vector(attn_weights: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """z = Σ_i α_i x_i; attn_weights (num_tokens,), inputs (num_tokens, d_in) -> (d_in,)."""
    raise NotImplementedError  # your code here
