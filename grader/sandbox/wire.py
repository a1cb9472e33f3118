"""The schema of what a worker sends back, checked on the trusted side before anything reads it.

A worker runs the learner's code, so its two documents (the hello after loading the submission, and one
answer per step) and its tensors are hostile data. `channel.decode` already bounds the JSON's size and
nesting; here every field is checked for its type, its length and, for containers, its size. Nothing
is coerced, but for one thing: a lone surrogate in a string or a key (JSON's "\\udcff" decodes to one, and
an honest learner's exception message may hold one) becomes U+FFFD, since no UTF-8 writer of a report could
take it. A document that does not fit is refused with `Malformed`, whose text says where.

    validate_hello(doc)                  -> (names: {name: kind}, errors: {module: error})
    validate_answer(doc, tensors, asked) -> ({case: entry or Malformed}, {case: {key: tensor}})
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

import torch

from grader import limits
from grader.files import without_surrogates
from grader.i18n import _
from grader.registry import ALL_NAMES

MALFORMED = "MalformedResult"  # the `exception` of a case refused here (grader.grading.engine)
STATUSES = frozenset({"ok", "not_started", "missing", "wrong_type", "error", "memory"})

MAX_NAME = limits.WIRE_NAME_CHARS  # a case, module (a file's name), key or exception name
MAX_KIND = limits.WIRE_KIND_CHARS  # what a public name is bound to (a type's name)
MAX_TEXT = limits.WIRE_TEXT_CHARS  # a message or a line of code (the worker cuts them at 500 and 200)
MAX_ENTRIES = limits.WIRE_ENTRIES  # entries of a mapping (modules with errors, layers, cases, msgid parameters)
MAX_CELLS = limits.CODE_CELLS  # notebook cells named in one load error
MAX_FACT_DEPTH = limits.FACT_DEPTH  # facts: nesting (an honest `structure` fact needs 5)
MAX_FACT_NODES = limits.FACT_NODES  # facts: values in one case
# facts: characters of the strings and keys of one case (the reference's largest holds ~1,600: a module's parameter
# names and shapes). A batch's grading process keeps a chunk's answers until it judges them: facts padded to the
# channel's caps once held ~56 MB a step (red team 9)
MAX_FACT_CHARS = limits.FACT_CHARS
MAX_NDIM = limits.TENSOR_NDIM  # a wrong answer may have a few extra dimensions
MAX_CASE_ELEMENTS = limits.CASE_ELEMENTS  # what the worker itself allows a case (grader.worker.serve)
MAX_STEP_ELEMENTS = limits.STEP_ELEMENTS
TENSOR_DTYPES = frozenset({torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                           torch.int16, torch.int8, torch.uint8, torch.bool})

# the facts the probes report (grader.worker.probes) and the checks read, by type: a dict of fixed fields, {"map": T}
# (a dict of any keys to T), [T] (a list of T), ("tuple", T1, T2) (a list of exactly these), ("nullable", T),
# or a scalar type; facts not named here need only be bounded plain JSON
_SHAPE = [int]
FACT_TYPES: dict[str, Any] = {
    "structure": {"params": {"map": _SHAPE}, "buffers": {"map": ("tuple", _SHAPE, str)}, "children": {"map": str},
                  "attrs": {"map": int}, "heads": ("nullable", [str]), "heads_type": str, "n_unique_params": int,
                  # which of the learner's parameters play each of the grader's (name, owner type, transposed)
                  "roles": {"map": [("tuple", str, str, bool)]}, "unused": [str]},
    "grads": {"map": bool},
    "inputs_modified": bool,
    "requires_grad": bool,
    "v1_param_types": {"map": str},
    # step 4's work at each size (grader.worker.probes.loops): line events, torch calls, torch operations
    "work": {"sizes": [int], "lines": [int], "calls": [int], "ops": [int], "tampered": [str]},
}

HELLO_KEYS = frozenset({"names", "errors", "layers", "cpu", "output_dropped"})
ERROR_KEYS = frozenset({"exception", "message", "where", "cells"})
WHERE_KEYS = frozenset({"file", "line", "code"})
ANSWER_KEYS = frozenset({"cases", "cpu", "output_dropped"})
CASE_KEYS = frozenset({"status", "facts", "message", "msgid", "params", "exception", "where", "ms"})


_text = without_surrogates  # a worker's JSON "\udcff" is a lone surrogate here: repaired, never refused

def _scrub(x: Any) -> Any:
    """Plain JSON with every string and key through _text (its depth is bounded by the caller)."""
    t = type(x)
    if t is str:
        return _text(x)
    if t is dict:
        return {_text(k): _scrub(item) for k, item in x.items()}
    if t is list:
        return [_scrub(item) for item in x]
    return x


class Malformed(ValueError):
    """A worker's document or tensors that do not fit the schema; the text says where."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"the worker sent a malformed result ({where}: {problem})")
        self.where = where
        self.problem = problem
        # in the current language, for the report (engine: "importing the submission failed: {detail}")
        self.detail = _("the worker sent a malformed result ({detail})").format(detail=f"{where}: {problem}")


