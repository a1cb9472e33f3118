def dropout_attention(attn_weights, p, training=True):
    raise NotImplementedError
