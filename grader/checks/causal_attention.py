"""Step 9: CausalAttention(d_in, d_out, context_length, dropout, qkv_bias=False), batched."""

from __future__ import annotations

from typing import Any

import torch

from grader.checks import JOURNEY, Case, Gen, Outcome, cases, check, diagnosis, expect, hints, mistakes
from grader.checks.common import (
    DROPOUT_COPIES,
    QKV_BIAS_CHECK,
    book,
    book_linears,
    dropout_mean_close,
    grads_match,
    linear_shapes,
    module,
    moves_with_the_module,
    no_future,
    qkv_bias_added,
)
from grader.i18n import N_, _

STEP = "causal_attention"

hints(
    STEP,
    N_(
        "Put SelfAttention_v2, the causal attention mask and dropout together in one class that takes a "
        "batch."
    ),
    N_(
        "§3.5.3: three nn.Linear(d_in, d_out, bias=qkv_bias), an nn.Dropout(dropout), and the mask "
        "torch.triu(torch.ones(context_length, context_length), diagonal=1) saved with register_buffer. In "
        "forward the input is batched, so transpose the last two dims of keys (not .T), and cut the mask to "
        "the actual num_tokens."
    ),
    N_(
        "x (b, num_tokens, d_in); b, num_tokens, d_in = x.shape. keys/queries/values = self.W_key(x) etc.: "
        "(b, num_tokens, d_out). attn_scores = queries @ keys.transpose(1, 2): (b, num_tokens, d_out) @ (b, "
        "d_out, num_tokens) -> (b, num_tokens, num_tokens). "
        "attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf); attn_weights = "
        "self.dropout(torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)); context_vec = attn_weights "
        "@ values -> (b, num_tokens, d_out)."
    ),
)

CLS = "CausalAttention"
DIMS = ("batch", "num_tokens", "d_out")


def plan(g: Gen, cls: str, prefix: str, extra_ctor: dict, n_heads: int = 1, single_head_only: bool = True
         ) -> dict[str, Case]:
    """Cases shared with the multi-head wrapper (step 10)."""
    def draw() -> tuple[int, ...]:
        d_in, ctx = g.int(3, 5), g.int(7, 11)  # more tokens than the book's 6
        return d_in, d_in + g.int(1, 2), ctx, g.int(2, 5)  # the short case's num_tokens: fewer than the book's 6

    # the wrapper's num_heads and the book's context_length 6 too: no two sizes coincide under any secret
    d_in, d_out, ctx, short = g.distinct(draw, 6, *({n_heads} if n_heads > 1 else set()))
    out = d_out * n_heads
    ctor = {"d_in": d_in, "d_out": d_out, "context_length": ctx, "dropout": 0.0, **extra_ctor}
    shapes: dict[str, tuple[int, ...]] = {}
    for h in range(n_heads):
        shapes |= linear_shapes(prefix.format(h=h), d_in, d_out)
    x = g.randn(2, ctx, d_in)
    cut = ctx // 2
    perturbed = x.clone()
    perturbed[:, cut:] = g.randn(2, ctx - cut, d_in)
    cases = {
        "fwd": module(cls, g, ctor, shapes, x, grad_out=(2, ctx, out), structure=True),
        "short": module(cls, g, ctor, shapes, g.randn(3, short, d_in), structure=True),
        "leak": module(cls, g, ctor, shapes, x, extra={"perturbed": perturbed}),
        "eval_dropout": module(cls, g, {**ctor, "dropout": 0.5}, shapes, x),
    }
    if not single_head_only:  # the wrapper's heads are the reference's: masking and dropout are tested in step 9
        del cases["leak"], cases["eval_dropout"]
    else:  # the mask's buffer shown by behaviour, not by a name the module reports (common.moves_with_the_module)
        cases["moved"] = module(cls, g, ctor, shapes, g.randn(2, ctx, d_in), window=g.int(1, 2), mask_size=ctx)
    return cases


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    c = plan(g, CLS, "", {})
    shapes = linear_shapes("", 3, 2)
    shapes["W_value.weight"] = (2, 3)
    drop = module(CLS, g, {"d_in": 3, "d_out": 2, "context_length": 4, "dropout": 0.5}, shapes, g.randn(1, 4, 3))
    drop.probe, drop.params = "dropout_average", {"cls": CLS, "ctor": drop.params["ctor"], "copies": DROPOUT_COPIES}
    drop.inputs["w.W_value.weight"] = drop.inputs["w.W_value.weight"] * 6  # outputs well away from 0
    c["dropout"] = drop
    c |= _placement(g)
    c["book"] = book(CLS, g, {"d_in": 3, "d_out": 2, "context_length": 6, "dropout": 0.0}, 123,
                     torch.stack((JOURNEY, JOURNEY), dim=0), book_linears(3, 2))  # (2, 6, 3)
    return c | qkv_bias_cases(g, CLS, c["fwd"], "", 1)


