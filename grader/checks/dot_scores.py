"""Step 1: attention_scores(inputs, query) -> ω of shape (num_tokens,)."""

from __future__ import annotations

from . import JOURNEY, Case, Gen, Outcome, cases, check, expect
from ._common import call

STEP = "dot_scores"
DIMS = ("num_tokens",)


@cases(STEP)
def _(g: Gen) -> dict[str, Case]:
    n, d = g.int(5, 9), g.int(2, 4)  # num_tokens != d_in, so a sum over the wrong dim shows
    return {
        "book": call("attention_scores", g, inputs=JOURNEY, query=JOURNEY[1]),
        "random": call("attention_scores", g, inputs=g.rand(n, d), query=g.rand(d)),
        "single": call("attention_scores", g, inputs=g.rand(1, d), query=g.rand(d)),
        "signed": call("attention_scores", g, inputs=g.randn(n, d, scale=3.0), query=g.randn(d, scale=3.0)),
    }


@check(STEP, "the book's example: query = inputs[1] of 'Your journey starts with one step'")
def _(r: Outcome) -> None:
    expect.close(r.got("book"), r.want("book"), "ω for query x(2)", DIMS)


@check(STEP, "random inputs with num_tokens ≠ d_in")
def _(r: Outcome) -> None:
    expect.close(r.got("random"), r.want("random"), "attention scores", DIMS)


@check(STEP, "a single token")
def _(r: Outcome) -> None:
    expect.close(r.got("single"), r.want("single"), "attention scores for one token", DIMS)


@check(STEP, "negative and larger values")
def _(r: Outcome) -> None:
    expect.close(r.got("signed"), r.want("signed"), "attention scores", DIMS)


@check(STEP, "leaves inputs and query unchanged")
def _(r: Outcome) -> None:
    for case in ("book", "random", "signed"):
        expect.true(not r.got(case, "inputs_modified"),
                    "your function changed `inputs` or `query` in place; compute new tensors instead")
