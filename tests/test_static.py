"""The trusted side reads a submission's text before its worker's budget starts (grader/grading/ingest.py parses each
unit once; grader/grading/flags.py looks for signs of studying the grader): that reading is linear in the text.

Step 4's "no Python loops" was read here too, by a static reading with a list of the ways Python binds a name; it is
behaviour now (grader/worker/counting.py, tests/test_loops.py), and these submissions, written against that reading,
stay as inputs the text reading must get through quickly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

VECTORISED = """
import torch

def all_attention_scores(inputs):
    return inputs @ inputs.T

def all_attention_weights(attn_scores):
    return torch.softmax(attn_scores, dim=-1)

def all_context_vectors(attn_weights, inputs):
    return attn_weights @ inputs
"""


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
    "bindings_times_reads.py": _one_name_bound_and_read_many_times,  # the static reading: reads x bindings
    "names_times_cells.ipynb": _many_names_then_many_cells,  # the static reading: a copy of the namespace per cell
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
    """What the trusted side does with a submission's text before its worker's budget starts (the parse and the
    flags) is linear in the text: each of these ran for minutes at a fraction of the 2 MiB cap (then with the static
    reading of step 4). A complexity test, not a timing one: the time-out is far below what each took."""
    path = tmp_path / name
    path.write_text(READ_BOMBS[name](), encoding="utf-8")
    code = ("import sys\nfrom grader.grading import flags, ingest\nsub = ingest.read_submission(sys.argv[1])\n"
            "print([type(u.parsed).__name__ for u in sub.units][:3], flags.scan(sub)[:3])")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
