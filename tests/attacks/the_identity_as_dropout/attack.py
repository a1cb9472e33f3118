def dropout_attention(attn_weights, p, training=True):
    return attn_weights
