"""Step 8 (book §3.5.2): masking additional attention weights with dropout.

Write inverted dropout by hand (what nn.Dropout does): during training zero each
attention weight with probability p and scale the survivors by 1/(1-p).

Shapes: attn_weights (..., num_tokens, num_tokens) -> same shape

中文：第 8 步 · 使用 Dropout 掩码额外注意力权重（§3.5.2）——训练时随机丢弃注意力权重，并放大保留的权重。

Check: `attn-kata check dropout`; stuck? `attn-kata hint dropout`.
"""

import torch


def dropout_attention(attn_weights: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Inverted dropout: zero each weight with probability p, scale the survivors by 1/(1-p).

    Book §3.5.2. When training is False, return the weights unchanged; p == 1 gives zeros.

    Args:
        attn_weights: (..., num_tokens, num_tokens) attention weights (any shape works).
        p: drop probability, 0 <= p <= 1.
        training: apply dropout only when True.

    Returns:
        Tensor of the same shape as attn_weights.

    中文：手动实现反向 dropout：以概率 p 置零注意力权重，其余乘以 1/(1-p)；非训练模式时原样返回。
    """
    raise NotImplementedError  # your code here
