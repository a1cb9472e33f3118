import os
os._exit(0)
# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts solutions/causal_mask.py here (a correct step 7)
