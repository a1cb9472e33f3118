"""Static facts read on the trusted side: step 4's "no Python loops" follows what each public name is bound
to at the end of its module (def, assignment, lambda, import from another unit) and the submission's
module-level code it calls; correct vectorised code has no loops."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.grading import ingest, static
from grader.grading.ingest import Submission, Unit

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

VECTORISED = """
import torch

def all_attention_scores(inputs):
    return inputs @ inputs.T

def all_attention_weights(attn_scores):
    return torch.softmax(attn_scores, dim=-1)

def all_context_vectors(attn_weights, inputs):
    return attn_weights @ inputs
"""

LOOPING_HELPER = """
import torch

def _pairwise(inputs):
    out = torch.empty(inputs.shape[0], inputs.shape[0])
    for i, x_i in enumerate(inputs):
        out[i] = inputs @ x_i
    return out
"""


def py(source: str) -> Submission:
    return Submission(Path("submission.py"), "py", [Unit("submission", "submission.py", textwrap.dedent(source))])


def directory(**files: str) -> Submission:
    units = [Unit(name, f"{name}.py", textwrap.dedent(src)) for name, src in files.items()]
    return Submission(Path("sub"), "dir", units)


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(textwrap.dedent(source).splitlines(), start=1) if text in line)


def loops(sub: Submission) -> dict[str, list]:
    return static.analyse(sub)["loops"]


# ------------------------------------------------------------------------------ correct code: no loops


@pytest.mark.parametrize("path", ["solutions", "tests/fixtures/correct/book_verbatim.py",
                                  "tests/fixtures/correct/vectorised_einsum.py"])
def test_correct_vectorised_code_has_no_loops(path: str) -> None:
    found = loops(ingest.read_submission(ROOT / path))
    assert set(found) == set(static.LOOP_FREE)
    assert all(lines == [] for lines in found.values()), found


@pytest.mark.parametrize("source", [
    VECTORISED,
    VECTORISED.replace("inputs @ inputs.T", "torch.einsum('id,jd->ij', inputs, inputs)"),
    VECTORISED.replace("attn_weights @ inputs", "torch.matmul(attn_weights, inputs)"),
    # the book's own way: scores from a helper that is itself vectorised, and aliases to library functions
    VECTORISED + "\ndef _scores(x):\n    return x @ x.T\n\nall_attention_scores = _scores\n",
    VECTORISED + "\nall_attention_weights = lambda s: torch.softmax(s, dim=-1)\n",
    VECTORISED + "\nall_attention_weights = torch.nn.functional.softmax\n",
])
def test_vectorised_forms_have_no_loops(source: str) -> None:
    assert loops(py(source)) == {n: [] for n in static.LOOP_FREE}


def test_a_loop_elsewhere_in_the_module_does_not_count() -> None:
    source = VECTORISED + LOOPING_HELPER + "\nfor _ in range(2):\n    pass\n"
    assert loops(py(source)) == {n: [] for n in static.LOOP_FREE}


def test_a_parameter_named_like_a_looping_helper_is_not_the_helper() -> None:
    source = LOOPING_HELPER + "\ndef all_attention_scores(_pairwise):\n    return _pairwise @ _pairwise.T\n"
    assert loops(py(source))["all_attention_scores"] == []


# ------------------------------------------------------------------------------ every way of binding a loop


def test_a_def_with_a_loop() -> None:
    assert loops(ingest.read_submission(FIXTURES / "buggy" / "all_loops.py"))["all_attention_scores"] == [7, 8]


def test_an_assignment_to_a_looping_helper() -> None:
    source = VECTORISED + LOOPING_HELPER + "\nall_attention_scores = _pairwise\n"
    found = loops(py(source))
    assert found["all_attention_scores"] == [line_of(source, "for i, x_i")] == [17]
    assert found["all_context_vectors"] == []


def test_the_last_binding_wins() -> None:
    looping = VECTORISED + LOOPING_HELPER + "\nall_attention_scores = _pairwise\n"
    assert loops(py(looping))["all_attention_scores"]
    # redefined after the alias: the vectorised def is what runs
    again = looping + "\ndef all_attention_scores(inputs):\n    return inputs @ inputs.T\n"
    assert loops(py(again))["all_attention_scores"] == []


def test_an_alias_is_bound_to_what_the_name_held_then() -> None:
    source = LOOPING_HELPER + "\nall_attention_scores = _pairwise\n\ndef _pairwise(x):\n    return x @ x.T\n"
    assert loops(py(source))["all_attention_scores"] == [6]


def test_a_chain_of_aliases_and_a_tuple_assignment() -> None:
    source = LOOPING_HELPER + "\n_a = _pairwise\n_b = _a\nall_attention_scores, all_attention_weights = _b, _a\n"
    found = loops(py(source))
    assert found["all_attention_scores"] == [6]
    assert found["all_attention_weights"] == [6]


def test_a_lambda_with_a_comprehension() -> None:
    source = "import torch\nall_context_vectors = lambda w, x: torch.stack([r @ x for r in w])\n"
    assert loops(py(source))["all_context_vectors"] == [2]


def test_a_def_calling_a_looping_helper_transitively() -> None:
    source = LOOPING_HELPER + """
