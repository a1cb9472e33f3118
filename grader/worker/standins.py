"""Public stand-ins (test doubles) for the earlier steps that later steps build on.

A step that builds on earlier ones (the wrapper on CausalAttention, exercise 3.1 on SelfAttention_v1/v2, 3.2 on
the wrapper, 3.3 on MultiHeadAttention) is graded with these in place of the earlier names: in the worker, where
the learner's code looks those names up, and on the trusted side, under the reference of the step itself. So a
bug in an earlier step costs nothing in a later one, and no reference code or output ever enters a worker.

Each stand-in has the book's constructor (positional, in the book's order) and the book's parameter and buffer
names, so a learner's code builds and uses it as it would the real class and the grader's weights load by role;
it draws its initial weights from the global generator in the book's order (so `torch.manual_seed(123)` examples
stay reproducible). What it computes is a cheap function of its arguments and weights that is deliberately NOT
attention (a gated causal running mean; row-scaled sigmoid affinities, never the softmax; a wrapper that scales head i
by i + 2):
no stand-in's output is the answer of any step, and copying one earns nothing.
"""

from __future__ import annotations

import functools

import torch
import torch.nn as nn


@functools.lru_cache(maxsize=16)
def _mask_table(context_length: int) -> torch.Tensor:
    """(context_length, context_length) bool, True above the diagonal: made once per size in a process (GPT-2's
    1024 × 1024 when this module is imported, so in the zygote, before any fork)."""
    return torch.ones(context_length, context_length, dtype=torch.bool).triu(1)


def _causal_mask(context_length: int) -> torch.Tensor:
    """A stand-in's mask buffer: a view of the one table of its size (a tensor of its own, as a buffer made afresh
    would be, so a module of several stand-ins still lists each one's; no fresh memory per build). Code that writes
    into it in place writes into its process's table, as into any tensor it shares; a stand-in never does."""
    table = _mask_table(context_length)
    return table.view(table.shape)


_mask_table(1024)  # GPT-2's (step 14): every worker inherits it

def _causal_mean(num_tokens: int, mask: torch.Tensor) -> torch.Tensor:
    """(num_tokens, num_tokens): uniform weights over the positions the mask keeps (True = masked)."""
    kept = (~mask[:num_tokens, :num_tokens]).to(torch.float32)
    return kept / kept.sum(-1, keepdim=True).clamp(min=1.0)


def _gated(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Per token, no mixing: the values gated by query and key (swapping any two of them changes the output)."""
    return v * torch.sigmoid(q - 2 * k)


class SelfAttention_v1(nn.Module):
    """Stand-in with raw nn.Parameter W_query, W_key, W_value of shape (d_in, d_out), as the book's v1."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _gated(x @ self.W_query, x @ self.W_key, x @ self.W_value)  # (num_tokens, d_out)


class SelfAttention_v2(nn.Module):
    """Stand-in with nn.Linear W_query, W_key, W_value, as the book's v2: the same function as the v1 stand-in."""

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _gated(self.W_query(x), self.W_key(x), self.W_value(x))  # (num_tokens, d_out)


class CausalAttention(nn.Module):
    """Stand-in head: batched (b, num_tokens, d_in) -> (b, num_tokens, d_out), causal (a (context_length,
    context_length) bool buffer `mask`, cut to num_tokens), dropout on its mixing weights."""

    mask: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", _causal_mask(context_length))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, num_tokens, _ = x.shape
        gated = _gated(self.W_query(x), self.W_key(x), self.W_value(x))  # (b, num_tokens, d_out)
        # (num_tokens, num_tokens) -> (b, num_tokens, num_tokens): each batch entry drops its own weights
        weights = self.dropout(_causal_mean(num_tokens, self.mask).expand(b, num_tokens, num_tokens))
        return weights @ gated


class MultiHeadAttentionWrapper(nn.Module):
    """Stand-in wrapper: `heads`, an nn.ModuleList of num_heads stand-in heads; head i's output scaled by i + 2
    (so it is not the book's concatenation), (b, num_tokens, num_heads * d_out)."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([(i + 2) * head(x) for i, head in enumerate(self.heads)], dim=-1)


class MultiHeadAttention(nn.Module):
    """Stand-in with the book's weight splits: W_query, W_key, W_value (d_in -> d_out), out_proj, num_heads,
    head_dim, a bool `mask` buffer; its output depends on how d_out is split into heads."""

    mask: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be divisible by num_heads")
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", _causal_mask(context_length))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, num_tokens, _ = x.shape
        split = (b, num_tokens, self.num_heads, self.head_dim)
        # (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        q, k, v = (w(x).view(split).transpose(1, 2) for w in (self.W_query, self.W_key, self.W_value))
        # per head, sigmoid (not softmax) affinities, zero in the future, each row scaled to sum to 1: one token's
        # only weight is 1 whatever the split into heads, as in attention; longer sequences depend on the split
        affinity = torch.sigmoid(q @ k.transpose(2, 3)).masked_fill(self.mask[:num_tokens, :num_tokens], 0.0)
        weights = self.dropout(affinity / affinity.sum(-1, keepdim=True))  # (b, num_heads, num_tokens, num_tokens)
        # (b, num_heads, num_tokens, head_dim) -> (b, num_tokens, num_heads, head_dim) -> (b, num_tokens, d_out)
        z = (weights @ v).transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return self.out_proj(z)


STANDINS: dict[str, type[nn.Module]] = {cls.__name__: cls for cls in (
    SelfAttention_v1, SelfAttention_v2, CausalAttention, MultiHeadAttentionWrapper, MultiHeadAttention)}
