"""Step 12 (book exercise 3.1): compare SelfAttention_v1 and SelfAttention_v2."""

import torch
import torch.nn as nn


def transfer_weights(sa_v2: nn.Module, sa_v1: nn.Module) -> nn.Module:
    """Copy sa_v2's nn.Linear weights into sa_v1's nn.Parameters so both give the same output.

    nn.Linear stores its weight as (d_out, d_in) and computes x @ weight.T, while
    SelfAttention_v1 computes x @ W with W of shape (d_in, d_out): hence the transpose.
    """
    sa_v1.W_query = nn.Parameter(sa_v2.W_query.weight.T.detach().clone())
    sa_v1.W_key = nn.Parameter(sa_v2.W_key.weight.T.detach().clone())
    sa_v1.W_value = nn.Parameter(sa_v2.W_value.weight.T.detach().clone())
    return sa_v1
