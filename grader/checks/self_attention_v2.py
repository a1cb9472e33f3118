"""Step 6: SelfAttention_v2 with nn.Linear layers and an optional bias."""

from __future__ import annotations

from typing import Any

from grader.checks import JOURNEY, Case, Gen, Outcome, cases, check, diagnosis, expect, hints
from grader.checks.common import book, book_linears, grads_match, linear_shapes, module
from grader.i18n import N_, _

STEP = "self_attention_v2"

hints(
    STEP,
    N_(
        "Same computation as SelfAttention_v1, but let nn.Linear hold the projection weights."
    ),
    N_(
        "§3.4.2: W_query, W_key, W_value are nn.Linear(d_in, d_out, bias=qkv_bias); call them on x instead "
        "of writing x @ W. nn.Linear has a better weight initialisation; the rest of forward is unchanged."
    ),
    N_(
        "x (num_tokens, d_in). keys = self.W_key(x), queries = self.W_query(x), values = self.W_value(x): "
        "each (num_tokens, d_out). attn_scores = queries @ keys.T -> (num_tokens, num_tokens); attn_weights "
        "= torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1); attn_weights @ values -> (num_tokens, "
        "d_out)."
    ),
)

CLS = "SelfAttention_v2"
DIMS = ("num_tokens", "d_out")
# where a structural cause is said once (grader.checks.structure)
STRUCTURE_CHECK = N_("W_query, W_key, W_value are nn.Linear(d_in, d_out), without bias by default")


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    def draw() -> tuple[int, ...]:
        d_in, n = g.int(3, 5), g.int(5, 8)
        return d_in, d_in + g.int(1, 3), n

    d_in, d_out, n = g.distinct(draw, 1)  # 1: the single token
    ctor = {"d_in": d_in, "d_out": d_out}
    return {
        "fwd": module(CLS, g, ctor, linear_shapes("", d_in, d_out), g.randn(n, d_in), grad_out=(n, d_out)),
        "bias": module(CLS, g, {**ctor, "qkv_bias": True}, linear_shapes("", d_in, d_out, bias=True),
                       g.randn(n, d_in), grad_out=(n, d_out)),
        "single": module(CLS, g, ctor, linear_shapes("", d_in, d_out), g.randn(1, d_in), structure=True),
        "book": book(CLS, g, {"d_in": 3, "d_out": 2}, 789, JOURNEY, book_linears(3, 2)),
    }


@check(STEP, STRUCTURE_CHECK)
def linear_layers(r: Outcome) -> None:
    s = r.got("single", "structure")
    for name in ("W_query", "W_key", "W_value"):  # by role: the layer may have another name, or be combined
        played = s["roles"].get(f"{name}.weight", [])
        other = next(((p, o) for p, o, _t in played if o != "Linear"), None)
        expect.true(bool(played), _("`{name}` is missing, expected nn.Linear(d_in, d_out)").format(name=name))
        # a raw nn.Parameter is owned by the module itself: say which of the learner's parameters plays the role
        expect.true(other is None, _("`{name}` is your parameter `{param}` (held by {owner}, not by an nn.Linear "
                                     "layer): this step builds the projections with nn.Linear(d_in, d_out)").format(
            name=name, param=other[0] if other else "", owner=other[1] if other else ""))
    extra = s["unused"]
    expect.true(not extra, _("unexpected parameters {names}: qkv_bias=False means bias=False").format(
        names=", ".join(extra)))


@check(STEP, N_("qkv_bias=True adds a bias to each layer"))
def qkv_bias(r: Outcome) -> None:
    grads_match(r, "bias", "SelfAttention_v2(qkv_bias=True)")
    expect.close(r.got("bias"), r.want("bias"), _("context vectors with bias"), DIMS)


@check(STEP, N_("matches the reference with d_in ≠ d_out"))
def matches_reference(r: Outcome) -> None:
    expect.close(r.got("fwd"), r.want("fwd"), _("context vectors"), DIMS)


@check(STEP, N_("a single token"))
def single_token(r: Outcome) -> None:
    expect.close(r.got("single"), r.want("single"), _("context vector of one token"), DIMS)


@check(STEP, N_("the book's example: torch.manual_seed(789), SelfAttention_v2(3, 2)"))
def book_example(r: Outcome) -> None:
    expect.close(r.got("book"), r.want("book"), _("sa_v2(inputs) (create W_query, W_key, W_value in that order)"), DIMS)


@check(STEP, N_("gradients reach every weight"))
def gradients(r: Outcome) -> None:
    grads_match(r, "fwd", "SelfAttention_v2")


# ---------------------------------------------------------------- diagnosis (grader.grading.diagnose)


@diagnosis(STEP)
def _diagnose(r: Outcome, kit: Any) -> list[str]:
    return kit.by_models(r, ["fwd", "bias", "single"], kit.CORE_MODELS,
                         lambda r, c, o: kit.attention(r, c, {**o, "mask": None}, linear=True))
