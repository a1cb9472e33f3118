"""Static facts read on the trusted side: step 4's "no Python loops" follows what each public name is bound
to at the end of its module (def, assignment, lambda, import from another unit) and the submission's
module-level code it calls; correct vectorised code has no loops."""

from __future__ import annotations

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
    assert loops(py(source))["all_attention_scores"] == [6]


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
