"""Step 5 (book §3.4.1): self-attention with trainable weights, nn.Parameter version."""

import torch
import torch.nn as nn


class SelfAttention_v1(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keys = x @ self.W_key  # (num_tokens, d_out)
        queries = x @ self.W_query  # (num_tokens, d_out)
        values = x @ self.W_value  # (num_tokens, d_out)

        attn_scores = queries @ keys.T  # (num_tokens, num_tokens)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vec = attn_weights @ values  # (num_tokens, d_out)
        return context_vec
