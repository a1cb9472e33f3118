"""Step 8: dropout_attention(attn_weights, p, training=True): inverted dropout by hand."""

from __future__ import annotations

from typing import Any

import torch

from grader.checks import Case, Gen, Outcome, cases, check, diagnosis, expect, hints, mistakes, pictures, proof
from grader.checks.common import call
from grader.i18n import N_, _

STEP = "dropout"

hints(
    STEP,
    N_(
        "Randomly drop some attention weights during training, and make up for the loss in the ones you "
        "keep."
    ),
    N_(
        "§3.5.2: inverted dropout, what nn.Dropout does: each weight is zeroed with probability p and the "
        "survivors are scaled by 1/(1-p), so the expected value is unchanged. When not training (or p == 0) "
        "return the weights untouched; p == 1 gives all zeros."
    ),
    N_(
        "attn_weights (..., num_tokens, num_tokens) -> same shape. if not training or p == 0: return "
        "attn_weights. keep = torch.rand_like(attn_weights) >= p (a bool mask, True with probability 1-p); "
        "return attn_weights * keep / (1 - p). Handle p == 1 separately (torch.zeros_like) to avoid 0/0."
    ),
)
# drawn next to the reference's: the learner's attention weights here (grader.render.heatmap)
pictures(STEP, {"eval": "dropout_attention(attn_weights, p, training=False)"})

FN = "dropout_attention"


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    return {
        "half": call(FN, g, consts=[0.5, True], repeat=2, attn_weights=g.rand(1, 128, 128) + 0.1),
        "fifth": call(FN, g, consts=[0.2, True], attn_weights=g.rand(96, 96) + 0.1),
        "eval": call(FN, g, consts=[0.5, False], attn_weights=g.rand(6, 6) + 0.1),
        "p0": call(FN, g, consts=[0.0, True], attn_weights=g.rand(6, 6) + 0.1),
    }


def _kept(r: Outcome, case: str) -> tuple[torch.Tensor, torch.Tensor]:
    got = expect.tensor(r.got(case), "dropout_attention(...)")
    w = r.inputs(case)["attn_weights"]
    expect.shape(got, w.shape, _("dropout output (same shape as attn_weights)"))
    return got, w


@proof(STEP)
def _masks_its_input(r: Outcome) -> None:
    """Proof of work (its outputs are random, so never the reference's): in training mode each weight is dropped (0)
    or kept and multiplied by one factor, some of both, and which are dropped does not follow their values. Dropout
    with a wrong p or scale passes; the identity, a rescaling, noise or `w * (w > t)` do not."""
    for case in ("half", "fifth"):
        got, w = _kept(r, case)
        kept = got != 0
        expect.true(0.05 < float(kept.float().mean()) < 0.95, "not a mask")
        ratio = got[kept].to(torch.float64) / w[kept].to(torch.float64)
        expect.true(bool(torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-4, atol=1e-6)), "not one factor")
        expect.true(abs(float(w[kept].mean() - w[~kept].mean())) < 0.05, "the mask follows the values")


@check(STEP, N_("zeroes a fraction p of the weights"))
def zeroes_fraction_p(r: Outcome) -> None:
    for case, p in (("half", 0.5), ("fifth", 0.2)):
        got, _w = _kept(r, case)
        frac = float((got == 0).float().mean())
        expect.true(abs(frac - p) < 0.02,
                    _("with p={p}, {frac:.1%} of the weights are zero, expected about {p:.0%}").format(p=p, frac=frac)
                    + (_(" (p is the probability to drop, not to keep)") if abs(frac - (1 - p)) < 0.02 else ""))


@check(STEP, N_("scales the kept weights by 1/(1−p)"))
def scales_kept_weights(r: Outcome) -> None:
    for case, p in (("half", 0.5), ("fifth", 0.2)):
        got, w = _kept(r, case)
        kept = got != 0
        expect.true(bool(kept.any()), _("with p={p} every weight was dropped").format(p=p))
        ratio = (got[kept] / w[kept]).mean().item()
        expect.close(got[kept], w[kept] / (1 - p),
                     _("kept weights with p={p} (yours are ×{ratio:.3g}, expected ×{want:.3g})").format(
                         p=p, ratio=ratio, want=1 / (1 - p)))


@check(STEP, N_("training=False returns the weights unchanged"))
def eval_mode_unchanged(r: Outcome) -> None:
    got, w = _kept(r, "eval")
    expect.close(got, w, _("dropout in eval mode (training=False must be the identity)"))


@check(STEP, N_("p = 0 returns the weights unchanged"))
def p_zero_unchanged(r: Outcome) -> None:
    got, w = _kept(r, "p0")
    expect.close(got, w, _("dropout with p=0"))


@check(STEP, N_("leaves attn_weights unchanged (no in-place edit)"))
def no_in_place_edit(r: Outcome) -> None:
    for case in ("half", "eval"):
        expect.true(not r.got(case, "inputs_modified"), _("dropout_attention changed its input in place"))


@check(STEP, N_("draws a fresh random mask on each call"))
def fresh_mask_each_call(r: Outcome) -> None:
    a, _w = _kept(r, "half")
    b = expect.tensor(r.got("half", "out1"), _("second call"))
    expect.shape(b, a.shape, _("second call"))
    expect.true(not torch.equal(a, b),
                _("two calls dropped exactly the same weights: do not reseed inside the function"))


# ---------------------------------------------------------------- diagnosis (grader.grading.diagnose)

mistakes(STEP, {
    "dropout_no_rescale": N_(
        'dropout does not rescale the kept weights: multiply them by 1/(1−p) so their expected value is '
        'unchanged (inverted dropout)'),
    "dropout_rescale_wrong": N_(
        'dropout multiplies the kept weights by (1−p): divide by (1−p) instead, i.e. scale by 1/(1−p)'),
    "dropout_keep_prob": N_(
        'p is used as the probability to keep: it is the probability to drop (keep where '
        'torch.rand(...) >= p)'),
    "dropout_in_eval": N_(
        'dropout is active in evaluation mode: with training=False (after model.eval()) the weights '
        'must pass through unchanged'),
})


@diagnosis(STEP)
def _diagnose(r: Outcome, kit: Any) -> list[str]:
    found: list[str] = []
    ratios: dict[float, float] = {}
    fracs: dict[float, float] = {}
    for case, p in (("half", 0.5), ("fifth", 0.2)):
        got, w = kit.got(r, case), r.inputs(case)["attn_weights"]
        if not isinstance(got, torch.Tensor) or got.shape != w.shape or not got.is_floating_point():
            continue
        kept = got != 0
        fracs[p] = float((~kept).float().mean())
        if kept.any() and fracs[p] > 0.02:  # something was dropped: how were the survivors scaled?
            ratio = (got[kept] / w[kept]).to(torch.float64)
            if torch.allclose(ratio, torch.full_like(ratio, ratio.mean().item()), atol=1e-4, rtol=1e-3):
                ratios[p] = ratio.mean().item()
    if ratios and all(abs(q - 1.0) < 1e-3 for q in ratios.values()):
        found.append("dropout_no_rescale")
    elif ratios and all(abs(q - (1 - p)) < 1e-3 for p, q in ratios.items()):
        found.append("dropout_rescale_wrong")
    if 0.2 in fracs and abs(fracs[0.2] - 0.8) < 0.03:
        found.append("dropout_keep_prob")
    got, w = kit.got(r, "eval"), r.inputs("eval")["attn_weights"]
    if isinstance(got, torch.Tensor) and got.shape == w.shape and not kit.close(got, w) and bool((got == 0).any()):
        found.append("dropout_in_eval")
    return found
