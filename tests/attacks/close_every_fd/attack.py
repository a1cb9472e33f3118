# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import os
def attention_scores(inputs, query):
    os.closerange(3, 1024)
    while True:
        pass
