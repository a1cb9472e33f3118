"""Step 7: causal_mask(num_tokens) and masked_attention_weights(attn_scores, d_k)."""

from __future__ import annotations

from typing import Any

import torch

from grader.checks import Case, Gen, Outcome, cases, check, diagnosis, expect, hints, pictures, proof
from grader.checks.common import call
from grader.i18n import N_, _

STEP = "causal_mask"

hints(
    STEP,
    N_(
        "A token may only attend to itself and earlier tokens; hide everything to the right of the "
        "diagonal."
    ),
    N_(
        "§3.5.1: the causal attention mask is the upper triangle above the main diagonal (torch.triu with "
        "diagonal=1). Fill those attention scores with -inf before the softmax so their attention weights "
        "become exactly 0 and each row still sums to 1; scale by √d_k as before."
    ),
    N_(
        "causal_mask: torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool() -> (num_tokens, "
        "num_tokens), True = masked. masked_attention_weights: attn_scores (..., num_tokens, num_tokens), "
        "num_tokens = attn_scores.shape[-1]; masked = attn_scores.masked_fill(causal_mask(num_tokens), "
        "-torch.inf) (the mask broadcasts over leading batch dims); torch.softmax(masked / d_k**0.5, "
        "dim=-1) -> same shape."
    ),
)
# drawn next to the reference's: the learner's attention weights here (grader.render.heatmap)
pictures(STEP, {"w2d": "masked_attention_weights(attn_scores, d_k)"})

SQ = ("queries", "keys")


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    n, d_k = g.distinct(lambda: (g.int(5, 8), g.int(3, 16)))  # √num_tokens never passes for √d_k
    return {
        "mask1": call("causal_mask", g, consts=[1]),
        "mask": call("causal_mask", g, consts=[n]),
        "w2d": call("masked_attention_weights", g, consts=[d_k], attn_scores=g.randn(n, n, scale=3.0)),
        "batch": call("masked_attention_weights", g, consts=[d_k], attn_scores=g.randn(2, 3, n, n, scale=3.0)),
        "single": call("masked_attention_weights", g, consts=[d_k], attn_scores=g.randn(1, 1)),
    }


@proof(STEP)
def _softmax_of_the_scores(r: Outcome) -> None:
    """Proof of work for masked_attention_weights, whatever its scaling or masking bug: up to the diagonal each row's
    weights are proportional to exp(k × its scores), for one k > 0. Uniform, one-hot or constant weights do not
    pass; a missing √d_k, zeros instead of -inf, or a mask after the softmax do (their own checks fail)."""
    s = r.inputs("w2d")["attn_scores"].to(torch.float64)
    got = expect.tensor(r.got("w2d"), "weights")
    expect.shape(got, s.shape, "weights")
    rows, cols = torch.nonzero(torch.tril(torch.ones_like(s, dtype=torch.bool)), as_tuple=True)
    kept = got.to(torch.float64)[rows, cols]
    expect.true(bool((kept > 0).all()), "a weight up to the diagonal is not positive")
    # log w_ij - log w_i0 = k (s_ij - s_i0): k by least squares, then every such ratio checked
    ds, dl = s[rows, cols] - s[rows, 0], kept.log() - got.to(torch.float64)[rows, 0].log()
    k = float((ds * dl).sum() / (ds * ds).sum())
    expect.true(k > 1e-3, "no dependence on the scores")
    expect.true(bool(torch.allclose(dl, k * ds, rtol=1e-3, atol=1e-4)), "not exp(k × scores)")


@check(STEP, N_("causal_mask: bool, True strictly above the diagonal"))
def mask_above_diagonal(r: Outcome) -> None:
    for case in ("mask", "mask1"):
        got = expect.tensor(r.got(case), "causal_mask(num_tokens)")
        want = r.want(case)
        expect.shape(got, want.shape, "causal_mask(num_tokens)", SQ)
        expect.true(got.dtype == torch.bool,
                    _("causal_mask has dtype {dtype}, expected torch.bool (True = masked)").format(dtype=got.dtype))
        if not torch.equal(got, want):
            diag = bool(got.diagonal().any())
            raise expect.Failed(_("causal_mask masks the diagonal: a token may attend to itself (diagonal=1)")
                                if diag else _("causal_mask must be True exactly above the diagonal "
                                "(torch.triu(..., diagonal=1))"))


@check(STEP, N_("masked_attention_weights matches the reference"))
def masked_attention_weights(r: Outcome) -> None:
    expect.close(r.got("w2d"), r.want("w2d"), _("masked attention weights"), SQ)


@check(STEP, N_("works with leading batch dimensions (batch, heads, …)"))
def leading_batch_dims(r: Outcome) -> None:
    expect.close(r.got("batch"), r.want("batch"), _("masked attention weights"), ("batch", "heads", *SQ))


@check(STEP, N_("future positions get exactly zero weight"))
def future_weights_zero(r: Outcome) -> None:
    got = expect.tensor(r.got("w2d"), _("masked attention weights"))
    expect.shape(got, r.want("w2d").shape, _("masked attention weights"), SQ)
    upper = torch.triu(torch.ones_like(got, dtype=torch.bool), diagonal=1)
    leak = got.masked_select(upper)
    expect.true(bool((leak == 0).all()),
                _("{n} future positions have non-zero weight: fill them with -inf before the softmax "
                  "(0 is not enough)").format(n=int((leak != 0).sum())))


@check(STEP, N_("each row sums to 1"))
def rows_sum_to_one(r: Outcome) -> None:
    got = expect.tensor(r.got("batch"), _("masked attention weights"))
    expect.finite(got, _("masked attention weights"))
    sums = got.sum(dim=-1)
    expect.true(bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-5)),
                _("rows do not sum to 1: mask the scores before the softmax, not the weights after it"))


@check(STEP, N_("a single token"))
def single_token(r: Outcome) -> None:
    expect.close(r.got("single"), r.want("single"), _("weights of one token"), SQ)


# ---------------------------------------------------------------- diagnosis (grader.grading.diagnose)


@diagnosis(STEP)
def _diagnose(r: Outcome, kit: Any) -> list[str]:
    def masked(r: Outcome, case: str, opts: dict[str, Any]) -> torch.Tensor | None:
        spec = r.case_specs[case]
        if spec.params.get("fn") != "masked_attention_weights":
            return None
        d_k = int(spec.params["consts"][0])
        opts = {**kit.REF, **opts}
        return kit.weights(spec.inputs["attn_scores"].to(torch.float64), opts,
                           kit.divisor(opts["scale"], d_k, d_k, d_k))

    cases = ["w2d", "batch", "single"]
    models = [*kit.SCALE_MODELS[:2], ("softmax_wrong_dim", {"dim": -2}), *kit.MASK_MODELS]
    found = kit.by_models(r, cases, models, masked)
    if "mask_diagonal" not in found:
        def diag_mask(r: Outcome, case: str) -> torch.Tensor:
            n = int(r.case_specs[case].params["consts"][0])
            return torch.triu(torch.ones(n, n), diagonal=0)

        if kit.matches(r, ["mask", "mask1"], diag_mask):
            found.append("mask_diagonal")
    return found
