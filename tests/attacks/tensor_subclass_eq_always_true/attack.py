# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import torch
class Liar(torch.Tensor):
    def __eq__(self, other):
        return True
    def allclose(self, *a, **k):
        return True
def attention_scores(inputs, query):
    return torch.zeros(inputs.shape[0]).as_subclass(Liar)
