import torch
def causal_mask(num_tokens):
    return torch.zeros(1, 1, dtype=torch.bool)
def masked_attention_weights(attn_scores, d_k):
    return torch.zeros_like(attn_scores)
