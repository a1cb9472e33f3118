"""Step 3: context_vector(attn_weights, inputs) -> z of shape (d_in,)."""

from __future__ import annotations

import torch

from . import JOURNEY, Case, Gen, Outcome, cases, check, expect
from ._common import call

STEP = "context_vector"
DIMS = ("d_in",)


@cases(STEP)
def _(g: Gen) -> dict[str, Case]:
    n, d = g.int(5, 9), g.int(2, 4)
    book_w = torch.softmax(JOURNEY @ JOURNEY[1], dim=0)
    return {
        "book": call("context_vector", g, attn_weights=book_w, inputs=JOURNEY),
        "random": call("context_vector", g, attn_weights=torch.softmax(g.randn(n), 0), inputs=g.randn(n, d)),
        "single": call("context_vector", g, attn_weights=torch.ones(1), inputs=g.randn(1, d)),
        "grad": call("context_vector", g, attn_weights=torch.softmax(g.randn(n), 0), inputs=g.randn(n, d),
                     grad_out=(d,)),
    }


@check(STEP, "the book's example: z(2) for 'journey'")
def _(r: Outcome) -> None:
    expect.close(r.got("book"), r.want("book"), "context vector z(2)", DIMS)


@check(STEP, "shape (d_in,) when num_tokens ≠ d_in")
def _(r: Outcome) -> None:
    got = expect.tensor(r.got("random"), "context vector")
    expect.shape(got, r.want("random").shape, "context vector (a weighted sum over tokens)", DIMS)


@check(STEP, "random weights and inputs")
def _(r: Outcome) -> None:
    expect.close(r.got("random"), r.want("random"), "context vector", DIMS)


@check(STEP, "a single token: z equals that token")
def _(r: Outcome) -> None:
    expect.close(r.got("single"), r.want("single"), "context vector of one token", DIMS)


@check(STEP, "gradients flow back to attn_weights and inputs")
def _(r: Outcome) -> None:
    for name in ("attn_weights", "inputs"):
        expect.true(r.has("grad", f"grad.{name}"),
                    f"no gradient reaches `{name}`: avoid .item(), .detach() or torch.tensor([...]) on results")
        expect.close(r.got("grad", f"grad.{name}"), r.want("grad", f"grad.{name}"), f"gradient of {name}")