def _key(k: object) -> str:
    """A key as it may appear in a message: short, printable."""
    text = repr(k)
    return text if len(text) <= 42 else text[:40] + "…"


def _str(v: Any, where: str, limit: int) -> str:
    if type(v) is not str:
        raise Malformed(where, f"expected a string, got {type(v).__name__}")
    if len(v) > limit:
        raise Malformed(where, f"a string of {len(v)} characters (at most {limit})")
    return _text(v)


def _int(v: Any, where: str) -> int:
    if type(v) is not int or not -(2**63) <= v < 2**63:
        raise Malformed(where, f"expected an integer, got {type(v).__name__}")
    return v


def _number(v: Any, where: str, *, bools: bool = False) -> float | int:
    ok = (bools and type(v) is bool) or (type(v) is int and -(2**63) <= v < 2**63) or (
        type(v) is float and math.isfinite(v))
    if not ok:
        raise Malformed(where, f"expected a finite number, got {type(v).__name__}")
    return v


def _dict(v: Any, where: str, limit: int = MAX_ENTRIES, keys: frozenset[str] | None = None,
          required: Collection[str] = ()) -> dict[str, Any]:
    if type(v) is not dict:
        raise Malformed(where, f"expected an object, got {type(v).__name__}")
    if len(v) > limit:
        raise Malformed(where, f"{len(v)} entries (at most {limit})")
    scrub = False
    for k in v:
        if type(k) is not str or len(k) > MAX_NAME or not k.isascii():  # the where of a message: only when needed
            _str(k, f"{where} key", MAX_NAME)
            scrub = True
        if keys is not None and k not in keys:
            raise Malformed(where, f"unexpected field {_key(k)}")
    for k in required:
        if k not in v:
            raise Malformed(where, f"no field {_key(k)}")
    return {_text(k): item for k, item in v.items()} if scrub else v


def _where(v: Any, where: str) -> dict[str, Any] | None:
    if v is None:
        return None
    d = _dict(v, where, keys=WHERE_KEYS, required=("file", "line"))
    line = d["line"]
    return {"file": _str(d["file"], f"{where}.file", MAX_TEXT),
            "line": None if line is None else _int(line, f"{where}.line"),
            "code": _str(d.get("code", ""), f"{where}.code", MAX_TEXT)}


def _facts(v: Any, where: str) -> dict[str, Any]:
    """Plain JSON of bounded depth and size; returned as is (it is made only of fresh plain containers)."""
    top = _dict(v, where, limit=MAX_FACT_NODES)
    stack: list[tuple[Any, int]] = [(top, 1)]
    nodes = chars = 0
    scrub = False  # a string or key that is not ASCII: all are replaced through _text at the end
    while stack:
        x, depth = stack.pop()
        nodes += 1
        if nodes > MAX_FACT_NODES:
            raise Malformed(where, f"more than {MAX_FACT_NODES} values")
        if chars > MAX_FACT_CHARS:
            raise Malformed(where, f"more than {MAX_FACT_CHARS} characters")
        if depth > MAX_FACT_DEPTH:
            raise Malformed(where, f"nested deeper than {MAX_FACT_DEPTH} levels")
        t = type(x)
        if t is dict:
            for k, item in x.items():
                if type(k) is not str or len(k) > MAX_NAME or not k.isascii():
                    _str(k, f"{where} key", MAX_NAME)
                    scrub = True
                chars += len(k)
                stack.append((item, depth + 1))
        elif t is list:
            stack.extend((item, depth + 1) for item in x)
        elif t is str:
            if len(x) > MAX_TEXT or not x.isascii():
                _str(x, f"{where} value", MAX_TEXT)
                scrub = True
            chars += len(x)
        elif t is float:
            _number(x, f"{where} value")
        elif t not in (int, bool) and x is not None:
            raise Malformed(where, f"a value of type {t.__name__}")
    return _scrub(top) if scrub else top


