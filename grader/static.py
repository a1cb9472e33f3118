"""Facts read from the submission's source text (never executed here): e.g. loops in a function."""

from __future__ import annotations

import ast
from typing import Any

from .ingest import Submission
from .registry import BY_ID

LOOPS = (ast.For, ast.While, ast.AsyncFor, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# the functions a check asks to be loop-free (step 4: "no Python loops")
LOOP_FREE = BY_ID["all_tokens"].names


def analyse(sub: Submission) -> dict[str, Any]:
    loops: dict[str, list[int]] = {}
    for unit in sub.units:
        if not any(f"def {name}" in unit.source for name in LOOP_FREE):
            continue  # parsing costs: only the units that define one of them
        try:
            tree = ast.parse(unit.source)
        except (SyntaxError, ValueError, RecursionError):
            continue
        for node in tree.body:  # the public functions are defined at the top level
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in LOOP_FREE:
                # the last definition wins, as it does when the code runs
                loops[node.name] = sorted({n.lineno for n in ast.walk(node) if isinstance(n, LOOPS)})
    return {"loops": loops}
