# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import torch
for _ in range(20):
    print("x" * (1 << 20))
def attention_scores(inputs, query):
    print("y" * (1 << 20))
    return inputs @ query
