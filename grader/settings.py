"""Settings every part shares, importable without torch (the batch's coordinating process never imports it)."""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import sys
from pathlib import Path

from grader import limits

# where `import grader` comes from: a checkout's root (editable install) or site-packages (a wheel)
IMPORT_ROOT = Path(__file__).resolve().parent.parent
# A wheel carries the kata as package data (setup.py copies exercises/ and solutions/ there at build time; the
# checkout keeps one copy, at its root). KATA_ROOT holds exercises/ and solutions/ in either case.
BUNDLED_KATA = Path(__file__).resolve().parent / "kata"
KATA_ROOT = BUNDLED_KATA if (BUNDLED_KATA / "solutions").is_dir() else IMPORT_ROOT

DEFAULT_TIMEOUT = limits.STEP_TIMEOUT  # seconds per step, wall clock, enforced from outside the worker
LOAD_TIMEOUT = limits.LOAD_TIMEOUT
BACKENDS = ("linux", "portable")


def linux_backend_available() -> bool:
    """Has this Python what the Linux backend (a zygote forking sandboxed workers) needs?"""
    import socket

    return (sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(os, "pidfd_open")
            and hasattr(socket, "AF_UNIX") and hasattr(socket, "SO_PEERCRED") and os.path.isdir("/proc/self"))


def portable_reason() -> str:
    """Why the portable backend grades here, in a few words."""
    if os.environ.get("ATTN_KATA_BACKEND", "").strip().lower() == "portable":
        return "ATTN_KATA_BACKEND=portable"
    if not sys.platform.startswith("linux"):
        return f"{sys.platform} has no Linux sandbox"
    return "this Python lacks what the Linux backend needs (fork, pidfd, Unix sockets, /proc)"


@functools.cache
def backend() -> str:
    """Which worker backend grades here, decided once: ATTN_KATA_BACKEND (linux or portable) if set, else the Linux
    backend where it can run and the portable one (grader/pool/portable.py) everywhere else. `attn-kata doctor`
    shows it and every report records it."""
    asked = os.environ.get("ATTN_KATA_BACKEND", "").strip().lower()
    if asked in BACKENDS:
        return asked if asked != "linux" or linux_backend_available() else "portable"
    return "linux" if linux_backend_available() else "portable"


def grader_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # here: ~40 ms that a warm `check` never needs

    try:
        return version("attention-kata")
    except PackageNotFoundError:
        return "0+unknown"


NO_KEY = "none"  # the fingerprint recorded for a run without a key


def key_fingerprint(secret: str) -> str:
    """The one id a key is recorded by (a batch's index, every report graded with a key, the summary, the
    gradebook): HMAC-SHA256 keyed by the secret over a fixed label, its first 16 hex digits; never the key, nor
    anything a key could be read back from but by guessing it. "none" without a key. Computed in the trusted
    process that holds the key."""
    if not secret:
        return NO_KEY
    return hmac.new(secret.encode(), b"attn-kata key fingerprint", hashlib.sha256).hexdigest()[:16]


def resolve_secret(secret: str | None) -> str:
    return secret if secret is not None else os.environ.get("ATTN_KATA_SECRET", "")
