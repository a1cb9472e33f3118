# @CAUSAL_MASK_SOLUTION@: tests/test_attacks.py puts the reference's causal_mask here (a correct step 7)



import gc, inspect, linecache, types
def attention_scores(inputs, query):
    for name, entry in list(linecache.cache.items()):
        text = "".join(entry[2]) if len(entry) > 2 else ""
        if "def attention_scores" in text and "linecache" not in text:
            ns = {}
            exec(text, ns)
            return ns["attention_scores"](inputs, query)
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and obj.__name__ == "attention_scores" \
                and obj.__code__ is not attention_scores.__code__:
            return obj(inputs, query)
    raise NotImplementedError
