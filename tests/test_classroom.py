"""`attn-kata classroom init`: the GitHub Classroom workflow, validated, and every command in it run here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from inproc import kata as run_in_process

from grader.registry import STEPS
from grader.torch_pin import TORCH_PIN

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
GRADER = "education/autograding-command-grader@v1"
REPORTER = "education/autograding-grading-reporter@v1"


def attn(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """In this process (tests/inproc.py: output and exit code); the workflow's own commands run as processes."""
    return run_in_process(*args, cwd=cwd)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("classroom") / "template"
    proc = attn("--lang", "en", "classroom", "init", str(repo))
    assert proc.returncode == 0, proc.stderr
    return repo


def workflow(repo: Path) -> dict:
    return yaml.safe_load((repo / ".github" / "workflows" / "classroom.yml").read_text(encoding="utf-8"))


def schema_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_the_workflow_is_a_valid_github_workflow(template: Path, tmp_path: Path) -> None:
    path = template / ".github" / "workflows" / "classroom.yml"
    ok = schema_check(path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = workflow(template)  # the schema check can fail: a job without runs-on is not a workflow
    del broken["jobs"]["run-autograding-tests"]["runs-on"]
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump(broken), encoding="utf-8")
    assert schema_check(bad).returncode != 0


def test_one_command_grader_per_step_and_the_points_add_up_to_the_katas_total(template: Path) -> None:
    job = workflow(template)["jobs"]["run-autograding-tests"]
    assert job["name"] == "Autograding Tests"  # the reporter posts the points on the check run of that name
    steps = job["steps"]
    graders = [s for s in steps if s.get("uses") == GRADER]
    assert [s["id"] for s in graders] == [s.id for s in STEPS]
    for s in graders:  # only the action's documented inputs
        assert set(s["with"]) == {"test-name", "command", "timeout", "max-score"}
        assert s["with"]["command"].startswith(f"attn-kata --lang en check {s['id']} ")
    stubs = attn("grade", "exercises", "--format", "json")  # the kata's total, from the grader itself
    total = json.loads(stubs.stdout)["max_score"]
    assert sum(s["with"]["max-score"] for s in graders) == total == 83
    report = json.loads(stubs.stdout)
    assert {s["id"]: s["with"]["max-score"] for s in graders} == {s["id"]: s["max_score"] for s in report["steps"]}
    reporter = steps[-1]
    assert reporter["uses"] == REPORTER
    assert reporter["with"]["runners"].split(",") == [s.id for s in STEPS]
    # the reporter reads each runner's result from <RUNNER IN CAPITALS>_RESULTS
    assert reporter["env"] == {f"{s.id.upper()}_RESULTS": f"${{{{steps.{s.id}.outputs.result}}}}" for s in STEPS}
    install = next(s["run"] for s in steps if "run" in s)
    assert f"pip install torch=={TORCH_PIN} --index-url https://download.pytorch.org/whl/cpu" in install  # the pin


def command_env(tmp_path: Path) -> dict[str, str]:
    """What the command grader gives a command (PATH, HOME), with this venv first on PATH and a daemon of this
    test's own (stopped afterwards)."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    return {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": os.environ.get("HOME", "/root"),
            "FORCE_COLOR": "true", "ATTN_KATA_RUNTIME_DIR": str(run)}


def test_every_command_runs_on_a_solved_and_an_unsolved_workspace(template: Path, tmp_path: Path) -> None:
    steps = workflow(template)["jobs"]["run-autograding-tests"]["steps"]
    env = command_env(tmp_path)
    for s in steps:
        for line in s.get("run", "").splitlines():  # the install step: satisfied by this venv, no download
            proc = subprocess.run(line, shell=True, cwd=template, env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, (line, proc.stdout[-1000:], proc.stderr[-1000:])
    solved = tmp_path / "solved"
    shutil.copytree(template, solved)
    for s in STEPS:
        shutil.copyfile(ROOT / "solutions" / s.file, solved / "exercises" / s.file)
    commands = [s["with"]["command"] for s in steps if s.get("uses") == GRADER]
    try:
        for repo, want in ((solved, 0), (template, 1)):
            for command in commands:
                proc = subprocess.run(command, shell=True, cwd=repo, env=env, capture_output=True, text=True,
                                      timeout=300)
                assert proc.returncode == want, (repo.name, command, proc.stdout[-1500:], proc.stderr[-1500:])
    finally:
        subprocess.run([str(BIN / "attn-kata"), "daemon", "stop"], env=env, capture_output=True, timeout=60)


def test_init_refuses_to_overwrite_and_rejects_a_path_outside(template: Path) -> None:
    again = attn("classroom", "init", str(template))
    assert again.returncode == 2
    assert "exists" in again.stderr and "Traceback" not in again.stderr
    outside = attn("classroom", "init", str(template.parent / "other"), "--path", "../elsewhere")
    assert outside.returncode == 2 and "inside the repository" in outside.stderr
