"""The single pytest test function; grader/runner.py parametrizes it with every (submission, step) to judge."""

from __future__ import annotations

from typing import Any


def test_step(kata_job: Any, kata_judge: Any) -> None:
    kata_judge(kata_job)
