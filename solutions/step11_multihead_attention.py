"""Step 11 (book §3.6.2): multi-head attention with weight splits.

One projection of size d_out is split into num_heads heads of head_dim = d_out // num_heads;
all heads are computed with batched matrix products, merged back, and passed through out_proj.

Shapes: x (batch, num_tokens, d_in) -> (batch, num_tokens, d_out)

中文：第 11 步 · 多头注意力：权重拆分（§3.6.2）——
把 d_out 维的查询、键、值拆成 num_heads 个头并行计算，最后经 out_proj 合并。

Check: `attn-kata check multihead_attention`; stuck? `attn-kata hint multihead_attention`.
"""

import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    """Efficient multi-head causal attention with weight splits (book §3.6.2).

    Attributes:
        d_out, num_heads, head_dim (= d_out // num_heads; d_out must be divisible by num_heads).
        W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias).
        out_proj: nn.Linear(d_out, d_out).
        dropout: nn.Dropout(dropout); mask: causal buffer (context_length, context_length).

    中文：通过权重拆分实现的多头因果注意力类，含 head_dim 与输出投影 out_proj。
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        """Create the projections, out_proj, dropout and the causal mask buffer; set head_dim.

        中文：创建线性层、out_proj、dropout 和因果注意力掩码 buffer，并计算 head_dim。
        """
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, num_tokens, d_in) -> (batch, num_tokens, d_out).

        (batch, num_tokens, d_out) -> view (batch, num_tokens, num_heads, head_dim)
        -> transpose (batch, num_heads, num_tokens, head_dim); scores (batch, num_heads, num_tokens, num_tokens);
        mask, softmax(scores / √head_dim), dropout, @ values; transpose back, merge heads to d_out, out_proj.

        中文：拆分成多个头，计算每个头的因果注意力，再合并回 (batch, num_tokens, d_out) 并经过 out_proj。
        """
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)  # (b, num_tokens, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)

        # split d_out into heads: (b, num_tokens, num_heads, head_dim)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)

        # (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)

        attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        # (b, num_heads, num_tokens, head_dim) -> (b, num_tokens, num_heads, head_dim)
        context_vec = (attn_weights @ values).transpose(1, 2)
        # merge heads: (b, num_tokens, num_heads, head_dim) -> (b, num_tokens, d_out)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)
