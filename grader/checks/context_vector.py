"""Step 3: context_vector(attn_weights, inputs) -> z of shape (d_in,)."""

from __future__ import annotations

import torch

from grader.checks import JOURNEY, Case, Gen, Outcome, cases, check, expect, hints
from grader.checks.common import call
from grader.i18n import N_, _

STEP = "context_vector"

hints(
    STEP,
    N_(
        "The context vector is a weighted average of the input tokens; the attention weights are the "
        "weights."
    ),
    N_(
        "§3.3.1 step 3: z = Σ_i α_i · x_i. Start from a zero vector of length d_in and add each input row "
        "scaled by its attention weight (or do it as one vector-matrix product)."
    ),
    N_(
        "attn_weights (num_tokens,), inputs (num_tokens, d_in). Loop: context_vec = "
        "torch.zeros(inputs.shape[1]); for i, x_i in enumerate(inputs): context_vec += alpha_i * x_i -> "
        "(d_in,). Vectorised: attn_weights @ inputs, (num_tokens,) @ (num_tokens, d_in) -> (d_in,)."
    ),
)

DIMS = ("d_in",)


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    n, d = g.distinct(lambda: (g.int(7, 10), g.int(2, 4)), 6, 3)  # more tokens than the book's 6, never its d_in = 3
    book_w = torch.softmax(JOURNEY @ JOURNEY[1], dim=0)
    return {
        "book": call("context_vector", g, attn_weights=book_w, inputs=JOURNEY),
        "random": call("context_vector", g, attn_weights=torch.softmax(g.randn(n), 0), inputs=g.randn(n, d)),
        "single": call("context_vector", g, attn_weights=torch.ones(1), inputs=g.randn(1, d)),
        "grad": call("context_vector", g, attn_weights=torch.softmax(g.randn(n), 0), inputs=g.randn(n, d),
                     grad_out=(d,)),
    }


@check(STEP, N_("the book's example: z(2) for 'journey'"))
def book_example(r: Outcome) -> None:
    expect.close(r.got("book"), r.want("book"), _("context vector z(2)"), DIMS)


@check(STEP, N_("shape (d_in,) when num_tokens ≠ d_in"))
def output_shape(r: Outcome) -> None:
    got = expect.tensor(r.got("random"), _("context vector"))
    expect.shape(got, r.want("random").shape, _("context vector (a weighted sum over tokens)"), DIMS)


@check(STEP, N_("random weights and inputs"))
def random_inputs(r: Outcome) -> None:
    expect.close(r.got("random"), r.want("random"), _("context vector"), DIMS)


@check(STEP, N_("a single token: z equals that token"))
def single_token(r: Outcome) -> None:
    expect.close(r.got("single"), r.want("single"), _("context vector of one token"), DIMS)


@check(STEP, N_("gradients flow back to attn_weights and inputs"))
def gradients(r: Outcome) -> None:
    # a case that raised says so (an exception is no gradient problem), and so does a wrong shape: the gradient is
    # taken against an upstream gradient of the right shape, so nothing detached need be the cause
    expect.shape(expect.tensor(r.got("grad"), _("context vector")), r.want("grad").shape, _("context vector"), DIMS)
    for name in ("attn_weights", "inputs"):
        expect.true(r.has("grad", f"grad.{name}"),
                    _("no gradient reaches `{name}`: avoid .item(), .detach() or torch.tensor([...]) "
                      "on results").format(name=name))
        expect.close(r.got("grad", f"grad.{name}"), r.want("grad", f"grad.{name}"),
                     _("gradient of {name}").format(name=name))
