"""The Gradescope autograder zip, run as Gradescope would against a simulated /autograder tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import submissions  # noqa: E402

from grader.instructor import gradescope  # noqa: E402


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build") / "autograder.zip"
    proc = subprocess.run([sys.executable, "-m", "grader", "gradescope", "build", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def test_zip_layout(autograder_zip: Path) -> None:
    with zipfile.ZipFile(autograder_zip) as zf:
        names = set(zf.namelist())
        assert {"setup.sh", "run_autograder", "kata/pyproject.toml", "kata/grader/grading/engine.py",
                "kata/solutions/causal_attention.py"} <= names
        assert not any("__pycache__" in n for n in names)
        assert (zf.getinfo("run_autograder").external_attr >> 16) & 0o111
        setup = zf.read("setup.sh").decode()
        assert "torch==2.13.0" in setup
        assert "download.pytorch.org/whl/cpu" in setup
        assert "secret.txt" not in names


def _tree(tmp_path: Path, autograder_zip: Path) -> Path:
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    with zipfile.ZipFile(autograder_zip) as zf:
        zf.extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")  # what Gradescope does
    return root


def _run(root: Path) -> dict:
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "ATTN_KATA_PYTHON": sys.executable}
    env.pop("ATTN_KATA_SECRET", None)
    proc = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=180, cwd=root)
    assert proc.returncode == 0, proc.stderr
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def test_run_autograder_grades_a_notebook(tmp_path: Path, autograder_zip: Path) -> None:
    root = _tree(tmp_path, autograder_zip)
    (root / "submission" / "chapter3.ipynb").write_text(submissions.notebook_source("wrong_mask"), encoding="utf-8")
    res = _run(root)
    assert 0 < res["score"] < sum(t["max_score"] for t in res["tests"])
    assert res["tests"]
    assert all({"name", "score", "max_score", "status"} <= set(t) for t in res["tests"])
    failed = [t for t in res["tests"] if t["status"] == "failed"]
    assert failed
    assert all("causal_mask" in t["tags"] for t in failed)
    assert "execution_time" in res


def test_run_autograder_without_a_submission(tmp_path: Path, autograder_zip: Path) -> None:
    root = _tree(tmp_path, autograder_zip)
    res = _run(root)
    assert res["score"] == 0
    assert "No submission" in res["output"]


def test_find_submission_prefers_a_workspace_then_a_notebook(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    assert gradescope.find_submission(tmp_path) == tmp_path / "a.py"
    (tmp_path / "b.ipynb").write_text("{}")
    assert gradescope.find_submission(tmp_path) == tmp_path / "b.ipynb"
    (tmp_path / "causal_mask.py").write_text("")
    assert gradescope.find_submission(tmp_path) == tmp_path


def test_find_submission_finds_a_nested_workspace_and_reports_ambiguity(tmp_path: Path) -> None:
    """One discovery (grader.instructor.discovery.locate): submission/exercises/ is a workspace; two notebooks
    are ambiguous (None: not guessed); a FIFO is never opened."""
    import os

    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "causal_mask.py").write_text("")
    os.mkfifo(tmp_path / "zed.py")
    assert gradescope.find_submission(tmp_path) == tmp_path / "exercises"
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.ipynb").write_text("{}")
    (other / "b.ipynb").write_text("{}")
    assert gradescope.find_submission(other) is None
