"""Step 12 (book exercise 3.1): compare SelfAttention_v1 and SelfAttention_v2.

Copy the weights of a SelfAttention_v2 (nn.Linear) into a SelfAttention_v1 (nn.Parameter)
so both produce the same context vectors.

Shapes: nn.Linear.weight (d_out, d_in) -> nn.Parameter (d_in, d_out)

中文：第 12 步 · 练习 3.1：比较 v1 与 v2——把 SelfAttention_v2 的权重转置后复制到 SelfAttention_v1，使两者输出相同。

Check: `attn-kata check weight_transfer`; stuck? `attn-kata hint weight_transfer`.
"""

import torch
import torch.nn as nn


def transfer_weights(sa_v2: nn.Module, sa_v1: nn.Module) -> nn.Module:
    """Copy sa_v2's nn.Linear weights into sa_v1's nn.Parameters so both give the same output.

    nn.Linear stores its weight as (d_out, d_in) and computes x @ weight.T, while
    SelfAttention_v1 computes x @ W with W of shape (d_in, d_out): hence the transpose.
    Book exercise 3.1 (§3.4.2).

    Args:
        sa_v2: a SelfAttention_v2 (W_query, W_key, W_value are nn.Linear without bias).
        sa_v1: a SelfAttention_v1 with the same d_in, d_out.

    Returns:
        sa_v1, with W_query, W_key, W_value (d_in, d_out) set so that
        sa_v1(x) == sa_v2(x) for x (num_tokens, d_in) -> (num_tokens, d_out).

    中文：把 sa_v2 中 nn.Linear 的权重（形状 (d_out, d_in)）转置为 (d_in, d_out) 后复制给 sa_v1。
    """
    sa_v1.W_query = nn.Parameter(sa_v2.W_query.weight.T.detach().clone())
    sa_v1.W_key = nn.Parameter(sa_v2.W_key.weight.T.detach().clone())
    sa_v1.W_value = nn.Parameter(sa_v2.W_value.weight.T.detach().clone())
    return sa_v1
