"""Step 11: MultiHeadAttention with weight splits, head_dim and out_proj."""

from __future__ import annotations

from typing import Any

import torch

from grader.checks import (
    JOURNEY,
    Case,
    Gen,
    Outcome,
    cases,
    check,
    describe_failure,
    diagnosis,
    expect,
    hints,
    mistakes,
)
from grader.checks.causal_attention import (
    PLACE_COPIES,
    PLACE_P,
    PLACE_TOKENS,
    dropout_placement,
    mask_not_cut,
    placed_on_the_weights,
    qkv_bias_cases,
)
from grader.checks.common import (
    QKV_BIAS_CHECK,
    book,
    book_linears,
    grads_match,
    linear_shapes,
    module,
    no_future,
    qkv_bias_added,
)
from grader.i18n import N_, _

STEP = "multihead_attention"

hints(
    STEP,
    N_(
        "Instead of num_heads separate modules, project once to d_out and split that into heads."
    ),
    N_(
        "§3.6.2: head_dim = d_out // num_heads (assert d_out % num_heads == 0). One nn.Linear each for "
        "query, key and value of size d_out, then view the last dim as (num_heads, head_dim) and move the "
        "head dim in front of num_tokens, so one batched matmul computes every head's attention scores. "
        "Apply the causal attention mask, softmax with √head_dim scaling, dropout, merge the heads back and "
        "finish with out_proj = nn.Linear(d_out, d_out)."
    ),
    N_(
        "x (b, num_tokens, d_in) -> W_key(x) (b, num_tokens, d_out) -> .view(b, num_tokens, num_heads, "
        "head_dim) -> .transpose(1, 2) (b, num_heads, num_tokens, head_dim), same for queries and values. "
        "attn_scores = queries @ keys.transpose(2, 3) -> (b, num_heads, num_tokens, num_tokens); "
        "masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf); softmax(attn_scores / "
        "keys.shape[-1]**0.5, dim=-1), dropout; (attn_weights @ values) (b, num_heads, num_tokens, "
        "head_dim) -> .transpose(1, 2) (b, num_tokens, num_heads, head_dim) -> .contiguous().view(b, "
        "num_tokens, d_out) -> self.out_proj(...) (b, num_tokens, d_out)."
    ),
)

CLS = "MultiHeadAttention"
DIMS = ("batch", "num_tokens", "d_out")
# where a structural cause is said once (grader.checks.structure)
STRUCTURE_CHECK = N_("W_query/W_key/W_value (d_in → d_out), out_proj (d_out → d_out), head_dim = d_out // num_heads")
REJECTIONS = ("AssertionError", "ValueError")  # what a constructor may raise for d_out % num_heads != 0


