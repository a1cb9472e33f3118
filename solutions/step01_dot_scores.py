"""Step 1 (book §3.3.1): input embeddings -> attention scores ω.

Compute how strongly every input token relates to one query token: the attention score
ω_i is the dot product of input token x_i with the query.

Shapes: inputs (num_tokens, d_in), query (d_in,) -> ω (num_tokens,)

中文：第 1 步 · 输入嵌入 → ω（注意力得分）（§3.3.1）——用点积计算查询向量与每个输入 token 的注意力得分。

Check: `attn-kata check dot_scores`; stuck? `attn-kata hint dot_scores`.
"""

import torch


def attention_scores(inputs: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """Attention scores ω of one query against every input token (book §3.3.1, step 1).

    ω_i = x_i · query, one dot product per token (a loop as in the book, or vectorised).

    Args:
        inputs: (num_tokens, d_in) input embeddings, one row per token.
        query: (d_in,) the query token's embedding (e.g. inputs[1]).

    Returns:
        (num_tokens,) attention scores ω.

    中文：计算查询向量与每个输入 token 的点积，得到注意力得分 ω，形状 (num_tokens,)。
    """
    attn_scores = torch.zeros(inputs.shape[0])
    for i, x_i in enumerate(inputs):
        attn_scores[i] = torch.dot(x_i, query)
    return attn_scores
