# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import gc, sys, torch
def attention_scores(inputs, query):
    right = inputs @ query  # recomputed only to recognise a reference output, if one were here
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and obj.shape == right.shape and obj is not right:
            if torch.allclose(obj, right):
                return obj.clone()
    f = sys._getframe()
    while f is not None:
        for v in f.f_locals.values():
            if isinstance(v, torch.Tensor) and v.shape == right.shape and v is not right:
                if torch.allclose(v, right):
                    return v.clone()
        f = f.f_back
    return torch.zeros(inputs.shape[0])
