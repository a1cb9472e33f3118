"""Settings every part shares, importable without torch (the batch's coordinating process never imports it)."""

from __future__ import annotations

import os
from pathlib import Path

# where `import grader` comes from: a checkout's root (editable install) or site-packages (a wheel)
IMPORT_ROOT = Path(__file__).resolve().parent.parent
# A wheel carries the kata as package data (setup.py copies exercises/ and solutions/ there at build time; the
# checkout keeps one copy, at its root). KATA_ROOT holds exercises/ and solutions/ in either case.
BUNDLED_KATA = Path(__file__).resolve().parent / "kata"
KATA_ROOT = BUNDLED_KATA if (BUNDLED_KATA / "solutions").is_dir() else IMPORT_ROOT

DEFAULT_TIMEOUT = 10.0  # seconds per step, wall clock, enforced from outside the worker
LOAD_TIMEOUT = 30.0


def grader_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # here: ~40 ms that a warm `check` never needs

    try:
        return version("attention-kata")
    except PackageNotFoundError:
        return "0+unknown"


def resolve_secret(secret: str | None) -> str:
    return secret if secret is not None else os.environ.get("ATTN_KATA_SECRET", "")
