# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import os, socket, stat
def attention_scores(inputs, query):
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                s = socket.socket(fileno=os.dup(fd))
                data = s.recv(1 << 24, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                if b"register_buffer" in data or b"reference/" in data:
                    raise RuntimeError("a reference reached the worker early")
        except (OSError, BlockingIOError):
            pass
    raise NotImplementedError
