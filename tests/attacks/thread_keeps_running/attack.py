# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import threading, time, torch
def spin():
    while True:
        time.sleep(0.001)
def attention_scores(inputs, query):
    threading.Thread(target=spin, daemon=False).start()
    return inputs @ query
