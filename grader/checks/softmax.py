"""Step 2: normalize_by_sum, softmax_naive, attention_weights (stable softmax over the last dim)."""

from __future__ import annotations

from typing import Any

import torch

from grader.checks import JOURNEY, Case, Gen, Outcome, cases, check, diagnosis, expect, hints, pictures
from grader.checks.common import call
from grader.i18n import N_, _

STEP = "softmax"

hints(
    STEP,
    N_(
        "Turn the scores into weights that are positive and add up to 1; the three functions are three "
        "attempts at that, from plain division to a safe softmax."
    ),
    N_(
        "§3.3.1 step 2: normalize_by_sum divides ω by its sum; softmax_naive computes exp(ω) / Σ exp(ω) on "
        "a 1-D tensor, exactly as the book (it overflows for large scores); attention_weights is the "
        "numerically stable softmax over the last dimension (subtract the max first, or use "
        "torch.softmax(..., dim=-1))."
    ),
    N_(
        "scores (num_tokens,) -> (num_tokens,) for the first two: scores / scores.sum(); torch.exp(scores) "
        "/ torch.exp(scores).sum(dim=0). attention_weights: (..., num_tokens) -> (..., num_tokens), "
        "torch.softmax(scores, dim=-1), each slice along the last dim sums to 1."
    ),
)
# drawn next to the reference's: the learner's attention weights here (grader.render.heatmap)
pictures(STEP, {"w2d": "attention_weights(scores)"})


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    n, m = g.int(4, 7), g.int(8, 10)
    omega = JOURNEY @ JOURNEY[1]
    return {
        "sum_book": call("normalize_by_sum", g, scores=omega),
        "sum_random": call("normalize_by_sum", g, scores=g.rand(n) + 0.1),
        "naive_book": call("softmax_naive", g, scores=omega),
        "naive_random": call("softmax_naive", g, scores=g.randn(m, scale=2.0)),
        "w1d": call("attention_weights", g, scores=g.randn(m, scale=2.0)),
        "w2d": call("attention_weights", g, scores=g.randn(n, m, scale=2.0)),
        "w3d": call("attention_weights", g, scores=g.randn(2, n, m, scale=2.0)),
        "large": call("attention_weights", g, scores=g.randn(n, m, scale=1000.0) + 500.0),
    }


@check(STEP, N_("normalize_by_sum divides by the sum"))
def normalize_by_sum(r: Outcome) -> None:
    for case in ("sum_book", "sum_random"):
        expect.close(r.got(case), r.want(case), "normalize_by_sum(scores)", ("num_tokens",))


@check(STEP, N_("softmax_naive matches exp(x) / Σ exp(x)"))
def softmax_naive(r: Outcome) -> None:
    for case in ("naive_book", "naive_random"):
        expect.close(r.got(case), r.want(case), "softmax_naive(scores)", ("num_tokens",))


@check(STEP, N_("attention_weights on 1-D and 2-D scores (softmax over the last dim)"))
def one_and_two_dim_scores(r: Outcome) -> None:
    expect.close(r.got("w1d"), r.want("w1d"), _("attention_weights(1-D scores)"), ("num_tokens",))
    expect.close(r.got("w2d"), r.want("w2d"), _("attention_weights(2-D scores)"), ("queries", "keys"))


@check(STEP, N_("attention_weights with a leading batch dimension"))
def leading_batch_dim(r: Outcome) -> None:
    expect.close(r.got("w3d"), r.want("w3d"), _("attention_weights(3-D scores)"), ("batch", "queries", "keys"))


@check(STEP, N_("every row of attention weights sums to 1"))
def rows_sum_to_one(r: Outcome) -> None:
    got = expect.tensor(r.got("w3d"), "attention_weights")
    expect.shape(got, r.want("w3d").shape, "attention_weights", ("batch", "queries", "keys"))
    sums = got.sum(dim=-1)
    expect.true(bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-5)),
                _("rows sum to {sums}…, expected 1: is the softmax over the last dim?").format(
                    sums=expect.numbers(sums)))


@check(STEP, N_("attention_weights stays finite on large scores (numerically stable)"))
def stable_on_large_scores(r: Outcome) -> None:
    got = expect.tensor(r.got("large"), _("attention_weights(large scores)"))
    expect.finite(got, _("attention_weights on scores around 1000 (subtract the max before exp)"))
    expect.close(got, r.want("large"), _("attention_weights(large scores)"), ("queries", "keys"))


# ---------------------------------------------------------------- diagnosis (grader.grading.diagnose)


@diagnosis(STEP)
def _diagnose(r: Outcome, kit: Any) -> list[str]:
    def wrong_dim(r: Outcome, case: str) -> list[torch.Tensor] | None:
        s = r.inputs(case)["scores"].to(torch.float64)
        return [torch.softmax(s, dim=d) for d in range(s.dim() - 1)] or None

    return ["softmax_wrong_dim"] if kit.matches(r, ["w2d", "w3d"], wrong_dim) else []
