"""The Gradescope autograder zip, run as Gradescope would against a simulated /autograder tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import submissions  # noqa: E402

from grader.platforms import gradescope  # noqa: E402


def test_zip_layout(autograder_zip: Path) -> None:
    with zipfile.ZipFile(autograder_zip) as zf:
        names = set(zf.namelist())
        assert {"setup.sh", "run_autograder", "kata/pyproject.toml", "kata/grader/grading/engine.py",
                "kata/solutions/step09_causal_attention.py"} <= names
        assert not any("__pycache__" in n for n in names)
        assert (zf.getinfo("run_autograder").external_attr >> 16) & 0o111
        setup = zf.read("setup.sh").decode()
        assert "torch==2.13.0" in setup
        assert "download.pytorch.org/whl/cpu" in setup
        assert "secret.txt" not in names


def gradescope_tree(tmp_path: Path, autograder_zip: Path) -> Path:
    """Gradescope's layout: the zip unpacked in source/, run_autograder copied beside it, an empty submission/."""
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
    root = gradescope_tree(tmp_path, autograder_zip)
    (root / "submission" / "chapter3.ipynb").write_text(submissions.notebook_source("wrong_mask"), encoding="utf-8")
    res = _run(root)
    assert 0 < res["score"] < sum(t["max_score"] for t in res["tests"])
    assert res["tests"]
    assert all({"name", "score", "max_score", "status"} <= set(t) for t in res["tests"])
    # each test carries its check's stable id where Gradescope keeps data it does not show
    assert all(t["extra_data"]["id"].startswith(t["tags"][0] + ".") for t in res["tests"])
    failed = [t for t in res["tests"] if t["status"] == "failed"]
    assert failed
    assert all("causal_mask" in t["tags"] for t in failed)
    assert "execution_time" in res


def test_run_autograder_names_a_folder_upload_by_its_files(tmp_path: Path, autograder_zip: Path) -> None:
    """Issue 38: an upload whose files lie at the submission folder's root said "Graded ."; the output line names
    the upload by its step files (a folder inside it by its name too, a single file by its name)."""
    root = gradescope_tree(tmp_path, autograder_zip)
    for name in ("step01_dot_scores.py", "step02_softmax.py"):
        shutil.copy(ROOT / "solutions" / name, root / "submission" / name)
    res = _run(root)
    assert res["output"] == "Graded your upload (step01_dot_scores.py, step02_softmax.py)", res["output"]
    assert res["score"] > 0
    upload = tmp_path / "other"
    nested = upload / "exercises"
    shutil.copytree(ROOT / "exercises", nested)
    assert gradescope.graded_what(nested, upload) == ("Graded exercises/ (step01_dot_scores.py, step02_softmax.py, "
                                                      "step03_context_vector.py and 11 more)")
    (upload / "mine.ipynb").write_text("{}")
    assert gradescope.graded_what(upload / "mine.ipynb", upload) == "Graded mine.ipynb"
    from grader import i18n

    with i18n.using("zh"):
        said = gradescope.graded_what(nested, upload)
    assert said == ("已评分：exercises/（step01_dot_scores.py, step02_softmax.py, step03_context_vector.py "
                    "以及另外 11 个文件）")


def test_run_autograder_says_why_an_upload_cannot_be_read(tmp_path: Path, autograder_zip: Path) -> None:
    """An upload the grader rejects on reading is a report of that reason for the student, not "the autograder
    failed" (a KeyError, before the checks were loaded, made every rejected upload one)."""
    root = gradescope_tree(tmp_path, autograder_zip)
    (root / "submission" / "chapter3.ipynb").write_text(
        '{"cells": [{"cell_type": "code", "source": 7}], "nbformat": 4, "nbformat_minor": 5}', encoding="utf-8")
    res = _run(root)
    text = json.dumps(res)
    assert "autograder failed" not in text, res.get("output")
    assert res["score"] == 0 and "not text" in text, text[:500]


def test_run_autograder_without_a_submission(tmp_path: Path, autograder_zip: Path) -> None:
    root = gradescope_tree(tmp_path, autograder_zip)
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
    (tmp_path / "exercises" / "step07_causal_mask.py").write_text("")
    os.mkfifo(tmp_path / "zed.py")
    assert gradescope.find_submission(tmp_path) == tmp_path / "exercises"
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.ipynb").write_text("{}")
    (other / "b.ipynb").write_text("{}")
    assert gradescope.find_submission(other) is None


COURSE_SECRET = "course-secret-for-the-replay-test"


def _replay(secret: str) -> str:
    """A submission that writes no attention code: attention_scores answers each hidden case of step 1 under
    `secret` from a table of its inputs and expected outputs, as a student could collect them from the feedback
    of earlier attempts (exception text can echo inputs; a failed comparison names an expected value). Built
    here by the trusted side, which knows them all: the strongest such table."""
    from grader.grading import engine

    plans, refs = engine.prepared(secret)
    table = {}
    for name, case in plans["dot_scores"].items():
        key = tuple(round(v, 4) for a in case.params["args"] for v in case.inputs[a].flatten().tolist())
        out = refs["dot_scores"][name].tensors["out"]
        table[key] = (out.flatten().tolist(), list(out.shape))
    return (f"import torch\nTABLE = {table!r}\n\n"
            "def attention_scores(inputs, query):\n"
            "    key = tuple(round(v, 4) for t in (inputs, query) for v in t.flatten().tolist())\n"
            "    values, shape = TABLE.get(key, ([0.0] * inputs.shape[0], [inputs.shape[0]]))\n"
            "    return torch.tensor(values).reshape(shape)\n")


def _step(res: dict, step: str) -> tuple[float, float]:
    tests = [t for t in res["tests"] if step in t["tags"]]
    return sum(t["score"] for t in tests), sum(t["max_score"] for t in tests)


def test_answers_learned_from_earlier_attempts_are_no_use(tmp_path: Path, autograder_zip: Path,
                                                         public_tmp: Path) -> None:
    """Gradescope grades each attempt under the course's secret; the hidden cases are drawn from it keyed by the
    upload's content (grader.grading.cases_key), so a table of one set of cases and answers earns nothing (its
    answer to the public book example proves no work). Under the course's cases alone (what a batch uses), the
    same table takes every point: the test can fail. The reference keeps full marks under the keyed cases."""
    from grader.grading import engine

    replay = tmp_path / "replay.py"
    replay.write_text(_replay(COURSE_SECRET), encoding="utf-8")
    # graded as in a container of its own (what Gradescope gives each upload): a shared host's needs (a tmpfs, an
    # IPC namespace) are not this control's, and a container lacks them (.ci/setups.sh's Docker emulation)
    shared = engine.grade(replay, steps=["dot_scores"], secret=COURSE_SECRET, config={"context": "container"}).steps[0]
    assert shared.score == shared.max_score, [(c.name, c.message) for c in shared.checks if not c.passed]

    # searchable by all, as /autograder is: its workers run as nobody
    root = gradescope_tree(public_tmp, autograder_zip)
    (root / "source" / "secret.txt").write_text(COURSE_SECRET, encoding="utf-8")
    shutil.copy(replay, root / "submission" / "attention.py")
    got, top = _step(_run(root), "dot_scores")
    # nothing: the book's example, whose answer is public, earns a point only beside some secret case's work
    assert got == 0 and top == shared.max_score, (got, top)

    (root / "submission" / "attention.py").write_text((ROOT / "solutions" / "step01_dot_scores.py").read_text())
    got, top = _step(_run(root), "dot_scores")
    assert got == top
