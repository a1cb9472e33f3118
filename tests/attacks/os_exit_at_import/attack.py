import os
os._exit(0)
# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)
