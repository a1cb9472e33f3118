"""Step 5 (book §3.4.1): self-attention with trainable weights, nn.Parameter version.

Three trainable matrices project the inputs into queries, keys and values; attention
scores are queries · keys, scaled by √d_k before the softmax (scaled dot-product
attention), and the context vectors weight the values.

Shapes: x (num_tokens, d_in) -> context vectors (num_tokens, d_out)

中文：第 5 步 · SelfAttention_v1：基础实现（§3.4.1）——用可训练权重矩阵生成查询、键、值，计算缩放点积注意力。

Check: `attn-kata check self_attention_v1`; stuck? `attn-kata hint self_attention_v1`.
"""

import torch
import torch.nn as nn


class SelfAttention_v1(nn.Module):
    """Self-attention whose weights are plain nn.Parameter matrices (book §3.4.1).

    Attributes:
        W_query, W_key, W_value: nn.Parameter of shape (d_in, d_out), initialised with torch.rand
            (create them in this order to reproduce the book's torch.manual_seed(123) output).

    中文：用 nn.Parameter 保存 W_query、W_key、W_value（形状 (d_in, d_out)）的自注意力类。
    """

    def __init__(self, d_in: int, d_out: int):
        """Create W_query, W_key, W_value as nn.Parameter(torch.rand(d_in, d_out)).

        中文：创建三个形状为 (d_in, d_out) 的可训练权重矩阵。
        """
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (num_tokens, d_in) -> context vectors (num_tokens, d_out).

        queries/keys/values = x @ W: (num_tokens, d_out); scores (num_tokens, num_tokens);
        weights = softmax(scores / √d_k, dim=-1) with d_k = d_out; output = weights @ values.

        中文：计算查询、键、值，缩放后 softmax 得到注意力权重，再对值加权求和得到上下文向量。
        """
        keys = x @ self.W_key  # (num_tokens, d_out)
        queries = x @ self.W_query  # (num_tokens, d_out)
        values = x @ self.W_value  # (num_tokens, d_out)

        attn_scores = queries @ keys.T  # (num_tokens, num_tokens)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vec = attn_weights @ values  # (num_tokens, d_out)
        return context_vec