def _middle(x):
    return _pairwise(x)

def all_attention_scores(inputs):
    return _middle(inputs)
"""
    assert loops(py(source))["all_attention_scores"] == [6]


def test_a_helper_passed_to_another_function() -> None:
    source = "import functools\n" + LOOPING_HELPER + "\nall_attention_scores = functools.partial(_pairwise)\n"
    assert loops(py(source))["all_attention_scores"] == [7]


def test_a_decorated_or_wrapped_looping_class() -> None:
    source = """
class _Scores:
    def __call__(self, x):
        return [row @ x.T for row in x]

all_attention_scores = _Scores()
"""
    assert loops(py(source))["all_attention_scores"] == [4]


def test_recursion_and_mutual_references_terminate() -> None:
    source = """
def _a(x):
    return _b(x)

def _b(x):
    while False:
        pass
    return _a(x)

def all_attention_scores(inputs):
    return _a(inputs)
"""
    assert loops(py(source))["all_attention_scores"] == [2, 5, 6]  # the while, and _a and _b calling each other


@pytest.mark.parametrize("source", [
    # one row per call, until there are none: a loop written as recursion (red team 10)
    "import torch\ndef _rows(x, i=0):\n    if i == x.shape[0]:\n        return []\n"
    "    return [x @ x[i]] + _rows(x, i + 1)\n"
    "def all_attention_scores(inputs):\n    return torch.stack(_rows(inputs))\n",
    # iter(callable, sentinel) calls a Python function until it returns the sentinel
    "import torch\ndef all_attention_scores(inputs):\n    it = iter(inputs)\n"
    "    return torch.stack(list(iter(lambda: inputs @ next(it, None), None)))\n",
])
def test_recursion_and_iter_with_a_sentinel_are_loops(source: str) -> None:
    assert loops(py(source))["all_attention_scores"], source


def test_a_name_imported_from_another_unit() -> None:
    sub = directory(all_tokens="from helpers import _pairwise as all_attention_scores\n" + VECTORISED.split(
        "def all_attention_scores")[0], helpers=LOOPING_HELPER)
    assert loops(sub)["all_attention_scores"] == ["6 (helpers.py)"]


def test_an_import_of_an_import_and_a_module_attribute() -> None:
    sub = directory(
        all_tokens="import middle\n\nall_attention_scores = middle.scores\n\n"
                   "def all_context_vectors(w, x):\n    return middle.helpers._pairwise(x)\n",
        middle="import helpers\nfrom helpers import _pairwise as scores\n",
        helpers=LOOPING_HELPER)
    found = loops(sub)
    assert found["all_attention_scores"] == ["6 (helpers.py)"]
    assert found["all_context_vectors"] == ["6 (helpers.py)"]


def test_a_def_calling_an_imported_helper() -> None:
    sub = directory(all_tokens="import helpers\nfrom helpers import _pairwise\n\n"
                               "def all_attention_scores(inputs):\n    return _pairwise(inputs)\n\n"
                               "def all_context_vectors(w, x):\n    return helpers._pairwise(x)\n",
                    helpers=LOOPING_HELPER)
    found = loops(sub)
    assert found["all_attention_scores"] == ["6 (helpers.py)"]
    assert found["all_context_vectors"] == ["6 (helpers.py)"]


def test_a_star_import() -> None:
    sub = directory(all_tokens="from helpers import *\n",
                    helpers=LOOPING_HELPER + "\nall_attention_scores = _pairwise\n")
    assert loops(sub)["all_attention_scores"] == ["6 (helpers.py)"]


def test_the_first_module_that_binds_the_name_is_the_one_graded() -> None:
    # the worker takes a public name from the first module (in the kata's file order) that has it
    sub = directory(all_tokens=VECTORISED, causal_attention=LOOPING_HELPER + "\nall_attention_scores = _pairwise\n")
    assert loops(sub)["all_attention_scores"] == []


def test_notebook_cells_share_one_namespace() -> None:
    cells = [LOOPING_HELPER, VECTORISED, "all_attention_scores = _pairwise\n"]
    sub = Submission(Path("nb.ipynb"), "ipynb", [Unit("notebook", f"cell {i}", textwrap.dedent(c))
                                                 for i, c in enumerate(cells, start=1)])
    found = loops(sub)
    assert found["all_attention_scores"] == ["6 (cell 1)"]
    assert found["all_attention_weights"] == []


def test_import_cycles_syntax_errors_and_deep_nesting_are_harmless() -> None:
    deep = "if True:\n" + "".join("    " * i + "if True:\n" for i in range(1, 90)) + "    " * 90 + "pass\n"
    sub = directory(all_tokens="from helpers import *\nfrom helpers import _pairwise as all_attention_scores\n"
                               + deep,
                    helpers="from all_tokens import *\n" + LOOPING_HELPER,
                    broken="all_attention_weights = (\n")
    assert loops(sub)["all_attention_scores"] == ["7 (helpers.py)"]


def test_units_not_mentioning_the_names_are_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    real = static.ast.parse
    monkeypatch.setattr(static.ast, "parse", lambda src, *a, **k: parsed.append(src) or real(src, *a, **k))
    sub = directory(dot_scores="def attention_scores(inputs, query):\n    return inputs @ query\n",
                    all_tokens=VECTORISED)
    loops(sub)
    assert parsed == [textwrap.dedent(VECTORISED)]


# ------------------------------------------------------------------------------ names bound at run time

_LOOPY = "def _loopy(inputs):\n    return inputs\n"
REBINDINGS = {  # each rebinds all_tokens.all_attention_scores where a reading of the text cannot follow
    "dunder_setattr": "import all_tokens\nall_tokens.__setattr__('all_attention_scores', _loopy)\n",
    "builtins_dict": "import builtins as b\nimport all_tokens\nb.__dict__['set' + 'attr'](all_tokens, "
                     "'all_attention_scores', _loopy)\n",
    "dict_update": "import all_tokens\nall_tokens.__dict__.update(all_attention_scores=_loopy)\n",
    "getattr_dict": "import all_tokens\ngetattr(all_tokens, '__di' + 'ct')['all_attention_scores'] = _loopy\n",
    "gc_objects": "import gc\nfor o in gc.get_objects():\n    pass\n",
    "frame_globals": "import sys\nsys._getframe(0).f_globals['x'] = _loopy\n",
    "module_loop_variable": "for name in ('W_query',):\n    pass\ndef f(m):\n    setattr(m, name, _loopy)\n",
    "self_is_a_module": "def f(self):\n    setattr(self, 'all_attention_scores', _loopy)\n",
    "prefix_of_the_name": "class X:\n    def __init__(self, m):\n        self.m = m\n"
                          "        setattr(self.m, 'all_' + 'attention_scores', _loopy)\n",
    "loop_variable_rebound": "def f(m):\n    for name in ('W_query',):\n        pass\n"
                             "    name = 'all_attention_scores'\n    setattr(m, name, _loopy)\n",
    "import_from_builtins": "from builtins import setattr as s\n",
    "builtins_name": "__builtins__['set' + 'attr']\n",
    "fullwidth_getattr": "import all_tokens\n\uff47\uff45\uff54\uff41\uff54\uff54\uff52(all_tokens, name)\n",
    "attrgetter": "import operator\nimport all_tokens\noperator.attrgetter('__dict__')(all_tokens)\n",
    "ctypes": "import ctypes as c\nc.memmove(0, 0, 0)\n",
    # a tracer can make later lines not run, without an exception (frame.f_lineno = ...)
    "settrace": "import sys\nsys.settrace(None)\n",
    "threading_setprofile": "import threading\nthreading.setprofile(None)\n",
    "settrace_imported": "from sys import settrace as st\n",
    "settrace_passed": "import sys\nhooks = [sys.settrace]\n",
    "frame_jump": "def tracer(frame, event, arg):\n    frame.f_lineno = 3\n",
    "setattr_frame_jump": "def tracer(frame, event, arg):\n    setattr(frame, 'f_lineno', 3)\n",
    "getattr_settrace": "import sys\ngetattr(sys, 'settrace')(None)\n",
    "sys_monitoring": "import sys\nsys.monitoring.use_tool_id(0, 'x')\n",
    # a builtin called under another name, and library calls that write a namespace for the caller (red team 9)
    "setattr_alias": "import all_tokens\n_s = setattr\n_s(all_tokens, 'all_attention_scores', _loopy)\n",
    "exec_alias": "_x = exec\n_x('import all_tokens; all_tokens.all_attention_scores = _loopy')\n",
    "map_exec": "list(map(exec, ['import all_tokens']))\n",
    "update_wrapper": "import functools, types, all_tokens\nfunctools.update_wrapper(all_tokens, "
                      "types.SimpleNamespace(all_attention_scores=_loopy), assigned=())\n",
    "wraps_imported": "from functools import wraps\n",
    "mock_patch": "from unittest import mock\nmock.patch('all_tokens.all_attention_scores', _loopy).start()\n",
    # builtins reached as an attribute, sys.modules under other names, code run from strings (red team 10)
    "builtins_by_self": "len.__self__.globals()['all_attention_scores'] = _loopy\n",
    "builtins_setattr_by_self": "import all_tokens\nlen.__self__.setattr(all_tokens, 'all_attention_scores', _loopy)\n",
    "getmodule": "import inspect\ninspect.getmodule(len).exec('x = 1')\n",
    "sys_modules_imported": "from sys import modules as _m\n_m['all_tokens'].all_attention_scores = _loopy\n",
    "sys_alias_modules": "import sys as _s\n_s.modules['all_tokens'].x = 1\n",
    "pickle": "import pickle, base64\npickle.loads(base64.b64decode(b'gAQ='))\n",
    "timeit": "import timeit\ntimeit.timeit('import all_tokens', number=1)\n",
    "code_interpreter": "import code\ncode.InteractiveInterpreter().runsource('import all_tokens')\n",
    "cprofile": "import cProfile\ncProfile.run('import all_tokens')\n",
    "getattr_static": "from inspect import getattr_static\ngetattr_static(_loopy, '__globals__')\n",
    # the same store, but what is stored carries the submission's code, or `nn` is not torch's
    "softmax_store_with_code": "import torch.nn as nn\nclass M:\n    def __init__(self):\n"
                               "        self.softmax = nn.Softmax(_loopy)\n",
    "softmax_store_nn_rebound": "import torch.nn as nn\nnn = type('N', (), {'Softmax': lambda **k: _loopy})\n"
                                "class M:\n    def __init__(self):\n        self.softmax = nn.Softmax(dim=-1)\n",
}


@pytest.mark.parametrize("name", list(REBINDINGS))
def test_names_bound_at_run_time_are_seen(name: str) -> None:
    """Each of these scored 5 of 5 with a looping function before (the grader read the text, the worker
    graded what the rebinding left); now the line is named and the loop point is not vouched for."""
    sub = directory(all_tokens=VECTORISED, softmax=_LOOPY + REBINDINGS[name])
    assert static.analyse(sub)["dynamic"], name


HONEST = {  # names the text pins down: a module's layers named in __init__, exercise 3.1's weight copy
    "f_string": "import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                "        for i in range(2):\n            setattr(self, f'layer_{i}', torch.nn.Linear(3, 2))\n",
    "loop_over_names": "class M:\n    def __init__(self, w, b):\n        for name in ('wq', 'wk', 'wv'):\n"
                       "            setattr(self, name, w)\n            setattr(self, 'b' + name[1], b)\n",
    "getattr_copy": "def transfer_weights(sa_v2, sa_v1):\n    for name in ('W_query', 'W_key', 'W_value'):\n"
                    "        getattr(sa_v1, name).copy_(getattr(sa_v2, name).weight.t())\n",
    "constant_getattr_and_eval_mode": "def f(model):\n    model.eval()\n    return getattr(model, 'W_query')\n",
    "a_variable_named_monitoring": "monitoring = True\ndef f(x, monitoring=False):\n    return x\n",
    # a later step keeps torch's softmax module under the name step 4's code reads (torch.softmax): it holds no code
    # of the submission (red team 10: this lost the loop point)
    "softmax_module_on_self": "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n"
                              "        super().__init__()\n        self.softmax = nn.Softmax(dim=-1)\n",
}


@pytest.mark.parametrize("name", list(HONEST))
def test_names_the_text_pins_down_are_not_run_time_bindings(name: str) -> None:
    sub = directory(all_tokens=VECTORISED, softmax=HONEST[name])
    assert static.analyse(sub)["dynamic"] == [], name


# ------------------------------------------------------------------------------ bindings the symbolic run missed

_LOOPING = "import torch\ndef _loopy(inputs):\n    return torch.stack([inputs @ row for row in inputs])\n"
_VEC_BODY = VECTORISED.split("import torch")[1]
HIDDEN = {  # each left all_attention_scores bound to _loopy at run time while the reading saw the vectorised def
    "annotation_alone": {"all_tokens": _LOOPING + "all_attention_scores = _loopy\nall_attention_scores: int\n"},
    "for_target": {"all_tokens": VECTORISED + _LOOPING + "for all_attention_scores in [_loopy]:\n    pass\n"},
    "with_target": {"all_tokens": VECTORISED + _LOOPING + "import contextlib\nwith contextlib.nullcontext(_loopy)"
                                  " as all_attention_scores:\n    pass\n"},
    "nested_unpack": {"all_tokens": VECTORISED + _LOOPING + "(all_attention_scores, _), = ((_loopy, 0),)\n"},
    "match_capture": {"all_tokens": VECTORISED + _LOOPING + "match _loopy:\n    case all_attention_scores:\n"
                                                            "        pass\n"},
    "walrus": {"all_tokens": VECTORISED + _LOOPING + "(all_attention_scores := _loopy)\n"},
    # the parts of a def or class that run at module level (red team 9)
    "walrus_in_a_default": {"all_tokens": VECTORISED + _LOOPING + "def _u(x=(all_attention_scores := _loopy)):\n"
                                                                  "    pass\n"},
    "walrus_in_a_decorator": {"all_tokens": VECTORISED + _LOOPING + "@(lambda g: g)\ndef _u(*, y=(all_attention_"
                                                                    "scores := _loopy)):\n    pass\n"},
    "walrus_in_an_annotation": {"all_tokens": VECTORISED + _LOOPING + "def _u(x: (all_attention_scores := _loopy)):"
                                                                      "\n    pass\n"},
    "walrus_in_a_class_base": {"all_tokens": VECTORISED + _LOOPING + "class _C((all_attention_scores := _loopy) "
                                                                     "and object):\n    pass\n"},
    "global_in_a_function": {"all_tokens": VECTORISED + _LOOPING + "def _i():\n    global all_attention_scores\n"
                                                                   "    all_attention_scores = _loopy\n_i()\n"},
    "if_else": {"all_tokens": _LOOPING + "if True:\n    all_attention_scores = _loopy\nelse:\n"
                + textwrap.indent(_VEC_BODY, "    ")},
    "try_body": {"all_tokens": _LOOPING + "try:\n    all_attention_scores = _loopy\n    1 / 0\n"
                 + textwrap.indent(_VEC_BODY, "    ") + "except ZeroDivisionError:\n    pass\n"},
    "late_binding": {"all_tokens": VECTORISED + _LOOPING + "all_attention_scores = [_loopy][0]\n"
                                                           "def _loopy(x):\n    return x @ x.T\n"},
    "self_import": {"all_tokens": VECTORISED + _LOOPING + "from all_tokens import _loopy as all_attention_scores\n"},
    "star_import_with_all": {"all_tokens": "def _impl(x):\n    return x @ x.T\ndef all_attention_scores(x):\n"
                                           "    return _impl(x)\nfrom helpers import *\n",
                             "helpers": _LOOPING + "__all__ = ['_impl']\n_impl = _loopy\n"},
    "inner_parameter_shadows": {"all_tokens": _LOOPING + "def all_attention_scores(inputs):\n    def _u(_loopy):\n"
                                                         "        return 0\n    return _loopy(inputs)\n"},
    "default_shadows": {"all_tokens": _LOOPING + "def all_attention_scores(inputs, _loopy=_loopy):\n"
                                                 "    return _loopy(inputs)\n"},
    "augmented_assignment": {"all_tokens": _LOOPING + "class _S:\n    def __call__(self, x):\n"
                                                      "        return _loopy(x)\n    def __iadd__(self, o):\n"
                                                      "        return self\n"
                                                      "all_attention_scores = _S()\ndel _S\n"
                                                      "all_attention_scores += 0\n"},
    "except_as_unbinds": {"all_tokens": VECTORISED + "try:\n    1 / 0\nexcept ZeroDivisionError as "
                                                     "all_attention_scores:\n    pass\n",
                          "self_attention_v1": _LOOPING + "all_attention_scores = _loopy\n"},
    "import_in_the_body": {"all_tokens": "def all_attention_scores(inputs):\n    import helpers\n"
                                         "    return helpers._loopy(inputs)\n", "helpers": _LOOPING},
}


@pytest.mark.parametrize("name", list(HIDDEN))
def test_bindings_in_branches_targets_and_scopes_are_followed(name: str) -> None:
    """A binding that may or may not run (a branch, a try, a loop) leaves the name holding either value; a
    target (for, with, unpacking, match, walrus, global) holds a part of its value; code reads a name when it
    runs, so it is followed to every value the name ever holds; an inner scope's names shadow only there."""
    assert loops(directory(**HIDDEN[name]))["all_attention_scores"], name


