"""Step 4's "no Python loops" is behaviour: the worker counts the work each function does at 6 and 24 tokens (line
events, torch calls, torch operations: grader/worker/counting.py) and a count that grows, or a torch call per
token, is a loop, whatever its form.
Each attack here runs in a real worker, in the real sandbox, and scores what its twin scores: a loop loses the loop
point as the plain loop does, loop-free code keeps it. The single-file forms are fixtures (tests/fixtures/buggy/
all_loop_*.py lose the point, tests/fixtures/correct/all_*.py keep it: test_fixtures)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from grader.grading import engine
from grader.i18n import translate
from grader.report import StepResult

pytestmark = pytest.mark.sandbox  # the counting runs in the confined worker
ROOT = Path(__file__).resolve().parent.parent
SOLUTION = (ROOT / "solutions" / "step04_all_tokens.py").read_text(encoding="utf-8")
LOOP_CHECK = "no Python loops: matrix products only"
REST = textwrap.dedent("""
    def all_attention_weights(attn_scores):
        return torch.softmax(attn_scores, dim=-1)


    def all_context_vectors(attn_weights, inputs):
        return attn_weights @ inputs
    """)
PLAIN_LOOP = "import torch\n\ndef all_attention_scores(inputs):\n    return torch.stack([inputs @ q for q in inputs])\n"


def graded(path: Path, lang: str = "en") -> StepResult:
    return engine.grade(path, steps=["all_tokens"]).worded(lang).steps[0]


def loop_check(step: StepResult) -> tuple[bool, str]:
    check = next(c for c in step.checks if c.name in (LOOP_CHECK, translate("zh", LOOP_CHECK)))
    return check.passed, check.message


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return folder


def test_a_loop_in_a_helper_module_of_the_workspace(tmp_path: Path) -> None:
    """The loop is in another file of the workspace, which all_tokens.py imports: its lines are the learner's too."""
    loop = write(tmp_path / "loop", {"helpers.py": "import torch\ndef pairwise(x):\n    rows = []\n"
                                                   "    for q in x:\n        rows.append(x @ q)\n"
                                                   "    return torch.stack(rows)\n",
                                     "all_tokens.py": "import torch\nfrom helpers import pairwise\n"
                                                      "def all_attention_scores(inputs):\n"
                                                      "    return pairwise(inputs)\n" + REST})
    twin = write(tmp_path / "twin", {"helpers.py": "def pairwise(x):\n    return x @ x.T\n",
                                     "all_tokens.py": (tmp_path / "loop" / "all_tokens.py").read_text()})
    got, honest = graded(loop), graded(twin)
    assert honest.score == honest.max_score, honest
    assert got.score == honest.max_score - 1, got
    passed, message = loop_check(got)
    assert not passed and "all_attention_scores runs a Python loop over the tokens" in message, message
    assert "inputs @ inputs.T" in message, message


# attacks on the counting itself: each does the plain loop's work while trying to hide it; each scores as the plain
# loop (max - 1), and says why where the count was not believed
HIDING = {
    # a tracer switched off and back on around the loop (an audit hook in the worker sees both calls)
    "settrace_off": ("import sys, torch\ndef all_attention_scores(inputs):\n    t = sys.gettrace()\n"
                     "    sys.settrace(None)\n    out = torch.stack([inputs @ q for q in inputs])\n"
                     "    sys.settrace(t)\n    return out\n", "tracing was switched off"),
    # the loop in a thread: neither the tracer nor torch's modes (one per thread) would see it
    "thread": ("import threading, torch\ndef all_attention_scores(inputs):\n    out = []\n"
               "    t = threading.Thread(target=lambda: out.extend(inputs @ q for q in inputs))\n"
               "    t.start()\n    t.join()\n    return torch.stack(out)\n", "it started a thread"),
    # torch's function and dispatch modes taken off their stacks, the per-token calls made from C
    "modes_off": ("import torch\nfrom torch.utils._python_dispatch import _disable_current_modes\n"
                  "def all_attention_scores(inputs):\n"
                  "    with torch._C.DisableTorchFunction(), _disable_current_modes():\n"
                  "        return torch.stack(list(map(torch.mv, [inputs] * len(inputs), inputs)))\n",
                  "modes were removed"),
    # a TorchScript loop: no Python line runs per token, but an operation does
    "torchscript": ("import torch\n@torch.jit.script\ndef all_attention_scores(inputs):\n"
                    "    out = torch.empty(inputs.shape[0], inputs.shape[0])\n"
                    "    for i in range(inputs.shape[0]):\n        out[i] = inputs @ inputs[i]\n    return out\n",
                    "runs a Python loop"),
    # loops only when there are more tokens than the book's 6
    "loops_past_six": ("import torch\ndef all_attention_scores(inputs):\n    if len(inputs) <= 6:\n"
                       "        return inputs @ inputs.T\n"
                       "    return torch.stack([inputs @ q for q in inputs])\n", "runs a Python loop"),
}


