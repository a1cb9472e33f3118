"""What a warm daemon fixed when it started: if any of it changes, the daemon is out of date and stops.

The grader's code and message catalogues, the kata's solutions (the reference it computed once), the
project's metadata (its version), torch's install, this Python, and the settings read once at start-up
(threads, the temp dir, a solutions override, test faults). Files are compared by path, size and mtime: a
stat per file, about a millisecond for the whole kata, so the client and the daemon both check on every
request. ATTN_KATA_DAEMON_FINGERPRINT (os.pathsep-separated paths) replaces the files watched, for tests: their
daemons then restart when the test says, not whenever someone edits the checkout the suite runs from."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

from grader.settings import KATA_ROOT

PROTOCOL = "1"  # bump when the client/daemon messages change
EXTRA_ENV = "ATTN_KATA_DAEMON_FINGERPRINT"
FIXED_AT_START = ("ATTN_KATA_SOLUTIONS", "ATTN_KATA_TEST_FAULTS", "ATTN_KATA_DEBUG", "ATTN_KATA_DAEMON_IDLE",
                  EXTRA_ENV, "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TMPDIR", "PYTHONPATH")
PACKAGE = Path(__file__).resolve().parent.parent


def roots() -> list[Path]:
    chosen = os.environ.get(EXTRA_ENV)
    if chosen:
        return [Path(p) for p in chosen.split(os.pathsep) if p]
    solutions = os.environ.get("ATTN_KATA_SOLUTIONS")
    return [PACKAGE, KATA_ROOT / "solutions", PACKAGE.parent / "pyproject.toml",
            *([Path(solutions)] if solutions else [])]


def _stat_line(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}\0missing\n"
    return f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n"


def _files(root: Path) -> list[str]:
    if not root.is_dir():
        return [str(root)]
    out = []
    for where, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")  # Python writes bytecode there as it imports
        out += [os.path.join(where, f) for f in sorted(files) if not f.endswith(".pyc")]
    return out


def fingerprint() -> str:
    h = hashlib.sha256(f"{PROTOCOL}\0{sys.executable}\0{sys.version}\n".encode())
    for root in roots():
        for path in _files(root):
            h.update(_stat_line(path).encode())
    torch = importlib.util.find_spec("torch")  # finds it without importing it
    h.update(_stat_line(torch.origin if torch and torch.origin else "torch").encode())
    for var in FIXED_AT_START:
        h.update(f"{var}={os.environ.get(var)}\n".encode())
    return h.hexdigest()[:24]
