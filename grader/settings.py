"""Settings every part shares, importable without torch (the batch's coordinating process never imports it)."""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

# the kata's folder: exercises/, solutions/ and grader/ side by side
KATA_ROOT = Path(__file__).resolve().parent.parent

DEFAULT_TIMEOUT = 10.0  # seconds per step, wall clock, enforced from outside the worker
LOAD_TIMEOUT = 30.0


def grader_version() -> str:
    try:
        return version("attention-kata")
    except PackageNotFoundError:
        return "0+unknown"


def resolve_secret(secret: str | None) -> str:
    return secret if secret is not None else os.environ.get("ATTN_KATA_SECRET", "")