def qkv_bias_cases(g: Gen, cls: str, fwd: Case, prefix: str, n_heads: int) -> dict[str, Case]:
    """qkv_bias=True (the constructor's last argument, positional as the book passes it) on `fwd`'s sizes: the
    constructor alone (`bias_ctor`: the parameters it creates) and a forward with the grader's biases among the
    weights (`bias`; the wrapper's heads are stand-ins that create biases when they are given qkv_bias=True).
    Drawn after every other case, so those draw what they drew before."""
    ctor = {**fwd.params["ctor"], "qkv_bias": True}
    shapes: dict[str, tuple[int, ...]] = {}
    for h in range(n_heads):
        shapes |= linear_shapes(prefix.format(h=h), ctor["d_in"], ctor["d_out"], bias=True)
    shapes |= {k: v for k, v in ((n.removeprefix("w."), tuple(t.shape)) for n, t in fwd.inputs.items()
                                 if n.startswith("w.out_proj."))}  # MultiHeadAttention's out_proj, as in fwd
    x = g.randn(*fwd.inputs["x"].shape)
    return {"bias_ctor": Case("construct", {}, {"cls": cls, "ctor": ctor}, g.seed()),
            "bias": module(cls, g, ctor, shapes, x)}


# dropout's placement, seen exactly: the inputs are the identity (x = I, d_in = num_tokens) and W_value stacks I over
# 2I, so the values are [I | 2I] and the context vectors are [A | 2A], A the attention weights: in training mode each
# weight must be dropped (0) or kept and scaled by 1/(1−p), and its two copies together; dropout on the scores,
# the values or the context vectors breaks one of the two, under every secret (the sizes are fixed)
PLACE_TOKENS, PLACE_COPIES, PLACE_P = 4, 32, 0.5


def _placement(g: Gen) -> dict[str, Case]:
    n = PLACE_TOKENS
    ctor = {"d_in": n, "d_out": 2 * n, "context_length": n, "dropout": PLACE_P}  # a mask not cut costs another point
    weights = linear_shapes("", n, 2 * n)
    eye = torch.eye(n)
    cases = {name: module(CLS, g, ctor, weights, eye.expand(copies, n, n).contiguous(), train=train)
             for name, copies, train in (("place_eval", 1, False), ("place", PLACE_COPIES, True))}
    for k in ("w.W_query.weight", "w.W_key.weight"):  # the same attention weights in both cases
        cases["place"].inputs[k] = cases["place_eval"].inputs[k]
    for case in cases.values():
        case.inputs["w.W_value.weight"] = torch.cat((eye, 2 * eye))
    return cases


