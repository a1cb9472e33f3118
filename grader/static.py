"""Facts read from the submission's source text (never executed here): e.g. loops in a function."""

from __future__ import annotations

import ast
from typing import Any

from .ingest import Submission
from .registry import ALL_NAMES

LOOPS = (ast.For, ast.While, ast.AsyncFor, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def analyse(sub: Submission) -> dict[str, Any]:
    loops: dict[str, list[int]] = {}
    for unit in sub.units:
        try:
            tree = ast.parse(unit.source)
        except (SyntaxError, ValueError, RecursionError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in ALL_NAMES:
                # the last definition wins, as it does when the code runs
                loops[node.name] = sorted({n.lineno for n in ast.walk(node) if isinstance(n, LOOPS)})
    return {"loops": loops}
