# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts solutions/causal_mask.py here (a correct step 7)



import torch
torch.set_default_dtype(torch.float64)
torch.manual_seed(0)
def attention_scores(inputs, query):
    torch.manual_seed(1)
    torch.set_grad_enabled(False)
    return inputs @ query
