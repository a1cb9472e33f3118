# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import os, socket, stat
def attention_scores(inputs, query):
    for fd in range(256):  # /proc/self/fd is hidden from a worker
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, b"\xff" * 64)
        except OSError:
            pass
    raise SystemExit
