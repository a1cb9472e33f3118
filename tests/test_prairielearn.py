"""PrairieLearn: `attn-kata prairielearn build`, then its run script on a simulated /grade layout, as PrairieLearn's
external grader would run it; and `attn-kata grade --format prairielearn`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inproc import kata as run_in_process

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import submissions  # noqa: E402

TEST_FIELDS = {"name", "points", "max_points", "message", "output"}


def attn(*args: str) -> subprocess.CompletedProcess[str]:
    """In this process (tests/inproc.py: output and exit code, real grading)."""
    env = {k: v for k, v in os.environ.items() if k != "ATTN_KATA_SECRET"}
    return run_in_process(*args, cwd=ROOT, env={**env, "ATTN_KATA_NO_DAEMON": "1"})


@pytest.fixture(scope="module")
def question(tmp_path_factory: pytest.TempPathFactory) -> Path:
    q = tmp_path_factory.mktemp("pl") / "attention"
    proc = attn("--lang", "en", "prairielearn", "build", str(q), "--image", "me/attn-kata-grader")
    assert proc.returncode == 0, proc.stderr
    return q


def validate(doc: dict[str, Any]) -> None:
    """PrairieLearn's documented results.json: `score` in [0, 1] when gradable; `gradable: false` with
    `format_errors` otherwise; each test with a name, points out of max_points, a message and an output."""
    assert isinstance(doc.get("gradable", True), bool)
    assert len(json.dumps(doc).encode()) < 1_000_000  # PrairieLearn's limit for the file
    if doc.get("gradable", True) is False:
        assert doc["format_errors"] and all(isinstance(e, str) and e for e in doc["format_errors"])
        return
    assert isinstance(doc["score"], float | int) and 0.0 <= doc["score"] <= 1.0
    assert isinstance(doc["message"], str) and isinstance(doc["output"], str)
    for t in doc["tests"]:
        assert set(t) >= TEST_FIELDS
        assert isinstance(t["name"], str) and t["name"]
        assert 0 <= t["points"] <= t["max_points"]
        assert isinstance(t["message"], str) and isinstance(t["output"], str)
        # the check's stable id, the same in every language (grader/checks/ids.txt)
        assert re.fullmatch(r"[a-z0-9_]+\.[a-z0-9_]+", t["id"]) and t["name"].split(". ", 1)[1].startswith(
            t["id"].split(".")[0] + ": "), t


def test_the_question_folder(question: Path) -> None:
    info = json.loads((question / "info.json").read_text())
    ext = info["externalGradingOptions"]
    assert info["gradingMethod"] == "External" and ext["enabled"] is True
    assert ext["image"] == "me/attn-kata-grader"
    assert ext["entrypoint"] == "/grade/tests/run.sh" and 0 < ext["timeout"] <= 600
    assert {"uuid", "title", "topic", "type"} <= set(info)
    html = (question / "question.html").read_text()
    for element in ("<pl-file-editor", "<pl-file-upload", "<pl-external-grader-results>"):
        assert element in html
    assert 'source-file-name="attention.py"' in html and (question / "attention.py").is_file()
    run = question / "tests" / "run.sh"
    assert os.access(run, os.X_OK)
    assert (question / "tests" / "kata" / "grader" / "grading" / "engine.py").is_file()
    assert (question / "tests" / "kata" / "solutions" / "step09_causal_attention.py").is_file()
    assert not list((question / "tests").rglob("__pycache__")) and not (question / "tests" / "secret.txt").exists()


def grade_root(tmp_path: Path, question: Path) -> Path:
    """/grade as PrairieLearn lays it out: tests/ from the question, student/ for the files, results/ not made."""
    root = tmp_path / "grade"
    shutil.copytree(question / "tests", root / "tests")
    (root / "student").mkdir()
    (root / "data").mkdir()
    (root / "data" / "data.json").write_text("{}")
    return root


def run_script(root: Path) -> dict[str, Any]:
    env = {**os.environ, "PL_GRADE_ROOT": str(root), "ATTN_KATA_PYTHON": sys.executable, "ATTN_KATA_NO_DAEMON": "1"}
    env.pop("ATTN_KATA_SECRET", None)
    proc = subprocess.run(["bash", str(root / "tests" / "run.sh")], env=env, capture_output=True, text=True,
                          timeout=300, cwd=root)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    validate(doc)
    return doc


def test_run_script_grades_a_notebook(tmp_path: Path, question: Path) -> None:
    root = grade_root(tmp_path, question)
    (root / "student" / "chapter3.ipynb").write_text(submissions.notebook_source("wrong_mask"), encoding="utf-8")
    doc = run_script(root)
    assert doc["gradable"] is True
    total = sum(t["max_points"] for t in doc["tests"])
    assert total == 83
    assert 0 < doc["score"] < 1
    assert doc["score"] == pytest.approx(sum(t["points"] for t in doc["tests"]) / total, abs=1e-5)
    failed = [t for t in doc["tests"] if t["points"] < t["max_points"]]
    assert failed and all(": " in t["name"] and "causal_mask" in t["name"] for t in failed)
    assert all(t["message"] for t in failed)
    assert "causal_mask" in doc["output"]  # the table, as the CLI shows it


def test_run_script_with_the_editors_file_only(tmp_path: Path, question: Path) -> None:
    root = grade_root(tmp_path, question)
    source = "\n".join((ROOT / "solutions" / f).read_text() for f in ("step01_dot_scores.py",))
    (root / "student" / "attention.py").write_text(source, encoding="utf-8")
    doc = run_script(root)
    dot = [t for t in doc["tests"] if t["name"].startswith("1. dot_scores")]
    assert dot and all(t["points"] == t["max_points"] for t in dot)
    assert doc["score"] == pytest.approx(len(dot) / 83, abs=1e-5)


def test_unreadable_or_missing_submissions_are_not_gradable(tmp_path: Path, question: Path) -> None:
    root = grade_root(tmp_path, question)
    assert run_script(root)["gradable"] is False  # nothing submitted
    (root / "results" / "results.json").unlink()
    (root / "student" / "attention.py").write_text("def attention_scores(inputs, query:\n    return\n")
    doc = run_script(root)
    assert doc["gradable"] is False and "syntax error" in doc["format_errors"][0]


def test_grade_format_prairielearn(tmp_path: Path) -> None:
    proc = attn("grade", "solutions", "--format", "prairielearn", "--step", "causal_mask")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    validate(doc)
    assert doc["gradable"] is True and doc["score"] == 1.0 and len(doc["tests"]) == 6
    broken = tmp_path / "broken.py"
    broken.write_text("def causal_mask(n:\n")
    doc = json.loads(attn("grade", str(broken), "--format", "prairielearn").stdout)
    validate(doc)
    assert doc["gradable"] is False


def test_answers_learned_from_earlier_attempts_are_no_use(question: Path, public_tmp: Path) -> None:
    """PrairieLearn grades each attempt under the question's secret, its hidden cases keyed by the upload's
    content (grader.grading.cases_key): a table of the course cases' answers (test_gradescope._replay, which takes
    every point of step 1 under the course's cases alone) earns nothing."""
    from test_gradescope import COURSE_SECRET, _replay

    root = grade_root(public_tmp, question)  # searchable by all, as /grade is: its workers run as nobody
    (root / "tests" / "secret.txt").write_text(COURSE_SECRET, encoding="utf-8")
    (root / "student" / "attention.py").write_text(_replay(COURSE_SECRET), encoding="utf-8")
    doc = run_script(root)
    dot = [t for t in doc["tests"] if t["name"].startswith("1. dot_scores")]
    assert len(dot) == 5 and sum(t["points"] for t in dot) == 0, [(t["name"], t["points"]) for t in dot]
