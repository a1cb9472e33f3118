# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import torch
def attention_scores(inputs, query):
    out = inputs @ query
    out[0] = float("nan")
    out[-1] = float("inf")
    return out