def test_a_notebook_cell_that_raises_keeps_what_it_bound() -> None:
    cells = [_LOOPING + VECTORISED, "all_attention_scores = _loopy\n1 / 0\n" + VECTORISED]
    sub = Submission(Path("nb.ipynb"), "ipynb", [Unit("notebook", f"cell {i}", textwrap.dedent(c))
                                                 for i, c in enumerate(cells, start=1)])
    assert loops(sub)["all_attention_scores"] == ["3 (cell 1)"]


@pytest.mark.parametrize("write", ["all_tokens._pairwise = _loopy", "setattr(all_tokens, '_pairwise', _loopy)",
                                   "import torch\ntorch.softmax = _loopy"])
def test_another_file_assigning_what_the_functions_read_is_seen(write: str) -> None:
    """all_attention_scores calls a loop-free helper; another file replaces that helper (or torch.softmax,
    which all_attention_weights calls) by attribute: what runs loops, with no binding the symbolic run sees."""
    sub = directory(all_tokens="import torch\ndef _pairwise(inputs):\n    return inputs @ inputs.T\n"
                               "def all_attention_scores(inputs):\n    return _pairwise(inputs)\n"
                               "def all_attention_weights(attn_scores):\n"
                               "    return torch.softmax(attn_scores, dim=-1)\n"
                               "def all_context_vectors(attn_weights, inputs):\n    return attn_weights @ inputs\n",
                    softmax=_LOOPY + "import all_tokens\n" + write + "\n")
    assert static.analyse(sub)["dynamic"], write


