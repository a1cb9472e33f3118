"""Step 4: all scores, weights and context vectors at once, with matrix products (no loops)."""

from __future__ import annotations

import torch

from . import JOURNEY, Case, Gen, Outcome, cases, check, expect
from ._common import call

STEP = "all_tokens"
SQ = ("num_tokens", "num_tokens")


@cases(STEP)
def _(g: Gen) -> dict[str, Case]:
    n, d = g.int(5, 9), g.int(2, 4)
    return {
        "scores_book": call("all_attention_scores", g, inputs=JOURNEY),
        "scores": call("all_attention_scores", g, inputs=g.randn(n, d)),
        "weights": call("all_attention_weights", g, attn_scores=g.randn(n, n, scale=2.0)),
        "context": call("all_context_vectors", g, attn_weights=torch.softmax(g.randn(n, n), -1),
                        inputs=g.randn(n, d)),
        "single_scores": call("all_attention_scores", g, inputs=g.randn(1, d)),
        "single_context": call("all_context_vectors", g, attn_weights=torch.ones(1, 1), inputs=g.randn(1, d)),
    }


@check(STEP, "all_attention_scores = inputs @ inputs.T")
def _(r: Outcome) -> None:
    for case in ("scores_book", "scores"):
        expect.close(r.got(case), r.want(case), "attention scores", SQ)


@check(STEP, "all_attention_weights: softmax of each row, rows sum to 1")
def _(r: Outcome) -> None:
    got = expect.tensor(r.got("weights"), "attention weights")
    expect.shape(got, r.want("weights").shape, "attention weights", SQ)
    sums = got.sum(dim=-1)
    expect.true(bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-5)),
                "rows of the attention weights do not sum to 1: normalise along dim=-1 (each row)")
    expect.close(got, r.want("weights"), "attention weights", SQ)


@check(STEP, "all_context_vectors = attn_weights @ inputs")
def _(r: Outcome) -> None:
    expect.close(r.got("context"), r.want("context"), "context vectors", ("num_tokens", "d_in"))


@check(STEP, "a single token")
def _(r: Outcome) -> None:
    expect.close(r.got("single_scores"), r.want("single_scores"), "scores of one token", SQ)
    expect.close(r.got("single_context"), r.want("single_context"), "context vector of one token",
                 ("num_tokens", "d_in"))


@check(STEP, "no Python loops: matrix products only")
def _(r: Outcome) -> None:
    loops = {name: lines for name, lines in r.static.get("loops", {}).items()
             if name in ("all_attention_scores", "all_attention_weights", "all_context_vectors") and lines}
    expect.true(not loops, "; ".join(f"{name} loops at line {', '.join(map(str, lines))}"
                                     for name, lines in loops.items())
                + ": this step asks for matrix products (@) instead of Python loops")
