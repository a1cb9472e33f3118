"""The reference implementations (solutions/), loaded as a plain namespace of public names."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

from .registry import STEPS


def solutions_dir() -> Path:
    override = os.environ.get("ATTN_KATA_SOLUTIONS")
    return Path(override) if override else Path(__file__).resolve().parent.parent / "solutions"


@functools.cache
def namespace() -> dict[str, Any]:
    """Import solutions/*.py under their bare names, then take them out of sys.modules again,
    so a learner's `from causal_attention import ...` never finds the reference."""
    from .worker import _UnitFinder

    root = solutions_dir()
    units = [(s.id, str(root / s.file), (root / s.file).read_text(encoding="utf-8")) for s in STEPS]
    finder = _UnitFinder(units)
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
