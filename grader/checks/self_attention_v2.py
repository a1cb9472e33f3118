"""Step 6: SelfAttention_v2 with nn.Linear layers and an optional bias."""

from __future__ import annotations

from . import Case, Gen, Outcome, book_inputs, cases, check, expect
from ._common import book, grads_match, linear_shapes, module

STEP = "self_attention_v2"
CLS = "SelfAttention_v2"
DIMS = ("num_tokens", "d_out")


@cases(STEP)
def _(g: Gen) -> dict[str, Case]:
    d_in, n = g.int(3, 5), g.int(5, 8)
    d_out = d_in + g.int(1, 3)
    ctor = {"d_in": d_in, "d_out": d_out}
    return {
        "fwd": module(CLS, g, ctor, linear_shapes("", d_in, d_out), g.randn(n, d_in), grad_out=(n, d_out)),
        "bias": module(CLS, g, {**ctor, "qkv_bias": True}, linear_shapes("", d_in, d_out, bias=True),
                       g.randn(n, d_in), grad_out=(n, d_out)),
        "single": module(CLS, g, ctor, linear_shapes("", d_in, d_out), g.randn(1, d_in)),
        "book": book(CLS, g, {"d_in": 3, "d_out": 2}, 789, book_inputs()),
    }


@check(STEP, "W_query, W_key, W_value are nn.Linear(d_in, d_out), without bias by default")
def _(r: Outcome) -> None:
    s = r.got("single", "structure")
    for name in ("W_query", "W_key", "W_value"):
        kind = s["children"].get(name)
        expect.true(kind == "Linear", f"`{name}` is {kind or 'missing'}, expected nn.Linear(d_in, d_out)")
    extra = sorted(set(s["params"]) - set(r.want("single", "structure")["params"]))
    expect.true(not extra, f"unexpected parameters {', '.join(extra)}: qkv_bias=False means bias=False")


@check(STEP, "qkv_bias=True adds a bias to each layer")
def _(r: Outcome) -> None:
    grads_match(r, "bias", "SelfAttention_v2(qkv_bias=True)")
    expect.close(r.got("bias"), r.want("bias"), "context vectors with bias", DIMS)


@check(STEP, "matches the reference with d_in ≠ d_out")
def _(r: Outcome) -> None:
    expect.close(r.got("fwd"), r.want("fwd"), "context vectors", DIMS)


@check(STEP, "a single token")
def _(r: Outcome) -> None:
    expect.close(r.got("single"), r.want("single"), "context vector of one token", DIMS)


@check(STEP, "the book's example: torch.manual_seed(789), SelfAttention_v2(3, 2)")
def _(r: Outcome) -> None:
    expect.close(r.got("book"), r.want("book"), "sa_v2(inputs) (create W_query, W_key, W_value in that order)", DIMS)


@check(STEP, "gradients reach every weight")
def _(r: Outcome) -> None:
    grads_match(r, "fwd", "SelfAttention_v2")