# ------------------------------------------------------------------------------ a notebook rewritten as one learns

BOOK_LOOPS = """
import torch

def all_attention_scores(inputs):
    out = torch.empty(inputs.shape[0], inputs.shape[0])
    for i, x_i in enumerate(inputs):
        for j, x_j in enumerate(inputs):
            out[i, j] = torch.dot(x_i, x_j)
    return out
"""


def _cells(*cells: str) -> Submission:
    return Submission(Path("nb.ipynb"), "ipynb", [Unit("notebook", f"cell {i}", textwrap.dedent(c))
                                                 for i, c in enumerate(cells, start=1)])


def test_a_rewrite_in_a_later_cell_is_not_taken_on_trust_and_the_learner_is_told() -> None:
    """The book computes all scores with two loops first, then with `inputs @ inputs.T`: a learner who follows it
    in a notebook redefines the function in a later cell. Any cell may stop before its def, and whether it did
    only the worker knows, whose records the learner's code can rewrite (red team 9 forged them without a name
    the grader looks for): so the loops count, and the report names both cells and says what to do."""
    found = static.analyse(_cells(BOOK_LOOPS, VECTORISED))
    assert found["loops"]["all_attention_scores"]
    assert found["rebound"] == {"all_attention_scores": ["cell 1", "cell 2"]}
    assert static.analyse(_cells(BOOK_LOOPS))["rebound"] == {}  # defined once: nothing to say


