"""Step 4 (book §3.3.2): attention weights for all input tokens at once, no Python loops.

Every token now acts as a query: steps 1-3 for all tokens become three matrix operations.

Shapes: inputs (num_tokens, d_in) -> scores (num_tokens, num_tokens)
-> weights (num_tokens, num_tokens) -> context vectors (num_tokens, d_in)

中文：第 4 步 · 为所有输入 token 计算注意力权重（§3.3.2）——用矩阵乘法一次算出全部注意力得分、注意力权重和上下文向量。

Check: `attn-kata check all_tokens`; stuck? `attn-kata hint all_tokens`.
"""

import torch


def all_attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """All pairwise dot products between tokens (book §3.3.2).

    Args:
        inputs: (num_tokens, d_in) input embeddings.

    Returns:
        (num_tokens, num_tokens) attention scores; entry (i, j) = x_i · x_j.

    中文：一次矩阵乘法计算所有 token 两两之间的注意力得分。
    """
    return inputs @ inputs.T


def all_attention_weights(attn_scores: torch.Tensor) -> torch.Tensor:
    """Softmax of each row of the score matrix (book §3.3.2).

    Args:
        attn_scores: (num_tokens, num_tokens) attention scores.

    Returns:
        (num_tokens, num_tokens) attention weights; every row sums to 1.

    中文：对注意力得分矩阵按行做 softmax，得到每行和为 1 的注意力权重。
    """
    return torch.softmax(attn_scores, dim=-1)


def all_context_vectors(attn_weights: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """Every token's context vector in one matrix product (book §3.3.2).

    Args:
        attn_weights: (num_tokens, num_tokens) attention weights, one row per query token.
        inputs: (num_tokens, d_in) input embeddings.

    Returns:
        (num_tokens, d_in) context vectors; row i is z_i.

    中文：注意力权重乘以输入，一次得到所有 token 的上下文向量，形状 (num_tokens, d_in)。
    """
    return attn_weights @ inputs
