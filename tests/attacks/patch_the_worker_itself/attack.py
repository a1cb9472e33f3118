# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import sys, torch
def attention_scores(inputs, query):
    for name, mod in list(sys.modules.items()):
        if name.startswith("grader"):
            for attr in ("encode", "describe_error", "run_case"):
                if hasattr(mod, attr):
                    setattr(mod, attr, lambda *a, **k: b"forged")
    return torch.zeros(inputs.shape[0])