def test_a_rewritten_notebook_says_to_delete_the_version_with_loops(tmp_path: Path) -> None:
    from grader.grading import engine

    nb = _notebook(tmp_path / "rewritten.ipynb", BOOK_LOOPS + _REST, VECTORISED)
    step = engine.grade(nb, steps=["all_tokens"]).steps[0]
    loop_check = next(c for c in step.checks if "loops" in c.name)
    assert not loop_check.passed and step.score == step.max_score - loop_check.max_score, step
    assert "cell 1, cell 2" in loop_check.message and "delete or rename" in loop_check.message, loop_check.message


def _notebook(path: Path, *cells: str) -> Path:
    import json

    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": textwrap.dedent(c)}
        for c in cells]}))
    return path


_REST = VECTORISED.split("    return inputs @ inputs.T\n")[1]  # weights and context vectors, vectorised
_LOOP_NAMED = BOOK_LOOPS.replace("def all_attention_scores", "def _loop_scores")
SKIPS_THE_REWRITE = {  # cell 1 keeps the loops running although cell 2 redefines the function
    # a tracer jumps over cell 2's lines: no exception, so the worker says the cell ran to its end
    "tracer": BOOK_LOOPS + _REST + "import sys\ndef _tr(frame, event, arg):\n"
              "    if frame.f_code.co_filename == 'cell 2':\n"
              "        if event == 'line' and frame.f_lineno < 20:\n            frame.f_lineno = 20\n"
              "        return _tr\nsys.settrace(_tr)\n",
    # a thread rebinds the name through `global` once every cell has run
    "thread_global": _LOOP_NAMED + "all_attention_scores = _loop_scores\n" + _REST
                     + "import threading, time\ndef _later():\n    time.sleep(0.05)\n"
                     "    global all_attention_scores\n    all_attention_scores = _loop_scores\n"
                     "threading.Thread(target=_later, daemon=True).start()\n",
    # cell 2 raises before its def, and the worker's record of it is made to say it did not (red team 9): no
    # name the grader looks for, no flag; the text alone decides, so forging the record gains nothing
    "forged_cell_record": BOOK_LOOPS + _REST + "import inspect, sys\n_w = inspect.getmodule(sys.meta_path[0])\n"
                          "class _Rec(dict):\n    def setdefault(self, key, default=None):\n"
                          "        return [] if key == 'cells' else dict.setdefault(self, key, default)\n"
                          "_d = _w.describe_error\n_w.describe_error = lambda exc, labels: _Rec(_d(exc, labels))\n",
}


