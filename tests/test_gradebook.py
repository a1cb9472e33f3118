"""The gradebook an LMS imports (instructor/gradebook.py)."""

from __future__ import annotations

import csv
import io

from grader.instructor import discovery
from grader.instructor.gradebook import gradebook_csv
from grader.registry import STEPS


def test_the_graders_failure_has_no_total_the_uploads_fault_has_zero() -> None:
    """An LMS imports the total column: a row the grader failed on (status error) must not put a 0 there (README:
    a grader failure is never recorded as 0); an upload that cannot be graded (unreadable, empty, ...) is 0."""
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