def _shapes(d_in: int, d_out: int) -> dict[str, tuple[int, ...]]:
    return linear_shapes("", d_in, d_out) | {"out_proj.weight": (d_out, d_out), "out_proj.bias": (d_out,)}


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    def draw() -> tuple[int, ...]:
        d_in, ctx, heads, head_dim = g.int(3, 5), g.int(9, 11), g.int(2, 3), g.int(2, 4)
        return d_in, ctx, heads, head_dim, heads * head_dim, ctx - 2  # ctx - 2: the short case's num_tokens

    # d_in, context_length, num_heads, head_dim, d_out and num_tokens pairwise distinct under every secret, and
    # none is the book's context_length 6
    d_in, ctx, heads, _head_dim, d_out, _short = g.distinct(draw, 6)
    ctor = {"d_in": d_in, "d_out": d_out, "context_length": ctx, "dropout": 0.0, "num_heads": heads}
    x = g.randn(2, ctx, d_in)
    perturbed = x.clone()
    perturbed[:, ctx // 2:] = g.randn(2, ctx - ctx // 2, d_in)
    c = {
        "fwd": module(CLS, g, ctor, _shapes(d_in, d_out), x, grad_out=(2, ctx, d_out)),
        "leak": module(CLS, g, ctor, _shapes(d_in, d_out), x, extra={"perturbed": perturbed}),
        "short": module(CLS, g, ctor, _shapes(d_in, d_out), g.randn(3, ctx - 2, d_in)),
        "one": module(CLS, g, {**ctor, "num_heads": 1}, _shapes(d_in, d_out), x),
        "indivisible": Case("construct", {}, {"cls": CLS, "ctor": {**ctor, "d_out": heads * 2 + 1}}, g.seed()),
        "book": book(CLS, g, {"d_in": 3, "d_out": 2, "context_length": 6, "dropout": 0.0, "num_heads": 2}, 123,
                     torch.stack((JOURNEY, JOURNEY), dim=0), book_linears(3, 2, out_proj=True)),
        # structure from the constructor alone, so a forward that crashes does not hide a right structure
        "structure": Case("construct", {}, {"cls": CLS, "ctor": ctor}, g.seed()),
        # with the grader's weights (none loaded): which parameters play W_query, ..., out_proj
        "roles": Case("construct", g.weights(_shapes(d_in, d_out)), {"cls": CLS, "ctor": ctor}, g.seed()),
    }
    # drawn after the cases above, so these draw what they drew before
    c |= qkv_bias_cases(g, CLS, c["fwd"], "", 1)
    c["eval_dropout"] = module(CLS, g, {**ctor, "dropout": 0.5}, _shapes(d_in, d_out), g.randn(2, ctx, d_in))
    return c | _placement(g)


# dropout's placement, seen exactly as in step 9 (causal_attention.placed_on_the_weights): x = I (d_in = num_tokens =
# context_length), PLACE_HEADS heads of head_dim 2 × num_tokens whose values are each [I | 2I] (W_value stacks I
# over 2I once per head), and an out_proj of weight I, so the output shows every head's attention weights [A | 2A]
# exactly; out_proj's bias is PLACE_SHIFT, not 0, so that dropout after out_proj (on its output, bias included) is
# told apart from dropout on the context vectors before it
PLACE_HEADS, PLACE_SHIFT = 2, 1.0


def _placement(g: Gen) -> dict[str, Case]:
    n, h = PLACE_TOKENS, PLACE_HEADS
    d_out = 2 * n * h
    ctor = {"d_in": n, "d_out": d_out, "context_length": n, "dropout": PLACE_P, "num_heads": h}
    eye = torch.eye(n)
    cases = {name: module(CLS, g, ctor, _shapes(n, d_out), eye.expand(copies, n, n).contiguous(), train=train)
             for name, copies, train in (("place_eval", 1, False), ("place", PLACE_COPIES, True))}
    for k in ("w.W_query.weight", "w.W_key.weight"):  # the same attention weights in both cases
        cases["place"].inputs[k] = cases["place_eval"].inputs[k]
    for case in cases.values():
        case.inputs["w.W_value.weight"] = torch.cat((eye, 2 * eye)).repeat(h, 1)  # (d_out, d_in): [I; 2I] per head
        case.inputs["w.out_proj.weight"] = torch.eye(d_out)
        case.inputs["w.out_proj.bias"] = torch.full((d_out,), PLACE_SHIFT)
    return cases


@check(STEP, STRUCTURE_CHECK)
def layer_shapes(r: Outcome) -> None:
    # by role, not by name (grader.worker.roles): a combined qkv, raw Parameters, per-head modules, in_proj_weight
    # and other names pass; the weights could not be matched otherwise, and the case says why
    s = r.got("roles", "structure")
    w = r.want("roles", "structure")
    for name, shape in w["params"].items():
        expect.true(name in s["roles"], _("parameter `{name}` is missing, expected {want}").format(
            name=name, want=tuple(shape)))
    want_dim = w["attrs"]["head_dim"]
    expect.true(s["attrs"].get("head_dim") == want_dim,
                _("self.head_dim is {got}, expected d_out // num_heads = {want}").format(
                    got=s["attrs"].get("head_dim"), want=want_dim))


@check(STEP, N_("rejects a d_out that num_heads does not divide"))
def rejects_indivisible_d_out(r: Outcome) -> None:
    # a valid d_out must be accepted first: a constructor that raises on everything rejects nothing in particular
    r.got("structure", "structure")
    res = r.learner["indivisible"]
    expect.true(res.status != "ok", _("MultiHeadAttention accepted d_out % num_heads != 0: "
                "assert d_out % num_heads == 0 in __init__"))
    # the book's `assert (d_out % num_heads == 0), "..."` (or a ValueError), not some other crash
    expect.true(res.status == "error" and res.exception in REJECTIONS, _(
        "MultiHeadAttention(d_out={d_out}, num_heads={num_heads}) must stop at `assert d_out % num_heads == 0` "
        "(an AssertionError, or a ValueError), not like this: {failure}").format(
        d_out=r.case_specs["indivisible"].params["ctor"]["d_out"],
        num_heads=r.case_specs["indivisible"].params["ctor"]["num_heads"], failure=describe_failure(res)))


@check(STEP, N_("matches the reference: split, transpose, merge heads, out_proj"))
def matches_reference(r: Outcome) -> None:
    expect.close(r.got("fwd"), r.want("fwd"), _("context vectors"), DIMS)


@check(STEP, N_("no token sees the future"))
def no_future_tokens(r: Outcome) -> None:
    no_future(r, "leak", r.inputs("leak")["x"].shape[1] // 2, _("context vectors"))


@check(STEP, N_("inputs shorter than context_length, and a single head"))
def shorter_inputs_single_head(r: Outcome) -> None:
    expect.close(r.got("short"), r.want("short"), _("context vectors for num_tokens < context_length"), DIMS)
    expect.close(r.got("one"), r.want("one"), _("context vectors with num_heads=1"), DIMS)


@check(STEP, N_("the book's example: torch.manual_seed(123), d_out=2, num_heads=2"))
def book_example(r: Outcome) -> None:
    expect.close(r.got("book"), r.want("book"), "mha(batch)", DIMS)


@check(STEP, N_("gradients reach every weight, out_proj included"))
def gradients(r: Outcome) -> None:
    grads_match(r, "fwd", "MultiHeadAttention")


@check(STEP, QKV_BIAS_CHECK)
def qkv_bias(r: Outcome) -> None:
    qkv_bias_added(r, "structure", "bias_ctor", "bias", N_(
        "qkv_bias=True gives your module no bias parameter (it has the same parameters as with qkv_bias=False): "
        "pass bias=qkv_bias to W_query, W_key and W_value"), N_(
        "qkv_bias=True adds {got} parameters, expected {want}: a bias of d_out for each of W_query, W_key and "
        "W_value, nothing else (out_proj keeps its bias either way)"), DIMS)


@check(STEP, N_("dropout on the attention weights: none in eval mode; in training, each weight dropped or scaled by "
                "1/(1−p), nothing dropped after out_proj"))
def dropout(r: Outcome) -> None:
    expect.close(r.got("eval_dropout"), r.want("eval_dropout"), _("eval-mode output with dropout=0.5"), DIMS)
    placed_on_the_weights(r, DIMS, heads=PLACE_HEADS, shift=PLACE_SHIFT)


# ---------------------------------------------------------------- diagnosis (grader.grading.diagnose)

mistakes(STEP, {
    "heads_merge_without_transpose": N_(
        'the heads are merged without transposing back: call .transpose(1, 2) before '
        '.contiguous().view(b, num_tokens, d_out), or tokens and heads get mixed up'),
})


@diagnosis(STEP)
def _diagnose(r: Outcome, kit: Any) -> list[str]:
    models = [*kit.CORE_MODELS, *kit.MASK_MODELS, ("heads_merge_without_transpose", {"merge": "no_transpose"})]
    found = kit.by_models(r, ["fwd", "short", "one", "leak"], models,
                          lambda r, c, o: kit.attention(r, c, o, linear=True, multi=True))
    return found + mask_not_cut(r) + dropout_placement(r, kit, PLACE_HEADS, PLACE_SHIFT)
