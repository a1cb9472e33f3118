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
