"""Step 3 (book §3.3.1): attention weights α -> context vector z."""

import torch


def context_vector(attn_weights: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """z = Σ_i α_i x_i; attn_weights (num_tokens,), inputs (num_tokens, d_in) -> (d_in,)."""
    context_vec = torch.zeros(inputs.shape[1])
    for i, x_i in enumerate(inputs):
        context_vec += attn_weights[i] * x_i
    return context_vec