def _typed(v: Any, schema: Any, where: str) -> None:
    """`v` is of the FACT_TYPES type `schema` (recursion as deep as the schema, never as the data)."""
    if schema is int:
        if type(v) not in (int, bool):
            raise Malformed(where, f"expected an integer, got {type(v).__name__}")
    elif schema in (str, bool):
        if type(v) is not schema:
            raise Malformed(where, f"expected {schema.__name__}, got {type(v).__name__}")
    elif type(schema) is list:
        if type(v) is not list:
            raise Malformed(where, f"expected a list, got {type(v).__name__}")
        if _all_of(v, schema[0]):  # a shape, a list of names: no message to prepare per item
            return
        for i, item in enumerate(v):
            _typed(item, schema[0], f"{where}[{i}]")
    elif type(schema) is tuple and schema[0] == "nullable":
        if v is not None:
            _typed(v, schema[1], where)
    elif type(schema) is tuple:  # ("tuple", T1, T2, ...)
        if type(v) is not list or len(v) != len(schema) - 1:
            raise Malformed(where, f"expected a list of {len(schema) - 1} values")
        for i, (item, t) in enumerate(zip(v, schema[1:], strict=True)):
            _typed(item, t, f"{where}[{i}]")
    elif "map" in schema:
        if type(v) is not dict:
            raise Malformed(where, f"expected an object, got {type(v).__name__}")
        if _all_of(v.values(), schema["map"]):
            return
        for k, item in v.items():
            _typed(item, schema["map"], f"{where}[{_key(k)}]")
    else:  # fixed fields
        _dict(v, where, keys=frozenset(schema), required=schema)
        for k, t in schema.items():
            _typed(v[k], t, f"{where}.{k}")


_SCALARS = {int: (int, bool), str: (str,), bool: (bool,)}  # what _typed accepts for each scalar schema


def _all_of(items: Any, schema: Any) -> bool:
    """Are all `items` of the scalar FACT_TYPES type `schema`? False for any other schema: the caller then checks
    item by item (and says where)."""
    ok = _SCALARS.get(schema) if type(schema) is type else None
    return ok is not None and all(type(x) in ok for x in items)


def validate_hello(doc: Any) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """The worker's hello, after it loaded the submission: {"names": {public name: kind}, "errors": {module:
    {"exception", "message", "where", "cells"?}}, "layers": {layer: bool}, "cpu": {phase: seconds}}.

    Returns fresh copies of `names` and `errors` (each error with exactly those four fields, "cells" a list);
    raises Malformed (a ValueError) for anything else. "layers" and "cpu" may be left out (the layers that
    count come in the worker's first message, before any learner code ran: session.Worker.confined), but
    when present they are checked too."""
    d = _dict(doc, "hello", keys=HELLO_KEYS, required=("names", "errors"))
    names: dict[str, str] = {}
    for k, v in _dict(d["names"], "hello.names").items():
        if k not in ALL_NAMES:
            raise Malformed("hello.names", f"{_key(k)} is not a name the kata asks for")
        names[k] = _str(v, f"hello.names[{_key(k)}]", MAX_KIND)
    errors: dict[str, dict[str, Any]] = {}
    for module, err in _dict(d["errors"], "hello.errors").items():
        at = f"hello.errors[{_key(module)}]"
        e = _dict(err, at, keys=ERROR_KEYS, required=("exception", "message"))
        cells = e.get("cells", [])
        if type(cells) is not list or len(cells) > MAX_CELLS:
            raise Malformed(f"{at}.cells", f"expected a list of at most {MAX_CELLS} cell labels")
        errors[module] = {"exception": _str(e["exception"], f"{at}.exception", MAX_NAME),
                          "message": _str(e["message"], f"{at}.message", MAX_TEXT),
                          "where": _where(e.get("where"), f"{at}.where"),
                          "cells": [_str(c, f"{at}.cells", MAX_NAME) for c in cells]}
    for k, v in _dict(d.get("layers", {}), "hello.layers").items():
        if type(v) is not bool:
            raise Malformed(f"hello.layers[{_key(k)}]", f"expected true or false, got {type(v).__name__}")
    for k, v in _dict(d.get("cpu", {}), "hello.cpu").items():
        _number(v, f"hello.cpu[{_key(k)}]")
    return names, errors


