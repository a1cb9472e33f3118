"""The code a Jupyter kernel has run, graded in the sandbox: the notebook's check() and nbgrader's hidden tests.

The kernel's cells become a temporary notebook that the usual engine grades in a worker; calls back into the
grader (imports of grader, check(...), assert_step(...)) are neutralised first so they never run there.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# lines that call back into the grader: never executed inside the sandboxed worker
_GRADER_LINE = re.compile(
    r"^\s*(from\s+grader(\.\w+)*\s+import\b|import\s+grader\b|"
    r"(grader\.)?(nbgrader_support\.)?assert_step\s*\(|(grader\.)?check\s*\(\s*(['\")]|\*))")





def neutralize(source: str) -> str:
    """Replace grader calls (imports of grader, check(...), assert_step(...)) by `pass`, keeping blocks valid."""
    lines = source.splitlines()
    for i, line in enumerate(lines):
        if _GRADER_LINE.match(line):
            indent = line[: len(line) - len(line.lstrip())]
            lines[i] = f"{indent}pass  # {line.strip()[:60]} (graded separately)"
    return "\n".join(lines)


def notebook_json(sources: Iterable[str]) -> str:
    cells = [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
              "source": neutralize(s)} for s in sources]
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})


def kernel_sources(namespace: dict[str, Any] | None = None, drop_current: bool = True) -> list[str] | None:
    """The raw source of every cell the running IPython kernel has executed (None outside IPython)."""
    hist: list[str] | None = None
    try:
        from IPython import get_ipython

        ip = get_ipython()
        if ip is not None:
            hist = list(ip.history_manager.input_hist_raw)
    except ImportError:  # pragma: no cover - IPython ships with Jupyter
        ip = None
    if hist is None and namespace is not None and isinstance(namespace.get("_ih"), list):
        hist = [str(s) for s in namespace["_ih"]]
    if hist is None:
        return None
    if drop_current and hist:
        hist = hist[:-1]  # the cell running right now (the test cell / the check() call)
    return [h for h in hist if h.strip()]


def grade_sources(sources: list[str], steps: list[str], secret: str | None = None, lang: str = "en"):
    """Grade source snippets (notebook cells, in order) with the sandboxed engine."""
    from grader.grading.engine import grade

    with tempfile.TemporaryDirectory(prefix="attn-kata-nb-") as tmp:
        path = Path(tmp) / "notebook.ipynb"
        path.write_text(notebook_json(sources), encoding="utf-8")
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            return grade(path, steps=steps, secret=secret, lang=lang)


