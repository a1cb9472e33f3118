# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts solutions/causal_mask.py here (a correct step 7)



import os
def attention_scores(inputs, query):
    os._exit(3)
