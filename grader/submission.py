"""What a submission is: the one rule for "this folder is a workspace", and what a workspace's grading reads.

Every side asks here (the learner's commands, `grade`, batch's and the platforms' discovery, the pytest plugin,
GitHub Classroom's set-up), so a folder is a workspace for all of them or for none:
- a workspace is a folder holding at least one step's file as a regular file: judged by lstat, never following a
  link, never opening anything (a FIFO named like a step file never blocks the judge);
- a step's file has two names: `step01_dot_scores.py` (registry.Step.file, what `init` writes) and the older
  `dot_scores.py` (Step.legacy_file), so a workspace or an upload made before the files were numbered grades as it
  did, and one may mix them; where a folder holds both for one step, the numbered one is graded and the other is
  not read (step_files says so, and the report's notes);
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

from grader.registry import STEPS, Step

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
    """Does `folder` hold a step's file (either name), as a regular file (a link is never one: grading would not
    read it)?"""
    return any(kind(Path(folder) / f) == "file" for s in STEPS for f in s.files)


def step_path(folder: str | Path, step: Step) -> Path:
    """The file of `step` in `folder` that grading reads: its numbered name when that is a regular file, else its
    older name when that is; the numbered name when neither is (where the learner should write it)."""
    folder = Path(folder)
    return next((folder / f for f in step.files if kind(folder / f) == "file"), folder / step.file)


def step_files(folder: str | Path) -> tuple[dict[str, Path], list[tuple[str, str]]]:
    """Every step file grading reads in `folder` (step id -> path, in step order), and the (graded, not read) name
    pairs of the steps whose file is there under both names."""
    found: dict[str, Path] = {}
    both: list[tuple[str, str]] = []
    for s in STEPS:
        names = [f for f in s.files if kind(Path(folder) / f) == "file"]
        if names:
            found[s.id] = Path(folder) / names[0]
            both += [(names[0], other) for other in names[1:]]
    return found, both


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
