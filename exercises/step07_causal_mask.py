"""Step 7 (book §3.5.1): hide future words with a causal mask.

A token may attend only to itself and earlier tokens: the attention scores above the
diagonal are set to -inf before the softmax, so their attention weights become 0.

Shapes: mask (num_tokens, num_tokens) bool; scores (..., num_tokens, num_tokens)
-> weights (..., num_tokens, num_tokens)

中文：第 7 步 · 应用因果注意力掩码（§3.5.1）——把未来 token 的注意力得分设为 -inf，softmax 后其注意力权重为 0。

Check: `attn-kata check causal_mask`; stuck? `attn-kata hint causal_mask`.
"""

import torch


def causal_mask(num_tokens: int) -> torch.Tensor:
    """The causal attention mask: True above the diagonal = future positions to hide (book §3.5.1).

    Args:
        num_tokens: number of tokens in the sequence.

    Returns:
        (num_tokens, num_tokens) bool tensor; entry (i, j) is True when j > i.

    中文：生成因果注意力掩码：主对角线以上（未来位置）为 True 的布尔上三角矩阵。
    """
    raise NotImplementedError  # your code here


def masked_attention_weights(attn_scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """Causal attention weights: mask with -inf, then softmax of scores / √d_k (book §3.5.1).

    Args:
        attn_scores: (..., num_tokens, num_tokens) attention scores; any leading batch dims.
        d_k: key dimension used for the √d_k scaling.

    Returns:
        (..., num_tokens, num_tokens) attention weights; zero above the diagonal, rows sum to 1.

    中文：用因果注意力掩码把未来位置的注意力得分设为 -inf，缩放后 softmax 得到注意力权重。
    """
    raise NotImplementedError  # your code here
