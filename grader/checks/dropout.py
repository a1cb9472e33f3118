"""Step 8: dropout_attention(attn_weights, p, training=True): inverted dropout by hand."""

from __future__ import annotations

import torch

from . import Case, Gen, Outcome, cases, check, expect
from ._common import call

STEP = "dropout"
FN = "dropout_attention"


@cases(STEP)
def _(g: Gen) -> dict[str, Case]:
    return {
        "half": call(FN, g, consts=[0.5, True], repeat=2, attn_weights=g.rand(1, 128, 128) + 0.1),
        "fifth": call(FN, g, consts=[0.2, True], attn_weights=g.rand(96, 96) + 0.1),
        "eval": call(FN, g, consts=[0.5, False], attn_weights=g.rand(6, 6) + 0.1),
        "p0": call(FN, g, consts=[0.0, True], attn_weights=g.rand(6, 6) + 0.1),
    }


def _kept(r: Outcome, case: str) -> tuple[torch.Tensor, torch.Tensor]:
    got = expect.tensor(r.got(case), "dropout_attention(...)")
    w = r.inputs(case)["attn_weights"]
    expect.shape(got, w.shape, "dropout output (same shape as attn_weights)")
    return got, w


@check(STEP, "zeroes a fraction p of the weights")
def _(r: Outcome) -> None:
    for case, p in (("half", 0.5), ("fifth", 0.2)):
        got, _ = _kept(r, case)
        frac = float((got == 0).float().mean())
        expect.true(abs(frac - p) < 0.02, f"with p={p}, {frac:.1%} of the weights are zero, expected about {p:.0%}"
                    + (" (p is the probability to drop, not to keep)" if abs(frac - (1 - p)) < 0.02 else ""))


@check(STEP, "scales the kept weights by 1/(1−p)")
def _(r: Outcome) -> None:
    for case, p in (("half", 0.5), ("fifth", 0.2)):
        got, w = _kept(r, case)
        kept = got != 0
        expect.true(bool(kept.any()), f"with p={p} every weight was dropped")
        ratio = (got[kept] / w[kept]).mean().item()
        expect.close(got[kept], w[kept] / (1 - p), f"kept weights with p={p} (yours are ×{ratio:.3g}, "
                     f"expected ×{1 / (1 - p):.3g})")


@check(STEP, "training=False returns the weights unchanged")
def _(r: Outcome) -> None:
    got, w = _kept(r, "eval")
    expect.close(got, w, "dropout in eval mode (training=False must be the identity)")


@check(STEP, "p = 0 returns the weights unchanged")
def _(r: Outcome) -> None:
    got, w = _kept(r, "p0")
    expect.close(got, w, "dropout with p=0")


@check(STEP, "leaves attn_weights unchanged (no in-place edit)")
def _(r: Outcome) -> None:
    for case in ("half", "eval"):
        expect.true(not r.got(case, "inputs_modified"), "dropout_attention changed its input in place")


@check(STEP, "draws a fresh random mask on each call")
def _(r: Outcome) -> None:
    a, _ = _kept(r, "half")
    b = expect.tensor(r.got("half", "out1"), "second call")
    expect.true(not torch.equal(a, b), "two calls dropped exactly the same weights: do not reseed inside the function")
