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


# every character a line-based importer, a spreadsheet or a terminal may act on: C0 (tab, LF, CR included), DEL, C1,
# the bidi controls and the Unicode line and paragraph separators
CONTROLS = "".join(map(chr, [*range(0x20), *range(0x7f, 0xa0), 0x61c, 0x200e, 0x200f, *range(0x2028, 0x202f),
                             *range(0x2066, 0x206a)]))


def _lines_and_rows(text: str) -> tuple[list[str], list[dict[str, str]]]:
    return text.splitlines(), list(csv.DictReader(io.StringIO(text)))


def test_no_control_character_reaches_any_gradebook_cell() -> None:
    """Issue 35: a CR or LF in a cell stayed raw (the csv module quotes it), and a line-based LMS importer splits rows
    on it: `mallory\\r\\nbob,79` became a row of its own. Every field, the ones a student controls above all (the name,
    the upload, the reason that quotes a notebook's format version or a member's name, a report's message), has
    every control character escaped: one line per row. The honest twin: printable names, commas and quotes included,
    are unchanged."""
    from grader.instructor.gradebook import RunSettings

    evil = f"m{CONTROLS}x,79,graded\r\nbob"
    entries = [discovery.Entry(evil, f"{evil}.ipynb", slug="a", status="unreadable",
                               rejected=f"not a readable notebook: NBFormatError: Unsupported nbformat version {evil}"),
               discovery.Entry(f"{evil}2", f"{evil}.py", slug="b", status="over_budget"),
               discovery.Entry('Zoë 张伟, "O\'Brien"', "Zoë.py", slug="c")]
    timeout_msg = f"no answer within 10 s: {evil}"
    over = {"score": 0, "max_score": 79, "steps": [{"id": s.id, "score": 0, "status": "error", "detail": "timeout",
                                                    "message": timeout_msg} for s in STEPS]}
    honest = {"score": 79, "max_score": 79, "steps": [{"id": s.id, "score": 1} for s in STEPS]}
    settings = RunSettings.of("k", 10.0, None, "0.1.0")
    text = gradebook_csv(entries, {"b": over, "c": honest}, None, settings)
    lines, rows = _lines_and_rows(text)
    assert len(lines) == len(rows) + 1 == 4, lines
    for row in rows:
        for column, cell in row.items():
            assert cell.isprintable(), (column, cell)
            assert not set(cell) & set(CONTROLS), (column, cell)
    assert rows[0]["student"].startswith("m\\x00\\x01") and "\\x0d\\x0a" in rows[0]["student"]
    assert rows[0]["reason"].endswith("x,79,graded\\x0d\\x0abob") and rows[1]["reason"].startswith("no answer within")
    assert rows[2]["student"] == 'Zoë 张伟, "O\'Brien"' and rows[2]["submission"] == "Zoë.py"
    assert [rows[2][c] for c in ("key_fingerprint", "timeout", "grader_version")] == [settings.key_fingerprint, "10",
                                                                                      "0.1.0"]


def test_a_class_whose_names_and_notebooks_hold_line_breaks_gives_one_line_per_student(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real batch: file names holding CR, LF, tab and ESC, a zip whose members' names hold them (quoted in the
    reason), and a notebook whose format version holds them (quoted in the reason): every gradebook row is one line,
    the names and reasons are escaped, the reports and feedback name each student on one line. Each costs that
    student alone: the honest classmate keeps full marks."""
    import json
    import os
    import zipfile
    from pathlib import Path

    from inproc import kata as run_in_process

    root = Path(__file__).resolve().parent.parent
    book = (root / "tests" / "fixtures" / "correct" / "book_verbatim.py").read_bytes()
    klass, out = tmp_path / "class", tmp_path / "out"
    klass.mkdir()
    forged = "mallory\r\nbob,bob.py,5,5,5,graded,\tx\x1b[2J"
    (klass / f"{forged}.py").write_bytes(b"x = 1\n")
    with zipfile.ZipFile(klass / "eve.zip", "w") as zf:
        zf.writestr("a\r\nzed,5.py", b"x = 1\n")
        zf.writestr("b\n.py", b"x = 2\n")
    (klass / "nb.ipynb").write_text(json.dumps({"nbformat": "4\r\nzed,zed.py,5,5,5,graded,", "nbformat_minor": 5,
                                                "metadata": {"name": "x\r\ny"}, "cells": []}))
    (klass / "alice.py").write_bytes(book)
    env = {**os.environ, "ATTN_KATA_NO_DAEMON": "1", "ATTN_KATA_LANG": "en", "COLUMNS": "200"}
    proc = run_in_process("batch", str(klass), "--out", str(out), "--step", "dot_scores", "--jobs", "1", cwd=root,
                          env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr  # eve and nb are not graded
    text = (out / "gradebook.csv").read_text(encoding="utf-8")
    lines, rows = _lines_and_rows(text)
    assert len(lines) == len(rows) + 1 == 5, lines
    by = {r["student"]: r for r in rows}
    assert set(by) == {"alice", "eve", "nb", "mallory\\x0d\\x0abob,bob.py,5,5,5,graded,\\x09x\\x1b[2J"}, set(by)
    assert by["alice"]["total"] == "5" and by["mallory\\x0d\\x0abob,bob.py,5,5,5,graded,\\x09x\\x1b[2J"]["total"] == "0"
    assert by["eve"]["status"] == "ambiguous" and "a\\x0d\\x0azed,5.py" in by["eve"]["reason"], by["eve"]
    assert by["nb"]["status"] == "unreadable" and "4\\x0d\\x0azed,zed.py" in by["nb"]["reason"], by["nb"]
    for row in rows:
        assert all(cell.isprintable() for cell in row.values()), row
    for f in (out / "feedback").iterdir():  # the name and the reason: one line each, as the grader wrote them
        first = f.read_text(encoding="utf-8").splitlines()
        assert first[0].startswith("Feedback for ") and not set(first[0]) & set(CONTROLS), first
        assert all(not set(line) & set(CONTROLS) for line in first), first
    for f in (out / "reports").iterdir():
        report = json.loads(f.read_text(encoding="utf-8"))
        assert report["student"].isprintable() and report["submission"].isprintable(), report["student"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert all(g["reason"].isprintable() and g["student"].isprintable() for g in summary["not_graded"])
