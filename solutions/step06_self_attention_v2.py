"""Step 6 (book §3.4.2): self-attention with nn.Linear layers.

The same computation as SelfAttention_v1, but the projections are nn.Linear layers
(better initialisation, optional bias).

Shapes: x (num_tokens, d_in) -> context vectors (num_tokens, d_out)

中文：第 6 步 · SelfAttention_v2：使用 nn.Linear（§3.4.2）——用线性层代替手写的矩阵乘法，计算相同的自注意力。

Check: `attn-kata check self_attention_v2`; stuck? `attn-kata hint self_attention_v2`.
"""

import torch
import torch.nn as nn


class SelfAttention_v2(nn.Module):
    """Self-attention whose projections are nn.Linear layers (book §3.4.2).

    Attributes:
        W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias).

    中文：用 nn.Linear 作为 W_query、W_key、W_value 的自注意力类。
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        """Create W_query, W_key, W_value as nn.Linear(d_in, d_out, bias=qkv_bias).

        中文：创建三个 nn.Linear(d_in, d_out, bias=qkv_bias) 线性层。
        """
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (num_tokens, d_in) -> context vectors (num_tokens, d_out).

        queries/keys/values = W(x): (num_tokens, d_out); scores (num_tokens, num_tokens);
        weights = softmax(scores / √d_k, dim=-1); output = weights @ values.

        中文：与 SelfAttention_v1 相同的缩放点积注意力，只是用线性层计算查询、键、值。
        """
        keys = self.W_key(x)  # (num_tokens, d_out)
        queries = self.W_query(x)  # (num_tokens, d_out)
        values = self.W_value(x)  # (num_tokens, d_out)

        attn_scores = queries @ keys.T  # (num_tokens, num_tokens)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vec = attn_weights @ values  # (num_tokens, d_out)
        return context_vec
