"""The reference implementations (solutions/), loaded as a plain namespace of public names."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

from grader.registry import STEPS, Step
from grader.settings import KATA_ROOT


def solutions_dir() -> Path:
    override = os.environ.get("ATTN_KATA_SOLUTIONS")
    return Path(override) if override else KATA_ROOT / "solutions"


@functools.cache
def namespace() -> dict[str, Any]:
    """Import solutions/*.py under their bare names, then take them out of sys.modules again,
    so a learner's `from causal_attention import ...` never finds the reference."""
    from grader.worker.serve import UnitFinder

    root = solutions_dir()
    units = [(s.id, str(root / s.file), (root / s.file).read_text(encoding="utf-8")) for s in STEPS]
    finder = UnitFinder(units)
    sys.meta_path.insert(0, finder)
    ns: dict[str, Any] = {}
    try:
        for s in STEPS:
            mod = __import__(s.id)
            ns.update({n: getattr(mod, n) for n in s.names})
    finally:
        sys.meta_path.remove(finder)
        for s in STEPS:
            sys.modules.pop(s.id, None)
    return ns


def defining_step(name: str) -> Step:
    return next(s for s in STEPS if name in s.names)


def units_for(uses: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """The reference modules a worker needs for a step that builds on `uses`: the steps defining those
    names and, transitively, the steps those build on (solutions/multihead_wrapper.py imports
    causal_attention). Sent to a worker only once the verdicts of all of these steps are final."""
    root = solutions_dir()
    order: list[Step] = []
    todo = [defining_step(n) for n in uses]
    while todo:
        s = todo.pop()
        if s not in order:
            order.append(s)
            todo += [defining_step(n) for n in s.uses]
    order.sort(key=lambda s: s.number)
    return [(s.id, f"reference/{s.file}", (root / s.file).read_text(encoding="utf-8")) for s in order]


def depth(step: Step) -> int:
    """0 for a step that builds on nothing; else one more than the deepest step it builds on."""
    return 0 if not step.uses else 1 + max(depth(defining_step(n)) for n in step.uses)
