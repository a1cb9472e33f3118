"""nbgrader integration: the generated assignment through the real nbgrader commands, and inline check()."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.instructor.nbgrader_support import TEST_PREFIX, build_assignment, step_points
from grader.learner.kernel import neutralize
from grader.registry import STEPS

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
ENV.pop("ATTN_KATA_SECRET", None)
MAX = sum(step_points(s.id) for s in STEPS)
BUGGY = "dot_scores"

needs_nbgrader = pytest.mark.skipif(shutil.which("nbgrader", path=ENV["PATH"]) is None, reason="nbgrader missing")


def _src(cell: dict) -> str:
    s = cell["source"]
    return "".join(s) if isinstance(s, list) else s


def test_assignment_has_a_solution_and_a_test_cell_per_step() -> None:
    nb = build_assignment()
    cells = {c["metadata"]["nbgrader"]["grade_id"]: c for c in nb["cells"]}
    for step in STEPS:
        sol, test = cells[f"sol_{step.id}"], cells[f"{TEST_PREFIX}{step.id}"]
        assert "### BEGIN SOLUTION" in _src(sol)
        assert test["metadata"]["nbgrader"]["points"] == step_points(step.id)
        assert "### BEGIN HIDDEN TESTS" in _src(test)
        assert f"assert_step({step.id!r}" in _src(test)
        assert "md_" + step.id in cells
        assert "中" not in step.id
    code = "\n".join(_src(c) for c in nb["cells"] if c["cell_type"] == "code" and "sol_" in str(c["metadata"]))
    compile(code, "solutions", "exec")  # markers are comments; the reference is valid Python as one module


def test_neutralize_keeps_blocks_and_drops_grader_calls() -> None:
    src = "from grader import check\nif True:\n    check('softmax')\nx = check_value(1)\n"
    out = neutralize(src)
    compile(out, "cell", "exec")
    assert "check = __attn_kata_skipped__  # from grader import check" in out
    assert "    pass  # check('softmax')" in out
    assert "x = check_value(1)" in out


# ---------------------------------------------------------------------------------------- real nbgrader


def _run(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


def _submission(release: dict, source: dict, bug: str | None = None) -> dict:
    """The released notebook with the learner's answers: the reference's solution cells (one broken)."""
    nb = json.loads(json.dumps(release))
    answers = {c["metadata"]["nbgrader"]["grade_id"]: c for c in source["cells"]}
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if gid.startswith("sol_"):
            text = "".join(line for line in _src(answers[gid]).splitlines(True)
                           if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
            if gid == f"sol_{bug}":
                text = text.replace("torch.dot(x_i, query)", "-torch.dot(x_i, query) * 0")
            cell["source"] = text
    return nb


def _grades(course: Path, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.id: gb.find_grade(f"{TEST_PREFIX}{s.id}", "attention", "ps1", student).score for s in STEPS}


def _export(course: Path) -> dict[str, float]:
    _run(str(BIN / "nbgrader"), "export", cwd=course)
    with open(course / "grades.csv", newline="") as fh:
        return {r["student_id"]: float(r["score"]) for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("course")
    (root / "nbgrader_config.py").write_text(
        'c = get_config()\nc.CourseDirectory.course_id = "attn"\n'
        'c.CourseDirectory.db_assignments = [dict(name="ps1")]\n'
        'c.CourseDirectory.db_students = [dict(id="ref"), dict(id="stub"), dict(id="bug")]\n'
        'c.ExecutePreprocessor.timeout = 120\n')
    _run(str(BIN / "attn-kata"), "nbgrader", "assignment", str(root / "source" / "ps1"), cwd=root)
    _run(str(BIN / "nbgrader"), "generate_assignment", "ps1", "--create", cwd=root)
    source = json.loads((root / "source/ps1/attention.ipynb").read_text(encoding="utf-8"))
    release = json.loads((root / "release/ps1/attention.ipynb").read_text(encoding="utf-8"))
    assert "### BEGIN HIDDEN TESTS" not in json.dumps(release)
    assert "BEGIN SOLUTION" not in json.dumps(release)
    for student, nb in (("ref", _submission(release, source)), ("stub", release),
                        ("bug", _submission(release, source, BUGGY))):
        d = root / "submitted" / student / "ps1"
        d.mkdir(parents=True)
        (d / "attention.ipynb").write_text(json.dumps(nb), encoding="utf-8")
        (d / "timestamp.txt").write_text("2026-01-01 12:00:00.000000 UTC")
    return root


def _check_scores(course: Path) -> None:
    ref, stub, bug = (_grades(course, s) for s in ("ref", "stub", "bug"))
    assert ref == {s.id: step_points(s.id) for s in STEPS}
    assert set(stub.values()) == {0.0}
    assert bug[BUGGY] < step_points(BUGGY)
    assert {k: v for k, v in bug.items() if k != BUGGY} == {k: v for k, v in ref.items() if k != BUGGY}
    csv_scores = _export(course)
    assert csv_scores == {"ref": MAX, "stub": 0.0, "bug": MAX - step_points(BUGGY) + bug[BUGGY]}


@needs_nbgrader
def test_real_nbgrader_autograde_feedback_export(course: Path) -> None:
    _run(str(BIN / "nbgrader"), "autograde", "ps1", cwd=course, timeout=360)
    _check_scores(course)
    nbgrader_bug = _grades(course, "bug")[BUGGY]
    _run(str(BIN / "nbgrader"), "generate_feedback", "ps1", cwd=course)
    assert (course / "feedback/bug/ps1/attention.html").is_file()

    # the same course regraded by attn-kata's sandboxed autograde: same scores, feedback and export still work
    shutil.rmtree(course / "autograded")
    shutil.rmtree(course / "feedback")
    out = _run(str(BIN / "attn-kata"), "nbgrader", "autograde", str(course), "ps1", cwd=course).stdout
    assert f"ref\tattention\t{MAX:g}/{MAX:g}" in out
    _check_scores(course)
    assert _grades(course, "bug")[BUGGY] == nbgrader_bug
    _run(str(BIN / "nbgrader"), "generate_feedback", "ps1", cwd=course)
    html = (course / "feedback/bug/ps1/attention.html").read_text(encoding="utf-8")
    assert BUGGY in html


# ---------------------------------------------------------------------------------------- inline check()


def test_inline_check_in_a_real_kernel(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    good = (Path(__file__).resolve().parent.parent / "solutions" / "dot_scores.py").read_text(encoding="utf-8")
    bad = "import torch\ndef attention_weights(scores):\n    return scores / scores.sum()\n"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(good), nbformat.v4.new_code_cell(bad),
                nbformat.v4.new_code_cell('from grader import check\ncheck("dot_scores", "softmax", lang="en")')]
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = ENV["PATH"]
    try:
        client.execute()
    finally:
        os.environ["PATH"] = old
    outs = nb.cells[-1].outputs
    html = "".join(o.get("data", {}).get("text/html", "") for o in outs if o.output_type == "display_data")
    assert "<table" in html, outs
    assert "dot_scores" in html
    assert "passed" in html
    assert "softmax" in html
    assert ("partial" in html or "failed" in html)
    assert not any(o.output_type == "error" for o in outs)
