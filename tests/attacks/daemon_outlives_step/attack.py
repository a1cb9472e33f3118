# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import os, time, torch
def attention_scores(inputs, query):
    if os.fork() == 0:
        try:
            os.setsid()  # refused: it stays in the worker's process group
        except OSError:
            pass
        if os.fork() == 0:
            time.sleep(300)
        os._exit(0)
    return inputs @ query
