"""Step 13 (book exercise 3.2): returning two-dimensional embedding vectors.

Keep num_heads=2, but choose the MultiHeadAttentionWrapper's arguments so that its context
vectors are 2-dimensional instead of 4-dimensional: each head's d_out becomes 1.

Shapes: x (batch, num_tokens, d_in) -> (batch, num_tokens, 2)

中文：第 13 步 · 练习 3.2：返回二维嵌入向量——
保持 num_heads=2，调整 MultiHeadAttentionWrapper 的参数，使上下文向量为二维。

Check: `attn-kata check two_dim_output`; stuck? `attn-kata hint two_dim_output`.
"""

import torch.nn as nn
from step10_multihead_wrapper import MultiHeadAttentionWrapper


def two_dim_wrapper(d_in: int, context_length: int, dropout: float) -> nn.Module:
    """A MultiHeadAttentionWrapper with num_heads=2 whose context vectors are 2-dimensional.

    Args:
        d_in: the input embedding size.
        context_length: the longest sequence the causal mask supports.
        dropout: the dropout rate on the attention weights.

    Returns:
        MultiHeadAttentionWrapper(d_in, d_out, context_length, dropout, num_heads=2) with the d_out that
        makes its output (batch, num_tokens, num_heads * d_out) = (batch, num_tokens, 2).

    中文：返回 num_heads=2 的 MultiHeadAttentionWrapper，选择合适的 d_out，使输出形状为 (batch, num_tokens, 2)。
    """
    raise NotImplementedError  # your code here
