"""Step 3 (book §3.3.1): attention weights α -> context vector z.

The context vector is the sum of the input tokens, each weighted by its attention weight:
z = Σ_i α_i · x_i.

Shapes: attn_weights (num_tokens,), inputs (num_tokens, d_in) -> z (d_in,)

中文：第 3 步 · α → z（上下文向量）（§3.3.1）——用注意力权重对输入 token 加权求和，得到上下文向量。

Check: `attn-kata check context_vector`; stuck? `attn-kata hint context_vector`.
"""

import torch


def context_vector(attn_weights: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """Weighted sum of the inputs: z = Σ_i α_i x_i (book §3.3.1, step 3).

    Args:
        attn_weights: (num_tokens,) attention weights α for one query.
        inputs: (num_tokens, d_in) input embeddings.

    Returns:
        (d_in,) context vector z.

    中文：以注意力权重 α 对输入 token 加权求和，得到上下文向量 z，形状 (d_in,)。
    """
    raise NotImplementedError  # your code here
