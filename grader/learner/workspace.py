"""Where the learner's workspace is (searched upwards from any folder inside it, as git does), and where its
progress is kept (in the workspace when it is writable, otherwise in the user's state folder).

What a workspace is, and how one is found from a folder inside it, is grader.submission's one rule.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from grader.submission import STATE_DIR, NoWorkspace, find_workspace

APP = "attention-kata"

__all__ = ["NoWorkspace", "find_workspace", "resolve", "state_dir", "state_files", "user_state_dir"]


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
