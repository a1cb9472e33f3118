"""Step 9 (book §3.5.3): a compact causal self-attention class.

SelfAttention_v2 + the causal attention mask + dropout, for batched input. The mask is
kept as a buffer of size (context_length, context_length) and cut to num_tokens.

Shapes: x (batch, num_tokens, d_in) -> context vectors (batch, num_tokens, d_out)

中文：第 9 步 · 实现紧凑的因果自注意力类（§3.5.3）——支持批量输入，结合因果注意力掩码与 dropout。

Check: `attn-kata check causal_attention`; stuck? `attn-kata hint causal_attention`.
"""

import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    """Causal self-attention with dropout, for batched input (book §3.5.3).

    Attributes:
        W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias).
        dropout: nn.Dropout(dropout), applied to the attention weights.
        mask: buffer (register_buffer), (context_length, context_length), 1/True above the diagonal.

    中文：带 dropout 的因果自注意力类，掩码以 buffer 形式保存，并按 num_tokens 截取。
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        """Create the three projections, the dropout layer and the causal mask buffer.

        中文：创建三个线性层、dropout 层和因果注意力掩码 buffer。
        """
        raise NotImplementedError  # your code here

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, num_tokens, d_in) -> context vectors (batch, num_tokens, d_out).

        scores = queries @ keys.transpose(1, 2): (batch, num_tokens, num_tokens); mask the
        future with -inf (mask cut to num_tokens), softmax(scores / √d_k), dropout, @ values.

        中文：批量计算注意力得分，应用因果注意力掩码、缩放 softmax 和 dropout，得到上下文向量。
        """
        raise NotImplementedError  # your code here
