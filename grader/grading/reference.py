"""The reference implementations (solutions/), loaded as a plain namespace of public names."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grader.registry import STEPS, Step
from grader.settings import KATA_ROOT
from grader.submission import step_path


def solutions_dir() -> Path:
    override = os.environ.get("ATTN_KATA_SOLUTIONS")
    return Path(override) if override else KATA_ROOT / "solutions"


@functools.cache
def namespace() -> dict[str, Any]:
    """Import solutions/*.py under their bare names (a step's id, its numbered name served as the same module), then
    take them out of sys.modules again, so a learner's `from causal_attention import ...` never finds the reference.
    A solutions folder (ATTN_KATA_SOLUTIONS) may name its files either way (grader.submission.step_path)."""
    from grader.worker.serve import UnitFinder

    root = solutions_dir()
    paths = [(s, step_path(root, s)) for s in STEPS]
    units = [(s.id, str(path), path.read_text(encoding="utf-8")) for s, path in paths]
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
            sys.modules.pop(s.stem, None)
    return ns


def defining_step(name: str) -> Step:
    return next(s for s in STEPS if name in s.names)


@contextlib.contextmanager
def standins_for(ns: dict[str, Any], step: Step) -> Iterator[dict[str, Any]]:
    """The reference namespace with the public stand-ins (grader.worker.standins) in place of the earlier steps'
    names `step` builds on, also where the reference's own code looks them up (its modules' globals: they are out
    of sys.modules, so through the functions' __globals__). The worker does the same to the learner's code."""
    from grader.worker.standins import STANDINS

    if not step.uses:
        yield ns
        return
    saved: list[tuple[dict[str, Any], str, Any]] = []
    for name in step.names:
        for globs in _globals_of(ns[name]):
            for use in step.uses:
                saved.append((globs, use, globs.get(use, _ABSENT)))
                globs[use] = STANDINS[use]
    try:
        yield {**ns, **{use: STANDINS[use] for use in step.uses}}
    finally:
        for globs, use, old in reversed(saved):
            if old is _ABSENT:
                globs.pop(use, None)
            else:
                globs[use] = old


_ABSENT = object()


def _globals_of(obj: Any) -> list[dict[str, Any]]:
    """The module globals a reference function or class reads its free names from."""
    if isinstance(obj, type):
        funcs = [f for f in vars(obj).values() if isinstance(f, types.FunctionType)]
    else:
        funcs = [obj] if isinstance(obj, types.FunctionType) else []
    out: dict[int, dict[str, Any]] = {id(f.__globals__): f.__globals__ for f in funcs}
    return list(out.values())