@pytest.mark.parametrize("name", list(SKIPS_THE_REWRITE))
def test_the_rewrite_cannot_be_claimed_by_skipping_it(tmp_path: Path, name: str) -> None:
    """The worker's word that cell 2 ran vouches for its def only where nothing could have undone it: each
    attack scores what its honest twin (the loops, no rewrite at all) scores."""
    from grader.grading import engine

    second = VECTORISED + "\n" * (20 - VECTORISED.count("\n") - 1) + "x = 1\n"  # line 20: the tracer's target
    if name == "forged_cell_record":
        second = "1 / 0\n" + second
    attack = _notebook(tmp_path / "attack.ipynb", SKIPS_THE_REWRITE[name], second)
    twin = _notebook(tmp_path / "twin.ipynb", BOOK_LOOPS + _REST)
    got, want = (engine.grade(p, steps=["all_tokens"]).steps[0] for p in (attack, twin))
    assert want.score == want.max_score - 1, want
    assert got.score == want.score, got


# ------------------------------------------------------------------------------ the trusted side's reading is bounded

def _many_names_then_many_cells() -> str:
    names = [f"n{i}" for i in range(100_000)]
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": s}
        for s in ["# all_attention_scores\n" + "=".join(names) + "=0\n", *["0"] * 4095]]})


