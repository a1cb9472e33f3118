"""Report records: their JSON form."""

from __future__ import annotations

import dataclasses
import unicodedata

from grader.report import CheckResult, Report, StepResult, clean


def test_report_to_dict_equals_asdict() -> None:
    """The hand-written to_dict (faster) says exactly what dataclasses.asdict says, field for field, but for the
    pictures a grade may carry for the terminal (StepResult.pictures), which never reach the JSON."""
    step = StepResult("softmax", "Step 2", 1.0, 2.0, "partial", [CheckResult("a", 1.0, 1.0, True),
                      CheckResult("b", 0.0, 1.0, False, "why")], "wrong_answer", "msg",
                      [{"id": "softmax_dim0", "message": "m"}])
    as_json = {k: v for k, v in dataclasses.asdict(step).items() if k != "pictures"}
    for c, check in zip(as_json["checks"], step.checks, strict=True):  # `waiting` is said as the check's status
        del c["waiting"]
        c["status"] = check.status
    assert step.to_dict() == as_json
    assert list(step.to_dict()) == [f.name for f in dataclasses.fields(StepResult) if f.name != "pictures"]
    step.pictures = ["a matrix"]
    assert Report("x.py", [step]).to_dict()["steps"] == [as_json]


# what clean() must not let through: every C0 but tab and newline, DEL, C1 (U+009B is CSI on some terminals), every
# bidi control (Unicode's Bidi_Control property) and the line and paragraph separators
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_clean_drops_every_control_and_replaces_every_lone_surrogate() -> None:
    """Every code point at once (red team 8, findings 1 and 9): a lone surrogate, which no UTF-8 writer of a report
    can encode, becomes U+FFFD; controls a terminal or an editor acts on are dropped; everything else is kept."""
    every = "".join(map(chr, range(0x110000)))
    expected = []
    for c in every:
        if unicodedata.category(c) == "Cs":
            expected.append("\ufffd")
        elif not ((unicodedata.category(c) == "Cc" and c not in "\t\n") or c in BIDI_CONTROLS or c in "\u2028\u2029"):
            expected.append(c)
    out = clean(every, limit=len(every))
    out.encode()  # strict UTF-8
    assert out == "".join(expected)
    assert clean("ValueError: \udcff \x1b]0;T\x07 \x9b31m \u202eevil\u200f") == "ValueError: \ufffd ]0;T 31m evil"
    assert clean("x" * 700) == "x" * 599 + "…"
    assert Report("x.py", [], notes=["cell 2: `%time \x1b]0;T\x07\udcff` removed"]).notes == [
        "cell 2: `%time ]0;T\ufffd` removed"]  # a note may quote a notebook's magic line


def test_a_checks_id_is_in_the_json_and_survives_wording_and_transport() -> None:
    """Each check's stable id (schema_minor 1): in to_dict, kept by `worded` (never translated) and by the
    to_data/from_data round trip a grading process and its starter make."""
    from grader.report import SCHEMA_MINOR, SCHEMA_VERSION

    step = StepResult("softmax", "Step 2", 1.0, 2.0, "partial",
                      [CheckResult("a", 1.0, 1.0, True, "", "softmax.normalize_by_sum"),
                       CheckResult("b", 0.0, 1.0, False, "why", "softmax.rows_sum_to_one")], "wrong_answer", "msg")
    report = Report("x.py", [step])
    d = report.to_dict()
    assert (d["schema_version"], d["schema_minor"]) == (SCHEMA_VERSION, SCHEMA_MINOR) == (1, 2)
    assert [c["id"] for c in d["steps"][0]["checks"]] == ["softmax.normalize_by_sum", "softmax.rows_sum_to_one"]
    assert [c.id for c in report.worded("zh").steps[0].checks] == [c.id for c in step.checks]
    again = Report.from_data(report.to_data())
    assert again.to_dict() == d
    # a report written before ids (no `schema_minor`, no check `id`) reads back as what it was
    old = report.to_data()
    del old["schema_minor"]
    for c in old["steps"][0]["checks"]:
        del c["id"]
    read = Report.from_data(old)
    assert read.schema_minor == 0 and [c.id for c in read.steps[0].checks] == ["", ""]


def test_a_point_that_waits_says_so_in_the_json_and_survives_wording_and_transport() -> None:
    """A check that fails only because no output matches the reference yet has the status "waiting" (schema_minor
    2), scores 0, and keeps that status through `worded` and the to_data/from_data round trip (issue 37)."""
    step = StepResult("softmax", "Step 2", 0.0, 3.0, "failed",
                      [CheckResult("a", 0.0, 1.0, False, "why", "softmax.a"),
                       CheckResult("b", 0.0, 1.0, False, "waits", "softmax.b", waiting=True)], "wrong_answer", "msg")
    report = Report("x.py", [step])
    d = report.to_dict()
    assert [c["status"] for c in d["steps"][0]["checks"]] == ["failed", "waiting"]
    assert [c.status for c in report.worded("zh").steps[0].checks] == ["failed", "waiting"]
    assert Report.from_data(report.to_data()).to_dict() == d
