"""Verdicts do not depend on the secret (issue 12): under each of N secrets every buggy fixture loses exactly the
checks tests/fixtures/expected.json names, and every correct fixture keeps full marks.

The secret draws every hidden input: sizes, weights, inputs, seeds. The sizes are drawn pairwise distinct
(grader.checks.Gen.distinct), so no bug that mixes up d_in, d_out, num_tokens, context_length, num_heads or
head_dim can hide behind a coincidence, and dropout's placement is seen exactly (fixed sizes, x = I).

One test per secret grades the whole fixture folder as a batch does: one worker per submission, asked only for
the steps it defines, and all their checks in one pytest session (grader.grading.engine.judge).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_fixtures import BUGGY, CORRECT, CORRECT_STEPS, EXPECTED, outcome  # tests/test_fixtures.py

from grader.grading.engine import collect, judge
from grader.report import Report

# test_fixtures grades under the default one; a developer's run takes 3 more, CI 20 (ATTN_KATA_TEST_SECRETS=20)
SECRETS = [f"term{i:02d}" for i in range(int(os.environ.get("ATTN_KATA_TEST_SECRETS", "3")))]


def _grade(paths: dict[str, tuple[Path, list[str]]], secret: str) -> dict[str, Report]:
    cols = [collect(path, steps=steps, secret=secret) for path, steps in paths.values()]
    return dict(zip(paths, judge(cols, secret=secret), strict=True))


@pytest.mark.parametrize("secret", SECRETS)
def test_every_fixture_scores_the_same_under_this_secret(secret: str) -> None:
    buggy = {f"buggy/{n}": (BUGGY / f"{n}.py", sorted(steps)) for n, steps in EXPECTED.items()}
    correct = {f"correct/{n}": (CORRECT / n, sorted(steps)) for n, steps in CORRECT_STEPS.items()
               if (CORRECT / n).exists()}  # the notebook is built by test_fixtures from book_verbatim.py
    reports = _grade(buggy | correct, secret)
    wrong = {}
    for key, report in reports.items():
        if key.startswith("buggy/"):
            got, want = outcome(report), EXPECTED[key.removeprefix("buggy/")]
        else:
            got = {s.id: s.score for s in report.steps}
            want = {s.id: s.max_score for s in report.steps}
        if got != want:
            wrong[key] = {sid: got.get(sid) for sid in set(got) | set(want) if got.get(sid) != want.get(sid)}
    assert not wrong, wrong