def _entry(v: Any, where: str) -> dict[str, Any]:
    """One case of an answer, checked field by field; a fresh dict of the fields present."""
    e = _dict(v, where, keys=CASE_KEYS, required=("status",))
    if type(e["status"]) is not str or e["status"] not in STATUSES:
        raise Malformed(f"{where}.status", f"not one of {', '.join(sorted(STATUSES))}")
    out: dict[str, Any] = {"status": e["status"]}
    if "facts" in e:
        out["facts"] = _facts(e["facts"], f"{where}.facts")
        for k, t in FACT_TYPES.items():
            if k in out["facts"]:
                _typed(out["facts"][k], t, f"{where}.facts.{k}")
    for k, limit in (("message", MAX_TEXT), ("msgid", MAX_TEXT), ("exception", MAX_NAME)):
        if k in e:
            out[k] = _str(e[k], f"{where}.{k}", limit)
    if "params" in e:
        params = _dict(e["params"], f"{where}.params")
        out["params"] = {k: _str(p, f"{where}.params[{_key(k)}]", MAX_TEXT) if type(p) is str
                         else _number(p, f"{where}.params[{_key(k)}]", bools=True) for k, p in params.items()}
    if "where" in e:
        out["where"] = _where(e["where"], f"{where}.where")
    if "ms" in e:
        out["ms"] = _number(e["ms"], f"{where}.ms")
    return out


def _tensor_problem(t: Any) -> str:
    if type(t) is not torch.Tensor:
        return f"a {type(t).__name__}, not a tensor"
    if t.dtype not in TENSOR_DTYPES:
        return f"dtype {t.dtype}"
    if t.layout != torch.strided or t.device.type != "cpu" or t.requires_grad:
        return "not a plain CPU tensor"
    if t.dim() > MAX_NDIM:
        return f"{t.dim()} dimensions (at most {MAX_NDIM})"
    if t.numel() > MAX_CASE_ELEMENTS:
        return f"{t.numel()} elements"
    return ""


def validate_answer(doc: Any, tensors: Mapping[str, Any], asked: Collection[str]
                    ) -> tuple[dict[str, dict[str, Any] | Malformed], dict[str, dict[str, torch.Tensor]]]:
    """A step's answer: {"cases": {case: entry}, "cpu"?: seconds}, with tensors named "<case>/<key>".

    Raises Malformed when the answer as a whole does not fit (the document's shape, a case or a tensor
    for a case that was not asked, too many elements in all). Otherwise returns, for each asked case the
    worker answered, its checked entry or the Malformed that refuses it (a bad field, a bad tensor, a
    tensor for a case that did not run), and each case's tensors. Cases the worker left out are absent."""
    d = _dict(doc, "answer", keys=ANSWER_KEYS, required=("cases",))
    if "cpu" in d:
        _number(d["cpu"], "answer.cpu")
    cases = _dict(d["cases"], "answer.cases")
    asked = set(asked)
    for name in cases:
        if name not in asked:
            raise Malformed("answer.cases", f"case {_key(name)} was not asked for")
    if type(tensors) is not dict or len(tensors) > 4096:
        raise Malformed("tensors", "expected at most 4096 named tensors")
    by_case: dict[str, dict[str, torch.Tensor]] = {}
    bad: dict[str, Malformed] = {}
    total = 0
    for name, t in tensors.items():
        case, sep, key = name.partition("/") if type(name) is str else ("", "", "")
        if not sep or case not in asked or not key or len(key) > MAX_NAME:
            raise Malformed("tensors", f"{_key(name)} is not <case>/<key> for a case that was asked for")
        problem = "named like a fact" if key in FACT_TYPES else _tensor_problem(t)
        if problem:
            bad.setdefault(case, Malformed(f"tensor {_key(name)}", problem))
            continue
        total += t.numel()
        if total > MAX_STEP_ELEMENTS:
            raise Malformed("tensors", f"more than {MAX_STEP_ELEMENTS} elements in all")
        by_case.setdefault(case, {})[key] = t
    out: dict[str, dict[str, Any] | Malformed] = {}
    for name, v in cases.items():
        try:
            entry = _entry(v, f"answer.cases[{_key(name)}]")
        except Malformed as exc:
            out[name] = exc
            continue
        mine = by_case.get(name, {})
        if name in bad:
            out[name] = bad[name]
        elif mine and entry["status"] != "ok":
            out[name] = Malformed(f"answer.cases[{_key(name)}]", f"tensors for a case whose status is "
                                  f"{entry['status']}")
        elif sum(t.numel() for t in mine.values()) > MAX_CASE_ELEMENTS:
            out[name] = Malformed(f"answer.cases[{_key(name)}]", f"more than {MAX_CASE_ELEMENTS} elements")
        else:
            out[name] = entry
    return out, {n: ts for n, ts in by_case.items() if isinstance(out.get(n), dict)}
