"""Step 5: SelfAttention_v1 with nn.Parameter weights of shape (d_in, d_out)."""

from __future__ import annotations

from typing import Any

from grader.checks import JOURNEY, Case, Gen, Outcome, cases, check, diagnosis, expect, hints
from grader.checks.common import book, grads_match, module
from grader.i18n import N_, _

STEP = "self_attention_v1"

hints(
    STEP,
    N_(
        "Three trainable matrices project each input into a query, a key and a value; then do steps 1-3 "
        "with queries against keys, and weight the values."
    ),
    N_(
        "§3.4.1: W_query, W_key, W_value are nn.Parameter(torch.rand(d_in, d_out)) (create them in that "
        "order to reproduce the book's torch.manual_seed(123) output). Attention scores are queries times "
        "keys transposed, scaled by √d_k (d_k = keys.shape[-1]) before the softmax: scaled dot-product "
        "attention."
    ),
    N_(
        "x (num_tokens, d_in). keys = x @ self.W_key, queries = x @ self.W_query, values = x @ "
        "self.W_value: each (num_tokens, d_out). attn_scores = queries @ keys.T -> (num_tokens, "
        "num_tokens). attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1). context_vec "
        "= attn_weights @ values -> (num_tokens, d_out)."
    ),
)

CLS = "SelfAttention_v1"
DIMS = ("num_tokens", "d_out")
# where a structural cause is said once (grader.checks.structure)
STRUCTURE_CHECK = N_("W_query, W_key, W_value are nn.Parameters of shape (d_in, d_out)")


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    def draw() -> tuple[int, ...]:
        d_in, n = g.int(3, 5), g.int(5, 8)
        return d_in, d_in + g.int(1, 3), n

    d_in, d_out, n = g.distinct(draw, 1)  # 1: the single token
    shapes: dict[str, tuple[int, ...]] = {m: (d_in, d_out) for m in ("W_query", "W_key", "W_value")}
    ctor = {"d_in": d_in, "d_out": d_out}
    return {
        "fwd": module(CLS, g, ctor, shapes, g.randn(n, d_in), grad_out=(n, d_out)),
        "single": module(CLS, g, ctor, shapes, g.randn(1, d_in), structure=True),
        "wide": module(CLS, g, {"d_in": d_in, "d_out": 16}, {m: (d_in, 16) for m in shapes}, g.randn(n, d_in)),
        "book": book(CLS, g, {"d_in": 3, "d_out": 2}, 123, JOURNEY,
                     [(m, (3, 2), "rand") for m in ("W_query", "W_key", "W_value")]),
    }


@check(STEP, STRUCTURE_CHECK)
def weight_parameters(r: Outcome) -> None:
    s = r.got("single", "structure")
    want = r.want("single", "structure")["params"]
    for name, shape in want.items():  # by role: the parameter may have another name (W_q, queries, ...)
        played = s["roles"].get(name, [])
        expect.true(bool(played) and all(owner != "Linear" for _n, owner, _t in played),
                    _("no parameter `{name}`: create it with nn.Parameter(torch.rand(d_in, d_out))").format(name=name))
        for mine, _owner, transposed in played:
            expect.true(transposed, _("`{name}` has shape {shape}, expected {want} = (d_in, d_out)").format(
                name=mine, shape=tuple(s["params"].get(mine, ())), want=tuple(shape)))


@check(STEP, N_("matches the reference with d_in ≠ d_out"))
def matches_reference(r: Outcome) -> None:
    expect.close(r.got("fwd"), r.want("fwd"), _("context vectors"), DIMS)


@check(STEP, N_("scaled by √d_k with a wide d_out = 16"))
def scaled_by_sqrt_d_k(r: Outcome) -> None:
    expect.close(r.got("wide"), r.want("wide"), _("context vectors (d_out = 16)"), DIMS)


@check(STEP, N_("a single token"))
def single_token(r: Outcome) -> None:
    expect.close(r.got("single"), r.want("single"), _("context vector of one token"), DIMS)


@check(STEP, N_("the book's example: torch.manual_seed(123), SelfAttention_v1(3, 2)"))
def book_example(r: Outcome) -> None:
    expect.close(r.got("book"), r.want("book"), _("sa_v1(inputs) (create W_query, W_key, W_value in that order)"), DIMS)


@check(STEP, N_("gradients reach W_query, W_key and W_value"))
def gradients(r: Outcome) -> None:
    grads_match(r, "fwd", "SelfAttention_v1")


# ---------------------------------------------------------------- diagnosis (grader.grading.diagnose)


@diagnosis(STEP)
def _diagnose(r: Outcome, kit: Any) -> list[str]:
    return kit.by_models(r, ["fwd", "single", "wide"], kit.CORE_MODELS,
                         lambda r, c, o: kit.attention(r, c, {**o, "mask": None}, linear=False))
