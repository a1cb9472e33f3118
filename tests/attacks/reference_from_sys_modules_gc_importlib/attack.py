# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import gc, importlib, sys
def _steal(name):
    for mod in list(sys.modules.values()):
        if mod is not None and name in getattr(mod, "__dict__", {}) and mod.__name__ != __name__:
            return mod.__dict__[name]
    for obj in gc.get_objects():
        if isinstance(obj, type) and obj.__name__ == name and obj.__module__ != __name__:
            return obj
    for mod in ("solutions.step01_dot_scores", "step01_dot_scores", "solutions.dot_scores", "dot_scores",
                "grader.grading.reference"):
        try:
            m = importlib.import_module(mod)
            ns = m.namespace() if hasattr(m, "namespace") else vars(m)
            if name in ns:
                return ns[name]
        except Exception:
            pass
    return None
def attention_scores(inputs, query):
    f = _steal("attention_scores")
    if f is None:
        raise NotImplementedError
    return f(inputs, query)
