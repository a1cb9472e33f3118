"""Step 4: all scores, weights and context vectors at once, with matrix products (no loops)."""

from __future__ import annotations

from typing import Any

import torch

from grader.checks import JOURNEY, Case, Gen, Outcome, cases, check, diagnosis, expect, hints, pictures
from grader.checks.common import call
from grader.i18n import N_, _

STEP = "all_tokens"

hints(
    STEP,
    N_(
        "Every token is a query now: steps 1-3 for all tokens at once become three matrix operations, no "
        "loops."
    ),
    N_(
        "§3.3.2: all pairwise dot products are one matrix product of inputs with its transpose; softmax "
        "each row (dim=-1, so every row of attention weights sums to 1); then the attention weights times "
        "the inputs give every context vector."
    ),
    N_(
        "attn_scores = inputs @ inputs.T: (num_tokens, d_in) @ (d_in, num_tokens) -> (num_tokens, "
        "num_tokens). attn_weights = torch.softmax(attn_scores, dim=-1): (num_tokens, num_tokens). "
        "all_context_vecs = attn_weights @ inputs: (num_tokens, num_tokens) @ (num_tokens, d_in) -> "
        "(num_tokens, d_in)."
    ),
)

SQ = ("num_tokens", "num_tokens")


# drawn next to the reference's: the learner's attention weights here (grader.render.heatmap)
pictures(STEP, {"weights": "all_attention_weights(attn_scores)"})
@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    n, d = g.distinct(lambda: (g.int(7, 10), g.int(2, 4)), 6, 3)  # more tokens than the book's 6, never its d_in = 3
    return {
        "scores_book": call("all_attention_scores", g, inputs=JOURNEY),
        "scores": call("all_attention_scores", g, inputs=g.randn(n, d)),
        "weights": call("all_attention_weights", g, attn_scores=g.randn(n, n, scale=2.0)),
        "context": call("all_context_vectors", g, attn_weights=torch.softmax(g.randn(n, n), -1),
                        inputs=g.randn(n, d)),
        "single_scores": call("all_attention_scores", g, inputs=g.randn(1, d)),
        "single_context": call("all_context_vectors", g, attn_weights=torch.ones(1, 1), inputs=g.randn(1, d)),
    }


@check(STEP, N_("all_attention_scores = inputs @ inputs.T"))
def _check(r: Outcome) -> None:
    for case in ("scores_book", "scores"):
        expect.close(r.got(case), r.want(case), _("attention scores"), SQ)


@check(STEP, N_("all_attention_weights: softmax of each row, rows sum to 1"))
def _check(r: Outcome) -> None:
    got = expect.tensor(r.got("weights"), _("attention weights"))
    expect.shape(got, r.want("weights").shape, _("attention weights"), SQ)
    sums = got.sum(dim=-1)
    expect.true(bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-5)),
                _("rows of the attention weights do not sum to 1: normalise along dim=-1 (each row)"))
    expect.close(got, r.want("weights"), _("attention weights"), SQ)


@check(STEP, N_("all_context_vectors = attn_weights @ inputs"))
def _check(r: Outcome) -> None:
    expect.close(r.got("context"), r.want("context"), _("context vectors"), ("num_tokens", "d_in"))


@check(STEP, N_("a single token"))
def _check(r: Outcome) -> None:
    expect.close(r.got("single_scores"), r.want("single_scores"), _("scores of one token"), SQ)
    expect.close(r.got("single_context"), r.want("single_context"), _("context vector of one token"),
                 ("num_tokens", "d_in"))


@check(STEP, N_("no Python loops: matrix products only"))
def _check(r: Outcome) -> None:
    loops = {name: lines for name, lines in r.static.get("loops", {}).items()
             if name in ("all_attention_scores", "all_attention_weights", "all_context_vectors") and lines}
    unread = r.static.get("unread") or []
    expect.true(not unread, _("{units}: nested too deeply for the grader to read, so it cannot tell whether these "
                              "functions are free of loops; split the long expression up").format(
        units=", ".join(map(str, unread))))
    dynamic = r.static.get("dynamic") or []
    expect.true(not dynamic, _("line {lines}: names are bound at run time there (setattr, exec, globals(), "
                               "sys.modules, __code__ …), which the grader cannot follow to tell whether these "
                               "functions are free of loops; define them with a plain def").format(
        lines=", ".join(map(str, dynamic))))
    where = "; ".join(_("{name} loops at line {lines}").format(name=name, lines=", ".join(map(str, lines)))
                      for name, lines in loops.items())
    rebound = {n: cells for n, cells in (r.static.get("rebound") or {}).items() if n in loops}
    again = "".join(_(" ({name} is defined in {cells}: a cell may stop before its def, so the grader cannot be "
                      "sure a later definition replaced the one with loops; delete or rename that one)").format(
        name=name, cells=", ".join(map(str, cells))) for name, cells in rebound.items())
    expect.true(not loops, _("{where}: this step asks for matrix products (@) instead of Python loops").format(
        where=where) + again)


# ---------------------------------------------------------------- diagnosis (grader.grading.diagnose)


@diagnosis(STEP)
def _diagnose(r: Outcome, kit: Any) -> list[str]:
    def wrong_dim(r: Outcome, case: str) -> torch.Tensor:
        return torch.softmax(r.inputs(case)["attn_scores"].to(torch.float64), dim=0)

    return ["softmax_wrong_dim"] if kit.matches(r, ["weights"], wrong_dim) else []
