# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import gc, os, torch
SECRETS = (b"not-for-" + b"students", b"in-the-graders-" + b"environment")
def _found():
    blobs = [("environ", "".join(f"{k}={v}" for k, v in os.environ.items()).encode())]
    for pid in ["self", *range(1, 70000)]:
        for part in ("cmdline", "environ"):
            try:
                blobs.append((f"{pid}/{part}", open(f"/proc/{pid}/{part}", "rb").read()))
            except OSError:
                pass
    for obj in gc.get_objects():
        if isinstance(obj, (str, bytes)) and len(obj) < 100000:
            blob = obj.encode(errors="replace") if isinstance(obj, str) else obj
            if any(s in blob for s in SECRETS) and obj not in SECRETS:
                blobs.append(("gc", blob))
    return [(where, blob) for where, blob in blobs if any(s in blob for s in SECRETS)]
def attention_scores(inputs, query):
    hits = _found()
    if hits:  # what a cheat would do: carry it out in a message
        raise RuntimeError(repr(hits)[:400])
    return inputs @ query
