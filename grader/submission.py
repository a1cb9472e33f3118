"""What a submission is: the one rule for "this folder is a workspace", and what a workspace's grading reads.

Every side asks here (the learner's commands, `grade`, batch's and the platforms' discovery, the pytest plugin,
GitHub Classroom's set-up), so a folder is a workspace for all of them or for none:
- a workspace is a folder holding at least one step's file (`dot_scores.py`, …) as a regular file: judged by
  lstat, never following a link, never opening anything (a FIFO named like a step file never blocks the judge);
- `attn-kata init` marks the one it makes (`.attn-kata/workspace.json`, which also records the learner's language
  and, for `init --notebook`, the notebook that is graded instead of the step files);
- the learner's workspace is found from any folder inside it as git finds a repository: the nearest folder at or
  above it that is marked, or that has an `exercises/` workspace (a checkout's root).

A shared leaf: it reads the step registry and the file system, nothing of grading.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from grader.registry import STEPS

STATE_DIR = ".attn-kata"  # inside a workspace: the marker, progress, hints, reset's backups
MARKER = "workspace.json"


class NoWorkspace(LookupError):
    """No workspace in `start` or any folder above it."""


def kind(p: Path) -> str:
    """"file", "dir", "link" or "other" (FIFO, device, socket, gone), from lstat: never follows, never opens."""
    try:
        mode = p.lstat().st_mode
    except OSError:
        return "other"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def is_workspace(folder: Path) -> bool:
    """Does `folder` hold a step's file, as a regular file (a link is never one: grading would not read it)?"""
    return any(kind(Path(folder) / s.file) == "file" for s in STEPS)


def is_marked(folder: Path) -> bool:
    return (folder / STATE_DIR / MARKER).is_file()


def marker(workspace: str | Path) -> dict:
    """What `attn-kata init` recorded (language, notebook); {} when nothing readable is there."""
    try:
        data = json.loads((Path(workspace) / STATE_DIR / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def graded(workspace: str | Path) -> Path:
    """What grading a workspace reads: its notebook when `init --notebook` made one, else its step files."""
    ws = Path(workspace)
    notebook = marker(ws).get("notebook")
    if isinstance(notebook, str) and notebook and (ws / Path(notebook).name).is_file():
        return ws / Path(notebook).name
    return ws


def find_workspace(start: Path) -> Path:
    """The workspace `start` is in: the nearest folder at or above it that is marked, or that has an `exercises/`
    workspace (a checkout's root, seen from itself or from any folder inside it). Raises NoWorkspace."""
    start = Path(os.path.abspath(start))
    for folder in (start, *start.parents):
        if is_marked(folder):
            return folder
        if is_workspace(folder / "exercises"):
            return folder / "exercises"
    raise NoWorkspace(str(start))
