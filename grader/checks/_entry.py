"""The single pytest test function; grader/runner.py parametrizes it with every check to run."""

from __future__ import annotations

from typing import Any


def test_check(kata_check: Any, kata_outcome: Any) -> None:
    kata_check.fn(kata_outcome)