def _one_name_bound_and_read_many_times() -> str:
    reads = ",".join(["g"] * 100)
    helpers = "\n".join(f"def f{i}():{reads}" for i in range(100))
    calls = ",".join(f"f{i}" for i in range(100))
    return ("import torch\n" + "g=" * 10_000 + "0\n" + helpers + "\n" + "".join(
        f"def {name}(inputs):\n    {calls}\n    return torch.softmax(inputs @ inputs.T, dim=-1)\n"
        for name in ("all_attention_scores", "all_attention_weights", "all_context_vectors")))


def _notebook_text(*cells: str) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c} for c in cells]})


def _many_setattrs_beside_many_reads() -> str:
    names = [f"n{i}" for i in range(40_000)]
    return _notebook_text("def all_attention_scores(x):\n    return (" + ",".join(names) + ")\n",
                          "def g(a, b):\n" + "    getattr(a, 'z' + b)\n" * 10_000)


READ_BOMBS = {  # each took the trusted grading process 1-100+ s, with no time-out, before ed1475f or this change
    # red team 11
    "a_line_that_backtracked.py": lambda: "import torch\ntorch" + " " * 300_000 + "#\n",  # a regex: quadratic
    "bindings_times_reads.py": _one_name_bound_and_read_many_times,  # static.loops: reads x bindings
    "names_times_cells.ipynb": _many_names_then_many_cells,  # static.env: a copy of the namespace per cell
    # red team 12
    "comment_dots.ipynb": lambda: _notebook_text(VECTORISED, "#.\n" * 40_000),  # a regex from every dot
    "a_line_of_commas.py": lambda: "import torch\n" + "F," * 100_000 + "F\n",  # a regex: quadratic
    "nested_defs.py": lambda: "\n".join([*(" " * i + f"def f{i}():" for i in range(95)), " " * 95 + "getattr(a, 'b')",
                                         " " * 95 + "a" + ",a" * 100_000]) + "\n",  # a walk per enclosing def
    "setattrs_times_reads.ipynb": _many_setattrs_beside_many_reads,  # every unsafe name scanned per getattr
    # the review of this change: the file's imports were walked again for every library store
    "library_stores.py": lambda: VECTORISED + "import torch.nn as nn\nclass M:\n    def __init__(self):\n"
                                 + "        self.softmax = nn.Softmax(dim=-1)\n" * 20_000,
}


