"""Where a daemon's socket lives: a folder only this user can enter, checked before every use.

The folder is `attn-kata/` in ATTN_KATA_RUNTIME_DIR (tests), $XDG_RUNTIME_DIR or /run/user/UID (what
platformdirs' user_runtime_dir names), or else `attn-kata-UID/` in the temp dir. Whichever it is, it must be a
real folder (not a link) owned by this user with no access for anyone else (0700), or no daemon is used: a
folder someone else made could hand us their socket, or read ours."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

assert sys.platform != "win32", "POSIX only: on Windows every command grades in its own process"  # typed so

RUNTIME_ENV = "ATTN_KATA_RUNTIME_DIR"


class Unavailable(Exception):
    """No daemon can be used here (no safe folder, no answer): grade in-process."""


def _private(folder: Path) -> Path:
    """`folder`, created 0700 if missing, once it is proven to be ours alone."""
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise Unavailable(f"cannot make {folder}: {exc}") from None
    try:
        st = os.lstat(folder)
    except OSError as exc:
        raise Unavailable(f"cannot read {folder}: {exc}") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise Unavailable(f"{folder} is not a private folder of this user (0700)")
    return folder


def _base_ok(base: str) -> bool:
    """A runtime dir is used only if it is a folder of ours that nobody else may write into."""
    try:
        st = os.stat(base)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def folder() -> Path:
    uid = os.getuid()
    for base in (os.environ.get(RUNTIME_ENV), os.environ.get("XDG_RUNTIME_DIR"), f"/run/user/{uid}"):
        if base and _base_ok(base):
            return _private(Path(base) / "attn-kata")
    tmp = os.environ.get("TMPDIR") or "/tmp"
    return _private(Path(tmp) / f"attn-kata-{uid}")


@dataclass(frozen=True)
class Paths:
    socket: Path
    lock: Path  # held (flock) by the running daemon for its whole life; holds its pid
    log: Path  # the daemon's own messages (never the learner's output)


def for_this_kata() -> Paths:
    """One daemon per user and per installed kata (this grader package run by this Python)."""
    package = Path(__file__).resolve().parent.parent
    key = hashlib.sha256(f"{package}\0{sys.executable}".encode()).hexdigest()[:12]
    where = folder()
    return Paths(where / f"{key}.sock", where / f"{key}.lock", where / f"{key}.log")
