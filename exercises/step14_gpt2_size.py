"""Step 14 (book exercise 3.3): initializing GPT-2 size attention modules.

Build a MultiHeadAttention the size of the smallest GPT-2 model: 12 attention heads,
input and output embeddings of 768 dimensions, and a context length of 1024 tokens.

Shapes: x (batch, num_tokens, 768) -> (batch, num_tokens, 768), num_tokens <= 1024

中文：第 14 步 · 练习 3.3：初始化 GPT-2 规模的注意力模块——12 个注意力头，输入、输出嵌入均为 768 维，上下文长度 1024。

Check: `attn-kata check gpt2_size`; stuck? `attn-kata hint gpt2_size`.
"""

import torch.nn as nn
from step11_multihead_attention import MultiHeadAttention


def gpt2_attention(dropout: float = 0.0) -> nn.Module:
    """A MultiHeadAttention of GPT-2 small's size.

    Args:
        dropout: the dropout rate on the attention weights (0.0 by default).

    Returns:
        MultiHeadAttention(d_in=768, d_out=768, context_length=1024, dropout, num_heads=12),
        qkv_bias=False: head_dim = 768 // 12 = 64, 2,360,064 parameters.

    中文：返回 GPT-2 small 规模的 MultiHeadAttention：d_in = d_out = 768，context_length = 1024，12 个头。
    """
    raise NotImplementedError  # your code here