@pytest.mark.parametrize("name", list(READ_BOMBS))
def test_reading_the_text_costs_time_linear_in_its_size(tmp_path: Path, name: str) -> None:
    """What the trusted side does with a submission's text before its worker's budget starts (the static analysis
    and the flags) is linear in the text: each of these ran for minutes at a fraction of the 2 MiB cap. A complexity
    test, not a timing one: the time-out is over 20 times what each takes now, and far below what it took."""
    path = tmp_path / name
    path.write_text(READ_BOMBS[name](), encoding="utf-8")
    code = ("import sys\nfrom grader.grading import flags, ingest, static\nsub = ingest.read_submission(sys.argv[1])\n"
            "r = static.analyse(sub)\nflags.scan(sub)\nprint(r['unread'], r['loops'].get('all_attention_scores'))")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_an_expression_too_deep_to_follow_is_unread_not_a_crash() -> None:
    """`setattr(x, a + a + ... + a)`: the name it sets is followed through a chain too deep for this process's
    stack. The unit counts as unread (the loop point is not vouched for), never a traceback from the grader."""
    text = "import torch\ndef all_attention_scores(inputs):\n    return inputs @ inputs.T\n"
    found = static.analyse(py(text + "x = 1\na = 'q'\nsetattr(x, " + "+".join(["a"] * 1200) + ", 1)\n"))
    assert found["unread"] == ["submission.py"], found
