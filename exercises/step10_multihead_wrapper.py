"""Step 10 (book §3.6.1): stacking single-head attention layers.

Run num_heads independent CausalAttention heads on the same input and concatenate
their outputs along the last dimension.

Shapes: x (batch, num_tokens, d_in) -> (batch, num_tokens, num_heads * d_out)

中文：第 10 步 · MultiHeadAttentionWrapper（§3.6.1）——并行运行多个因果注意力头，并沿最后一维拼接输出。

Check: `attn-kata check multihead_wrapper`; stuck? `attn-kata hint multihead_wrapper`.
"""

import torch
import torch.nn as nn
from step09_causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    """Multi-head attention as a list of CausalAttention heads (book §3.6.1).

    Attributes:
        heads: nn.ModuleList of num_heads CausalAttention(d_in, d_out, context_length, dropout, qkv_bias).

    中文：用 nn.ModuleList 保存 num_heads 个 CausalAttention 的多头注意力包装类。
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        """Create `heads`: an nn.ModuleList of num_heads CausalAttention modules.

        中文：创建包含 num_heads 个 CausalAttention 的 nn.ModuleList `heads`。
        """
        raise NotImplementedError  # your code here

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, num_tokens, d_in) -> (batch, num_tokens, num_heads * d_out).

        中文：对每个头计算上下文向量 (batch, num_tokens, d_out)，再沿最后一维拼接。
        """
        # each head: (b, num_tokens, d_out) -> concatenated (b, num_tokens, num_heads * d_out)
        raise NotImplementedError  # your code here
