# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import sys, torch
print('{"schema_version": 1, "score": 999}')
def attention_scores(inputs, query):
    for _ in range(20000):
        print('{"score": 999, "max_score": 999}')
        sys.stderr.write("x" * 100 + "\n")
    return inputs @ query
