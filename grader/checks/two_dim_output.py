"""Step 13 (exercise 3.2): two_dim_wrapper(d_in, context_length, dropout) is a 2-head wrapper with 2-dim output.

The wrapper itself is the reference's (the step builds on step 10), so every case builds the module under the
case's seed and compares the outputs: only the arguments the learner passes can make them differ."""

from __future__ import annotations

import torch

from grader.checks import Case, Gen, Outcome, book_inputs, cases, check, expect, hints
from grader.checks.common import book, module
from grader.i18n import N_, _

STEP = "two_dim_output"

hints(
    STEP,
    N_(
        "Keep num_heads=2 and ask yourself which argument sets the width of each head's output."
    ),
    N_(
        "Exercise 3.2 (§3.6.1): the wrapper concatenates num_heads outputs of d_out dimensions each, so its "
        "context vectors have num_heads * d_out dimensions. Two heads and two dimensions: what must d_out be?"
    ),
    N_(
        "return MultiHeadAttentionWrapper(d_in, 1, context_length, dropout, num_heads=2): each head gives "
        "(batch, num_tokens, 1), concatenated -> (batch, num_tokens, 2). Pass d_in, context_length and "
        "dropout on as they are."
    ),
)

FN = "two_dim_wrapper"
DIMS = ("batch", "num_tokens", "num_heads * d_out = 2")


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    d_in, ctx = g.int(4, 6), g.int(8, 10)
    return {
        "book": book(FN, g, {"d_in": 3, "context_length": 6, "dropout": 0.0}, 123,
                     torch.stack((book_inputs(), book_inputs()), dim=0)),
        # one argument changed at a time, so a hard-coded value fails only the check that changes it
        "d_in": module(FN, g, {"d_in": d_in, "context_length": 6, "dropout": 0.0}, {}, g.randn(2, 6, d_in),
                       structure=True),
        "context": module(FN, g, {"d_in": 3, "context_length": ctx, "dropout": 0.0}, {}, g.randn(2, ctx, 3)),
        "dropout": module(FN, g, {"d_in": 3, "context_length": 6, "dropout": 0.5}, {}, g.randn(2, 6, 3),
                          train=True),
    }


@check(STEP, N_("a MultiHeadAttentionWrapper: num_heads = 2 CausalAttention heads with d_out = 1, in an "
                "nn.ModuleList"))
def two_heads_of_d_out_1(r: Outcome) -> None:
    s = r.got("d_in", "structure")
    w = r.want("d_in", "structure")
    expect.true(s["heads_type"] == "ModuleList", _("self.heads is {type}, expected nn.ModuleList "
                  "(a plain list hides the heads' weights from .parameters())").format(type=s["heads_type"]))
    heads = s["heads"] or []
    expect.true(len(heads) == 2, _("1 head, expected num_heads = 2") if len(heads) == 1 else
                _("{n} heads, expected num_heads = 2").format(n=len(heads)))
    for name, shape in w["params"].items():
        got = s["params"].get(name)
        expect.true(got == shape, _("parameter `{name}` is {got}, expected {want} (d_out = 1 per head)").format(
            name=name, got=tuple(got) if got else None, want=tuple(shape)))
    expect.true(s["n_unique_params"] == w["n_unique_params"],
                _("{n} distinct parameters, expected {want}").format(n=s["n_unique_params"],
                                                                    want=w["n_unique_params"]))


@check(STEP, N_("the book's setting: torch.manual_seed(123), d_in=3, context_length=6 -> (2, 6, 2)"))
def book_setting(r: Outcome) -> None:
    expect.close(r.got("book"), r.want("book"), "mha(batch)", DIMS)


@check(STEP, N_("another d_in: d_in is passed on"))
def d_in_passed_on(r: Outcome) -> None:
    d_in = r.case_specs["d_in"].params["ctor"]["d_in"]
    expect.close(r.got("d_in"), r.want("d_in"), _("context vectors with d_in = {d_in}").format(d_in=d_in), DIMS)


@check(STEP, N_("a longer context_length: context_length is passed on"))
def context_length_passed_on(r: Outcome) -> None:
    ctx = r.case_specs["context"].params["ctor"]["context_length"]
    expect.close(r.got("context"), r.want("context"),
                 _("context vectors for {n} tokens with context_length = {n}").format(n=ctx), DIMS)


@check(STEP, N_("dropout is passed on (training mode, dropout = 0.5)"))
def dropout_passed_on(r: Outcome) -> None:
    expect.close(r.got("dropout"), r.want("dropout"), _("context vectors in training mode with dropout = 0.5"),
                 DIMS)
