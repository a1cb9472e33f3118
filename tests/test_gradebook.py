"""The gradebook an LMS imports (instructor/gradebook.py)."""

from __future__ import annotations

import csv
import io

from grader.instructor import discovery
from grader.instructor.gradebook import gradebook_csv
from grader.registry import STEPS


def test_the_graders_failure_has_no_total_the_uploads_fault_has_zero() -> None:
    """An LMS imports the total column: a row the grader failed on (status error) must not put a 0 there
    (docs/instructors.md: a grader failure is never recorded as 0); an upload that cannot be graded (unreadable,
    empty, ...) is 0."""
    entries = [discovery.Entry("ann", "ann.py", slug="ann", status="error", rejected="the grading process died twice"),
               discovery.Entry("bob", "bob.ipynb", slug="bob", status="unreadable", rejected="not a notebook"),
               discovery.Entry("cat", "cat.py", slug="cat")]
    report = {"score": 79, "max_score": 79, "steps": [{"id": s.id, "score": 1} for s in STEPS]}
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(gradebook_csv(entries, {"cat": report})))}
    assert (rows["ann"]["total"], rows["ann"]["status"]) == ("", "error")
    assert (rows["bob"]["total"], rows["bob"]["status"]) == ("0", "unreadable")
    assert rows["cat"]["total"] == "79" and rows["ann"]["max_score"] == "79"


def test_names_a_student_chose_reach_feedback_and_reports_without_control_characters() -> None:
    """A file named with an escape sequence (`\\e]0;T\\a`, which sets a terminal's title) or a C1 control: the
    feedback an instructor `cat`s and the report's student/submission fields lose them."""
    from grader.instructor import batch
    from grader.instructor.gradebook import feedback_text

    name = "red\x1b]0;T\x07\x9b"
    for text in (feedback_text(name, None, f"{name}.py is not a notebook"),
                 feedback_text(name, {"submission": f"{name}.py", "score": 0, "max_score": 79, "steps": []})):
        assert not any(c in text for c in "\x1b\x07\x9b"), repr(text)
    labelled = batch._labelled(discovery.Entry(name, f"{name}.py"), {"score": 0})
    assert not any(c in labelled["student"] + labelled["submission"] for c in "\x1b\x07\x9b"), labelled


def test_every_status_but_graded_has_its_reason_and_a_fresh_run_says_so(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 25: a submission that hangs at import was `graded` with an empty reason, `over_budget` rows had none,
    and a first run printed "resuming: 2 of 12" (the uploads that cannot be graded counted as done). A real batch."""
    import os
    import subprocess
    from pathlib import Path

    from inproc import kata as run_in_process

    root = Path(__file__).resolve().parent.parent
    klass, out = tmp_path / "class", tmp_path / "out"
    klass.mkdir()
    (klass / "alice.py").write_text((root / "solutions" / "step01_dot_scores.py").read_text(encoding="utf-8"))
    (klass / "hangs.py").write_text("import time\ntime.sleep(600)\n")  # its import never answers
    (klass / "loops.py").write_text("def attention_scores(inputs, query):\n    while True:\n        pass\n\n\n"
                                    "def softmax_naive(x):\n    while True:\n        pass\n")  # every step hangs
    (klass / "empty.py").write_text("\n")
    env = {**os.environ, "ATTN_KATA_NO_DAEMON": "1", "ATTN_KATA_LANG": "en", "COLUMNS": "200"}

    def batch(*extra: str) -> subprocess.CompletedProcess[str]:
        return run_in_process("batch", str(klass), "--out", str(out), "--timeout", "1", "--step", "dot_scores",
                              "--step", "softmax", *extra, cwd=root, env=env)  # tests/inproc.py

    fresh = batch()
    assert fresh.returncode == 1, fresh.stderr  # empty.py could not be graded
    said = fresh.stdout + fresh.stderr
    assert "resuming" not in said and "a fresh run: 3 of 4 submissions to grade" in said, said
    assert "0 from the index" in said
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text(encoding="utf-8")))}
    assert {s: r["status"] for s, r in rows.items()} == {"alice": "graded", "hangs": "over_budget",
                                                         "loops": "over_budget", "empty": "empty"}
    for student, row in rows.items():
        assert bool(row["reason"]) == (row["status"] != "graded"), (student, row)
    assert "no answer within" in rows["hangs"]["reason"] and "time budget" in rows["loops"]["reason"]
    resumed = batch("--resume")
    assert "resuming: 3 of 4 already graded" in resumed.stdout + resumed.stderr
