"""attention-kata: the grader for the attention chapter of *Build a Large Language Model (From Scratch)*."""

from __future__ import annotations

from typing import Any


def check(*steps: str, **kwargs: Any) -> Any:
    """In a notebook: grade the functions defined so far, e.g. `check("causal_attention")`.

    See grader.learner.notebook."""
    from grader.learner.notebook import check as _check

    return _check(*steps, **kwargs)
