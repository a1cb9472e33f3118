"""Report records: their JSON form."""

from __future__ import annotations

import dataclasses

from grader.grading.report import CheckResult, Report, StepResult


def test_report_to_dict_equals_asdict() -> None:
    """The hand-written to_dict (faster) says exactly what dataclasses.asdict says, field for field."""
    step = StepResult("softmax", "Step 2", 1.0, 2.0, "partial", [CheckResult("a", 1.0, 1.0, True),
                      CheckResult("b", 0.0, 1.0, False, "why")], "wrong_answer", "msg",
                      [{"id": "softmax_dim0", "message": "m"}])
    assert step.to_dict() == dataclasses.asdict(step)
    assert list(step.to_dict()) == [f.name for f in dataclasses.fields(StepResult)]
    assert Report("x.py", [step]).to_dict()["steps"] == [dataclasses.asdict(step)]
