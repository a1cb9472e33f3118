def causal_mask(n):
    raise NotImplementedError
def masked_attention_weights(attn_scores, d_k):
    raise NotImplementedError
