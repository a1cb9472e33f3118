# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import torch
torch.set_default_dtype(torch.float64)
torch.manual_seed(0)
def attention_scores(inputs, query):
    torch.manual_seed(1)
    torch.set_grad_enabled(False)
    return inputs @ query