def placed_on_the_weights(r: Outcome, dims: tuple[str, ...] = DIMS, heads: int = 1, shift: float = 0.0) -> None:
    """Training mode with x = I: every attention weight dropped or kept × 1/(1−p), both of its copies alike.
    MultiHeadAttention (step 11): `heads` heads of head_dim 2 × num_tokens, each head's values [I | 2I], seen
    through an out_proj of weight I and bias `shift` (not 0, so dropout after out_proj shows as such)."""
    n = PLACE_TOKENS
    ev = expect.tensor(r.got("place_eval"), _("eval output"))
    expect.close(ev, r.want("place_eval"), _("eval-mode output with dropout=0.5"), dims)
    tr = expect.tensor(r.got("place"), _("training output"))
    expect.shape(tr, r.want("place").shape, _("training output"), dims)
    ev64, tr64 = ev.to(torch.float64), tr.to(torch.float64)
    if shift:  # out_proj's output dropped: each entry of it 0 or × 1/(1−p) on its own, out_proj's bias with it
        scaled = ev64 / (1 - PLACE_P)
        after = ((tr64 - scaled).abs() <= 1e-5 + 1e-4 * scaled.abs()) | (tr64.abs() <= 1e-5)
        expect.true(not bool(after.all()) or bool((tr64 == 0).sum() == 0), _(
            "dropout is applied after out_proj: its output is dropped entry by entry, out_proj's bias with it; "
            "apply self.dropout to attn_weights, after the softmax and before multiplying by the values"))
    split = (*tr64.shape[:-1], heads, 2, n)  # (copies, num_tokens, heads, [I | 2I] copy, num_tokens)
    w = (ev64[0] - shift).reshape(n, heads, 2, n)[..., 0, :]  # the learner's own attention weights, per head
    a, b = ((tr64 - shift).reshape(split)[..., i, :] / (i + 1) for i in (0, 1))
    tol = 1e-5 + 1e-4 * w.abs()

    def pattern(scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Per copy of each weight: kept (× scale) or dropped (0)."""
        kept = ((a - w * scale).abs() <= tol) & ((b - w * scale).abs() <= tol)
        return kept, (a.abs() <= tol) & (b.abs() <= tol)

    kept, dropped = pattern(1 / (1 - PLACE_P))
    expect.true(not bool(pattern(1.0)[0].all()), _("training mode with dropout=0.5 gave the eval output: "
                "is self.dropout applied to the attention weights?"))
    kept1, dropped1 = pattern(1.0)
    expect.true(not bool((kept1 | dropped1).all()), _(
        "dropout does not rescale the kept attention weights: they must be multiplied by 1/(1−p)"))
    one_a = ((a - w / (1 - PLACE_P)).abs() <= tol) | (a.abs() <= tol)
    one_b = ((b - w / (1 - PLACE_P)).abs() <= tol) | (b.abs() <= tol)
    expect.true(bool((one_a & one_b).all()), _(
        "in training mode the attention weights must each be dropped (0) or kept and scaled by 1/(1−p); "
        "yours are changed otherwise: apply dropout to the attention weights, after the softmax (not to the "
        "scores before it)"))
    expect.true(bool((kept | dropped).all()), _(
        "dropout acts on something other than the attention weights (the values or the context vectors): apply "
        "self.dropout to attn_weights, after the softmax and before multiplying by the values"))
    # the share dropped, among weights the mask left non-zero: only a real dropout shows it (Bernoulli(p) over
    # 32 copies of 10 weights: 0.5 ± 0.03, so [p − 0.2, p + 0.2] is about 7 standard deviations wide)
    live = (w.abs() > 1e-3).expand_as(dropped)
    share = float(dropped[live].to(torch.float64).mean())
    expect.true(abs(share - PLACE_P) <= 0.2, _(
        "in training mode dropout={p} should drop about {want:.0%} of the attention weights; {got:.0%} of yours "
        "were dropped: use nn.Dropout(dropout) on attn_weights").format(p=PLACE_P, want=PLACE_P, got=share))


@check(STEP, N_("matches the reference on a batch of 2 with d_in ≠ d_out"))
def matches_reference(r: Outcome) -> None:
    expect.close(r.got("fwd"), r.want("fwd"), _("context vectors"), DIMS)


@check(STEP, N_("no token sees the future"))
def no_future_tokens(r: Outcome) -> None:
    no_future(r, "leak", r.inputs("leak")["x"].shape[1] // 2, _("context vectors"))


@check(STEP, N_("the mask is a registered buffer of shape (context_length, context_length)"))
def mask_is_buffer(r: Outcome) -> None:
    buffers = r.got("fwd", "structure")["buffers"]
    ctx = r.inputs("fwd")["x"].shape[1]
    ok = [n for n, (shape, _dtype) in buffers.items() if shape == [ctx, ctx]]
    expect.true(bool(ok), _("no (context_length, context_length) buffer: keep the mask with "
                "self.register_buffer('mask', ...) so it moves with the module and is saved with it"))
    moves_with_the_module(r, "fwd", "moved", DIMS)


@check(STEP, N_("inputs shorter than context_length (mask cut to num_tokens)"))
def mask_cut_to_num_tokens(r: Outcome) -> None:
    expect.close(r.got("short"), r.want("short"), _("context vectors for num_tokens < context_length"), DIMS)


@check(STEP, N_("the book's example: torch.manual_seed(123), CausalAttention(3, 2, 6, 0.0)"))
def book_example(r: Outcome) -> None:
    expect.close(r.got("book"), r.want("book"), "ca(batch)", DIMS)


@check(STEP, N_("gradients reach every weight"))
def gradients(r: Outcome) -> None:
    grads_match(r, "fwd", "CausalAttention")


@check(STEP, N_("dropout: none in eval mode, mean preserved (1/(1−p)) in training"))
def dropout(r: Outcome) -> None:
    expect.close(r.got("eval_dropout"), r.want("eval_dropout"), _("eval-mode output with dropout=0.5"), DIMS)
    ev = expect.tensor(r.got("dropout", "eval"), _("eval output"))
    mean = expect.tensor(r.got("dropout", "mean"), _("training output"))
    sample = expect.tensor(r.got("dropout", "sample"), _("training output"))
    spread = r.want("dropout", "std")
    # shapes before any arithmetic on two of the learner's tensors: allclose would broadcast them
    expect.shape(ev, spread.shape, _("eval output"), DIMS)
    expect.shape(sample, r.want("dropout", "sample").shape, _("training output"), DIMS)
    expect.true(not torch.allclose(sample[0], ev[0]), _("training mode with dropout=0.5 gave the eval output: "
                "is self.dropout applied to the attention weights?"))
    placed_on_the_weights(r)
    expect.shape(mean, spread.shape, _("mean training output"), DIMS)
    copies = int(r.case_specs["dropout"].params["copies"])
    expect.true(dropout_mean_close(mean, ev, spread, copies),
                _("averaged over {n} dropout draws the output should equal the eval output; it does not "
                  "(dropout must rescale the kept weights by 1/(1−p))").format(n=copies))


@check(STEP, QKV_BIAS_CHECK)
def qkv_bias(r: Outcome) -> None:
    qkv_bias_added(r, "fwd", "bias_ctor", "bias",
                   N_("qkv_bias=True gives your module no bias parameter (it has the same parameters as with "
                      "qkv_bias=False): pass bias=qkv_bias to W_query, W_key and W_value"),
                   N_("qkv_bias=True adds {got} parameters, expected {want}: a bias of d_out for each of W_query, "
                      "W_key and W_value, nothing else"), DIMS)


# ---------------------------------------------------------------- diagnosis (grader.grading.diagnose)

mistakes(STEP, {
    "mask_not_cut": N_(
        "the (context_length, context_length) mask is not cut to the input's length: inputs shorter "
        'than context_length fail; use self.mask.bool()[:num_tokens, :num_tokens]'),
    "dropout_on_scores": N_(
        'dropout is applied to the attention scores, before the softmax: apply self.dropout to attn_weights, '
        'after the softmax and before multiplying by the values'),
    "dropout_on_values": N_(
        'dropout is applied to the values, so a dropped value is lost to every query at once: apply '
        'self.dropout to attn_weights, after the softmax and before multiplying by the values'),
    "dropout_on_context": N_(
        'dropout is applied to the context vectors (after attn_weights @ values): apply self.dropout to '
        'attn_weights, after the softmax and before multiplying by the values'),
    "dropout_after_out_proj": N_(
        'dropout is applied after out_proj, to the module\'s output: apply self.dropout to attn_weights, after '
        'the softmax and before multiplying by the values'),
})


def mask_not_cut(r: Outcome, short: str = "short", full: str = "fwd") -> list[str]:
    """A mask not cut to num_tokens: fine at context_length, a size error on shorter inputs."""
    res, ok = r.learner.get(short), r.learner.get(full)
    if res is None or ok is None or ok.status != "ok" or res.status != "error":
        return []
    text = f"{res.exception} {res.message}".lower()
    if res.exception == "RuntimeError" and any(w in text for w in ("size", "shape", "match", "broadcast")):
        return ["mask_not_cut"]
    return []


@diagnosis(STEP)
def _diagnose(r: Outcome, kit: Any) -> list[str]:
    found = kit.by_models(r, ["fwd", "short", "leak", "eval_dropout"], kit.CORE_MODELS + kit.MASK_MODELS,
                          lambda r, c, o: kit.attention(r, c, o, linear=True))
    found += mask_not_cut(r)
    # dropout=0.5 in eval mode: the learner's output differs although dropout=0.0 is right
    if kit.close(kit.got(r, "fwd"), kit.want(r, "fwd")) and isinstance(kit.got(r, "eval_dropout"), torch.Tensor) \
            and not kit.close(kit.got(r, "eval_dropout"), kit.want(r, "eval_dropout")):
        found.append("dropout_in_eval")
    # training mode, averaged over many draws: without 1/(1−p) the mean shrinks by (1−p)
    ev, mean, spread = kit.got(r, "dropout", "eval"), kit.got(r, "dropout", "mean"), kit.want(r, "dropout", "std")
    spec = r.case_specs.get("dropout")
    p = float(spec.params.get("ctor", {}).get("dropout", 0.0)) if spec else 0.0
    if isinstance(ev, torch.Tensor) and isinstance(mean, torch.Tensor) and isinstance(spread, torch.Tensor) \
            and ev.shape == mean.shape == spread.shape and spec and 0 < p < 1 and "dropout_in_eval" not in found:
        copies = int(spec.params["copies"])

        def near(factor: float) -> bool:  # the draws of a mean scaled by `factor` spread `factor` times as much
            return dropout_mean_close(mean, factor * ev, factor * spread, copies)

        if not near(1.0):
            if near(1 - p):
                found.append("dropout_no_rescale")
            elif near((1 - p) ** 2):
                found.append("dropout_rescale_wrong")
    return found + dropout_placement(r, kit)


def dropout_placement(r: Outcome, kit: Any, heads: int = 1, shift: float = 0.0) -> list[str]:
    """Where dropout acts, from the exact placement cases (placed_on_the_weights: x = I, each head's values
    [I | 2I], out_proj of weight I and bias `shift` in step 11), once the eval output is right. Per attention weight
    w[i, j] the training output holds two copies a (× 1) and b (× 2): dropout on the weights drops or scales both
    together; on the context vectors each copy alone; on the values each copy alone but for every query i at once
    (one value row serves them all); after out_proj each output entry alone, bias included; on the scores the rows
    still sum to 1 but are not dropped-or-scaled weights."""
    ev, tr, want = kit.got(r, "place_eval"), kit.got(r, "place"), kit.want(r, "place_eval")
    if not isinstance(tr, torch.Tensor) or not kit.close(ev, want) or tr.dim() != 3 or tr.shape[1:] != ev.shape[1:]:
        return []
    n, p = PLACE_TOKENS, PLACE_P
    ev64, tr64 = ev.to(torch.float64), tr.to(torch.float64)

    def zero_or_scaled(t: torch.Tensor, base: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tol = 1e-5 + 1e-4 * base.abs()
        return (t - base / (1 - p)).abs() <= tol, t.abs() <= tol

    if shift:
        kept, dropped = zero_or_scaled(tr64, ev64)
        if bool((kept | dropped).all()) and bool((dropped & (ev64.abs() > 1e-3)).any()):
            return ["dropout_after_out_proj"]
    w = (ev64[0] - shift).reshape(n, heads, 2, n)[..., 0, :]  # (query i, head, key j): the eval weights
    a, b = ((tr64 - shift).reshape(-1, n, heads, 2, n)[..., i, :] / (i + 1) for i in (0, 1))
    (ka, da), (kb, db) = zero_or_scaled(a, w), zero_or_scaled(b, w)
    live = (w.abs() > 1e-3).expand_as(a)
    if bool((ka | da).all()) and bool((kb | db).all()):
        da, db = da & live, db & live
        if torch.equal(da, db):  # dropped together, or nothing dropped: not a misplaced dropout
            return []

        def per_key(d: torch.Tensor) -> bool:  # each (copy, head, key j): dropped for every live query or none
            return not bool((d.any(dim=1) & (~d & live).any(dim=1)).any())

        return ["dropout_on_values" if per_key(da) and per_key(db) else "dropout_on_context"]
    # softmax rows (summing to 1, or NaN where a dropped −inf became −inf × 0), the same in both copies
    sums = a.sum(dim=-1)
    rows = torch.isfinite(sums)
    if bool(rows.any()) and torch.allclose(a, b, atol=1e-5, rtol=1e-4, equal_nan=True) \
            and torch.allclose(sums[rows], torch.ones_like(sums[rows]), atol=1e-4) \
            and not torch.allclose(a, w.expand_as(a), atol=1e-5, rtol=1e-4):
        return ["dropout_on_scores"]
    return []
