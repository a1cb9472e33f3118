"""The single pytest test function; grader/grading/runner.py parametrizes it with every submission to judge."""

from __future__ import annotations

from typing import Any


def test_submission(kata_item: Any, kata_judge: Any) -> None:
    kata_judge(kata_item)