@pytest.mark.parametrize("name", list(HIDING))
def test_hiding_a_loop_from_the_count_loses_the_point_as_the_loop_does(tmp_path: Path, name: str) -> None:
    source, says = HIDING[name]
    attack, twin = tmp_path / "attack.py", tmp_path / "twin.py"
    attack.write_text(source + REST, encoding="utf-8")
    twin.write_text(PLAIN_LOOP + REST, encoding="utf-8")
    got, want = graded(attack), graded(twin)
    assert want.score == want.max_score - 1, want
    assert got.score == want.score, (got.score, [(c.name, c.message) for c in got.checks if not c.passed])
    passed, message = loop_check(got)
    assert not passed and says in message, message


def test_the_book_rewritten_in_a_later_cell_keeps_the_point(tmp_path: Path) -> None:
    """The book computes all scores with two loops first, then with inputs @ inputs.T: a learner who follows it in a
    notebook redefines the function in a later cell. The function graded is the last one, and it is loop-free (the
    reading of the text kept the first on record, and took the point). A later cell that raises before its def
    leaves the loops graded."""
    book_loops = ("import torch\ndef all_attention_scores(inputs):\n"
                  "    out = torch.empty(inputs.shape[0], inputs.shape[0])\n"
                  "    for i, x_i in enumerate(inputs):\n        for j, x_j in enumerate(inputs):\n"
                  "            out[i, j] = torch.dot(x_i, x_j)\n    return out\n")

    def notebook(name: str, *cells: str) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
            {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c}
            for c in cells]}), encoding="utf-8")
        return path

    rewritten = graded(notebook("rewritten.ipynb", book_loops + REST, SOLUTION))
    assert rewritten.score == rewritten.max_score, [(c.name, c.message) for c in rewritten.checks]
    stopped = graded(notebook("stopped.ipynb", book_loops + REST, "1 / 0\n" + SOLUTION))
    assert stopped.score == stopped.max_score - 1 and not loop_check(stopped)[0], stopped


def test_the_finding_in_chinese(tmp_path: Path) -> None:
    path = tmp_path / "loop.py"
    path.write_text(PLAIN_LOOP + REST, encoding="utf-8")
    passed, message = loop_check(graded(path, lang="zh"))
    assert not passed
    assert "all_attention_scores 在用 Python 循环遍历各个 token" in message and "inputs @ inputs.T" in message, message


def test_loop_free_code_that_runs_through_torchs_machinery_keeps_the_point(tmp_path: Path) -> None:
    """TorchScript, vmap and a softmax module run Python code of torch's own with its modes off its stack (the
    machinery that calls a mode): none of that is the learner's, and none of it takes the point."""
    path = tmp_path / "machinery.py"
    path.write_text("import torch\n@torch.jit.script\ndef all_attention_scores(inputs):\n"
                    "    return inputs @ inputs.T\n_softmax = torch.nn.Softmax(dim=-1)\n"
                    "def all_attention_weights(attn_scores):\n    return _softmax(attn_scores)\n"
                    "def all_context_vectors(attn_weights, inputs):\n"
                    "    return torch.vmap(lambda row: row @ inputs)(attn_weights)\n", encoding="utf-8")
    step = graded(path)
    assert step.score == step.max_score, [(c.name, c.message) for c in step.checks if not c.passed]
