"""Where the learner's workspace is (searched upwards from any folder inside it, as git does), and where its
progress is kept (in the workspace when it is writable, otherwise in the user's state folder).

A workspace is a folder holding `.attn-kata/workspace.json` (written by `attn-kata init`), or the `exercises/`
folder of a checkout of the kata, found from the checkout's root or from anywhere inside the checkout.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

from grader.registry import STEPS

STATE_DIR = ".attn-kata"  # inside a workspace: the marker, progress, hints, reset's backups
MARKER = "workspace.json"
APP = "attention-kata"


class NoWorkspace(LookupError):
    """No workspace in `start` or any folder above it."""


def is_marked(folder: Path) -> bool:
    return (folder / STATE_DIR / MARKER).is_file()


def _holds_steps(folder: Path) -> bool:
    return folder.is_dir() and any((folder / s.file).is_file() for s in STEPS)


def find_workspace(start: Path) -> Path:
    """The workspace `start` is in: the nearest folder at or above it that is marked, or that has an `exercises/`
    holding step files (a checkout's root, seen from itself or from any folder inside it). Raises NoWorkspace."""
    start = Path(os.path.abspath(start))
    for folder in (start, *start.parents):
        if is_marked(folder):
            return folder
        if _holds_steps(folder / "exercises"):
            return folder / "exercises"
    raise NoWorkspace(str(start))


def resolve(path: str | Path | None, cwd: Path | None = None) -> Path:
    """The workspace a command works on: `--path` as given, else the one found from the current folder, shown
    relative to it when it is below it (`exercises`, not /home/…/kata/exercises); the current folder itself, or
    one above it, by its full path (a report is titled with the workspace's name, which `.` does not have)."""
    if path is not None:
        return Path(path)
    here = Path(os.path.abspath(cwd or Path.cwd()))
    found = find_workspace(here)
    with contextlib.suppress(ValueError):
        rel = found.relative_to(here)
        if rel.parts:
            return rel
    return found


def marker(workspace: str | Path) -> dict:
    try:
        data = json.loads((Path(workspace) / STATE_DIR / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def submission(workspace: str | Path) -> Path:
    """What `check` grades: the workspace's notebook when `init --notebook` made one, else its step files."""
    ws = Path(workspace)
    notebook = marker(ws).get("notebook")
    if isinstance(notebook, str) and notebook and (ws / Path(notebook).name).is_file():
        return ws / Path(notebook).name
    return ws


def _writable(folder: Path) -> bool:
    """Can we write here? Tried, not inferred from mode bits (root ignores them; a read-only mount does not)."""
    try:
        folder.mkdir(exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
        return True
    except OSError:
        return False


def user_state_dir(workspace: str | Path) -> Path:
    """The user's state folder for this workspace (platformdirs), one per workspace path."""
    import platformdirs

    key = hashlib.sha256(str(Path(os.path.abspath(workspace))).encode()).hexdigest()[:16]
    return Path(platformdirs.user_state_dir(APP, appauthor=False)) / "workspaces" / key


def state_dir(workspace: str | Path) -> Path:
    """Where progress, hints and backups go: the workspace's own .attn-kata/ when it can be written, else the
    user's state folder."""
    ws = Path(workspace)
    local = ws / STATE_DIR
    if not ws.is_dir() or _writable(local):
        return local
    return user_state_dir(ws)


def state_files(workspace: str | Path) -> tuple[Path, Path]:
    """(where state is written, where it may also be read): a read-only workspace may carry earlier progress."""
    ws = Path(workspace)
    return state_dir(ws) / "state.json", ws / STATE_DIR / "state.json"
