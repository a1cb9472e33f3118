# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import sys
def attention_scores(inputs, query):
    sys.exit(0)
