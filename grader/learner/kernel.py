"""The code a Jupyter kernel has run, graded in the sandbox: the notebook's check() and nbgrader's hidden tests.

The kernel's cells become a temporary notebook that the usual engine grades in a worker; calls back into the
grader (imports of grader, check(...), assert_step(...)) are neutralised first so they never run there.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# lines that call back into the grader: never executed inside the sandboxed worker (the fallback for a cell
# that does not parse)
_GRADER_LINE = re.compile(
    r"^\s*(from\s+grader(\.\w+)*\s+import\b|import\s+grader\b|"
    r"(grader\.)?(nbgrader_support\.)?assert_step\s*\(|(grader\.)?check\s*\(\s*(['\")]|\*))")
_MAGIC = re.compile(r"^\s*([%!]|\?\?|\w+\?$)")  # as grader.grading.ingest strips them
SKIPPED = "__attn_kata_skipped__"
# The first cell of every replay: check(), assert_step() and the grader package as objects whose calls do nothing,
# so `r = check("softmax")` or `grader.check(...)` anywhere in a cell replays as a no-op, never a NameError.
PRELUDE = f"""class _AttnKataSkipped:
    def __call__(self, *args, **kwargs):
        return None

    def __getattr__(self, name):
        return self


{SKIPPED} = _AttnKataSkipped()
check = assert_step = grader = {SKIPPED}
del _AttnKataSkipped
"""
_CALLS = {"check", "assert_step"}


def _is_grader_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "grader" and not node.level
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] == "grader" for a in node.names)


def _is_grader_call(node: ast.stmt) -> bool:
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    fn = node.value.func
    if isinstance(fn, ast.Name):
        return fn.id in _CALLS
    root = fn
    while isinstance(root, ast.Attribute):
        root = root.value
    # grader.check(...), not a learner's own self.check(...)
    return isinstance(fn, ast.Attribute) and fn.attr in _CALLS and isinstance(root, ast.Name) and root.id == "grader"


def _rebind(node: ast.Import | ast.ImportFrom) -> str:
    """`from grader import check as c` -> `c = __attn_kata_skipped__`; `import grader.x` -> `grader = …`."""
    names = [a.asname or (a.name if isinstance(node, ast.ImportFrom) else a.name.split(".")[0])
             for a in node.names if a.name != "*"]
    return " = ".join([*dict.fromkeys(names), SKIPPED]) if names else "pass"


def neutralize(source: str) -> str:
    """Replace what calls back into the grader by no-ops, keeping blocks valid: an import of grader binds its
    names to the skipped object (PRELUDE), a statement that only calls check()/assert_step() becomes `pass`."""
    lines = source.splitlines()
    try:  # magics parse as blank lines here; grader.grading.ingest strips them from the cell later
        tree = ast.parse("\n".join("" if _MAGIC.match(line) else line for line in lines))
    except SyntaxError:
        return _neutralize_lines(lines)
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or not (_is_grader_import(node) or _is_grader_call(node)):
            continue
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        line = lines[first]
        indent = line[: len(line) - len(line.lstrip())]
        code = _rebind(node) if isinstance(node, (ast.Import, ast.ImportFrom)) else "pass"
        lines[first] = f"{indent}{code}  # {line.strip()[:60]} (graded separately)"
        for i in range(first + 1, last + 1):
            lines[i] = ""
    return "\n".join(lines)


def _neutralize_lines(lines: list[str]) -> str:
    for i, line in enumerate(lines):
        if _GRADER_LINE.match(line):
            indent = line[: len(line) - len(line.lstrip())]
            lines[i] = f"{indent}pass  # {line.strip()[:60]} (graded separately)"
    return "\n".join(lines)


def notebook_json(sources: Iterable[str]) -> str:
    cells: list[dict[str, Any]] = [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": source}
        for source in (PRELUDE, *(neutralize(s) for s in sources))]
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


def grade_sources(sources: list[str], steps: list[str] | None, secret: str | None = None, lang: str = "en"):
    """Grade source snippets (notebook cells, in order) with the sandboxed engine."""
    from grader.grading.engine import grade

    with tempfile.TemporaryDirectory(prefix="attn-kata-nb-") as tmp:
        path = Path(tmp) / "notebook.ipynb"
        path.write_text(notebook_json(sources), encoding="utf-8")
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            return grade(path, steps=steps, secret=secret).worded(lang)


def grade_sources_with_matrices(sources: list[str], steps: list[str] | None, secret: str | None = None,
                                lang: str = "en"):  # type: ignore[no-untyped-def]
    """As grade_sources, and also the attention-weight matrices both sides produced (grader.render.heatmap), for
    the heatmaps the terminal shows: (report, matrices by step)."""
    from grader.grading import engine
    from grader.render import heatmap

    with tempfile.TemporaryDirectory(prefix="attn-kata-nb-") as tmp:
        path = Path(tmp) / "notebook.ipynb"
        path.write_text(notebook_json(sources), encoding="utf-8")
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            report = engine.grade(path, steps=steps, secret=secret, pictures=True).worded(lang)
            return report, heatmap.of_report(report)


