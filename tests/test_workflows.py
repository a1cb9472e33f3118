"""The repository's own GitHub workflows (.github/workflows): nothing in CI here runs them on GitHub, so their
parts are held here. Every path a `run:` step names exists in the checkout (a renamed solution once broke both on
their first run), each workflow is valid against GitHub's schema, and the learner job's loop runs as written, on
Linux, with the commands this checkout installs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent
# a path of the checkout, as a step names it: from the root, from a folder inside it (../), or from the workspace
PATH = re.compile(r"(?:\.\./|\$GITHUB_WORKSPACE/|\$\{\{ github\.workspace \}\}/)?"
                  r"\b((?:solutions|exercises|tests|grader|benchmarks|docs|\.ci)/[\w./-]*\w)")


def _runs(path: Path) -> list[tuple[str, str]]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [(step.get("name", ""), step["run"]) for job in doc["jobs"].values() for step in job.get("steps", [])
            if "run" in step]


def test_there_are_workflows_to_check() -> None:
    assert {p.name for p in WORKFLOWS} >= {"learner.yml", "release.yml"}
    assert all(_runs(p) for p in WORKFLOWS)


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_path_a_workflow_names_exists(workflow: Path) -> None:
    named = {m.group(1) for _, run in _runs(workflow) for m in PATH.finditer(run)}
    assert named, "no path found: the pattern would let a stale one through"
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"{workflow.name} names paths the checkout lacks: {missing}"


def test_a_stale_path_is_caught() -> None:
    """The check above is not vacuous: the path the workflows named before the step files were numbered."""
    assert [m.group(1) for m in PATH.finditer('cp ../solutions/dot_scores.py "$(ls *dot_scores.py)"')] == [
        "solutions/dot_scores.py"]
    assert not (ROOT / "solutions" / "dot_scores.py").exists()


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_each_workflow_is_valid_for_github(workflow: Path) -> None:
    out = subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                          str(workflow)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_learner_jobs_loop_runs_as_written(tmp_path: Path) -> None:
    """The learner job's loop step, run by bash from a folder laid out as the checkout (its solutions/ beside
    it), with this checkout's attn-kata first on PATH. ATTN_KATA_NO_DAEMON: a warm daemon would outlive the test."""
    (script,) = [run for name, run in _runs(ROOT / ".github" / "workflows" / "learner.yml")
                 if name == "the learner's loop"]
    (tmp_path / "solutions").symlink_to(ROOT / "solutions")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_KATA_")}
    env |= {"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "ATTN_KATA_NO_DAEMON": "1", "ATTN_KATA_LANG": "en"}
    assert shutil.which("attn-kata", path=env["PATH"])
    out = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (tmp_path / "ws" / "report.json").is_file()
