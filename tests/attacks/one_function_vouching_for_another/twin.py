import torch
def causal_mask(n):
    return torch.triu(torch.ones(n, n), 1).bool()
def masked_attention_weights(attn_scores, d_k):
    raise NotImplementedError
