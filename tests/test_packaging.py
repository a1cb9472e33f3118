"""The plain install is the learner's: no nbgrader, no Jupyter front end in its dependency closure; nbgrader is
the `nbgrader` extra, and its commands name that extra when it is missing."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
HEAVY = {"nbgrader", "jupyterlab", "notebook", "jupyter-server", "jupyter", "nbclassic"}


def _name(req: str) -> str:
    return re.split(r"[\s<>=!~\[;(]", req, maxsplit=1)[0].lower().replace("_", "-")


def test_plain_dependency_closure_has_no_jupyter_front_end() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "nbgrader" in {_name(r) for r in project["optional-dependencies"]["nbgrader"]}
    todo = [_name(r) for r in project["dependencies"]]
    seen: set[str] = set()
    while todo:  # the closure, read from the installed distributions' metadata (requirements without extras)
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in reqs if "extra ==" not in r and "extra==" not in r]
    assert "torch" in seen and "nbformat" in seen
    assert not seen & HEAVY, sorted(seen & HEAVY)


def test_nbgrader_commands_name_the_extra_when_nbgrader_is_missing(tmp_path: Path) -> None:
    """As on a plain install: `have_nbgrader` says no (nbgrader itself is installed here, for the other tests)."""
    script = ("import sys; from grader.instructor import nbgrader_cli as n; n.have_nbgrader = lambda: False; "
              "sys.argv = ['attn-kata', 'autograde', sys.argv[1], 'ps1']; n.nbgrader_group()")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 2, out.stderr
    assert 'pip install "attention-kata[nbgrader]"' in out.stderr
