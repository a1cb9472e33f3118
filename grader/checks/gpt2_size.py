"""Step 14 (exercise 3.3): gpt2_attention(dropout=0.0) is a MultiHeadAttention of GPT-2 small's size.

MultiHeadAttention itself is the reference's (the step builds on step 11), so each case builds the module under the
case's seed and runs it on a short sequence: two builds per side (`default` runs the module `fwd` built, the same
call, and so does `moved`), no weights sent (2.4 million of them). The builds
draw their initial weights from a seeded table (grader/worker/fast_init.py), not one generator call per element:
a module built like the reference still gets the reference's weights, any other build other ones."""

from __future__ import annotations

from grader.checks import Case, Gen, Outcome, cases, check, expect, hints
from grader.checks.common import claimed, module, moves_with_the_module, n_params, no_future, shown_by
from grader.i18n import N_, _

STEP = "gpt2_size"

hints(
    STEP,
    N_(
        "Nothing new to write: build the MultiHeadAttention of step 11 with GPT-2 small's numbers."
    ),
    N_(
        "Exercise 3.3 (§3.6.2): the smallest GPT-2 has 12 attention heads, input and output embeddings of "
        "768 dimensions and a context length of 1024 tokens; keep qkv_bias=False and pass dropout on."
    ),
    N_(
        "return MultiHeadAttention(768, 768, 1024, dropout, num_heads=12): head_dim = 768 // 12 = 64; "
        "W_query, W_key, W_value and out_proj are 768 x 768 (out_proj with a bias): 2,360,064 parameters."
    ),
)

FN = "gpt2_attention"
DIMS = ("batch", "num_tokens", "d_out")
EMB = 768


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    n = g.int(5, 7)
    x = g.randn(1, n, EMB)
    perturbed = x.clone()
    perturbed[:, n // 2:] = g.randn(1, n - n // 2, EMB)
    fwd = module(FN, g, {}, {}, x, extra={"perturbed": perturbed}, structure=True)
    dropout = module(FN, g, {"dropout": 0.5}, {}, g.randn(1, n, EMB), train=True)
    # one token in training mode: its single attention weight is 1, which a default dropout > 0 would drop or
    # rescale; its output does not depend on how d_out is split into heads. It runs the module `fwd` built (the
    # same call, gpt2_attention()): two GPT-2-size builds per side instead of three, each case still judged alone
    default = module(FN, g, {}, {}, g.randn(2, 1, EMB), train=True)
    # fwd's module again, its 1024 × 1024 tensors narrowed to a sliding window first (common.moves_with_the_module;
    # one token, as in `default` after it, sees no difference)
    # window 1 or 2: the zygote makes both windows before it forks (grader.pool.preload)
    moved = module(FN, g, {}, {}, g.randn(1, n, EMB), window=g.int(1, 2), mask_size=1024)
    fwd.params["keep"] = moved.params["reuse"] = moved.params["keep"] = default.params["reuse"] = "gpt2_attention()"
    # `fwd`'s module is let go before `dropout` builds
    built = {"fwd": fwd, "moved": moved, "default": default, "dropout": dropout}
    for case in built.values():  # seeded weights from a table, on both sides (grader/worker/fast_init.py)
        case.params["fast_init"] = True
    return built


@check(STEP, N_("GPT-2 small's size: 12 heads of head_dim 64, d_in = d_out = 768, 2,360,064 parameters "
                "(qkv_bias=False)"))
def gpt2_small_size(r: Outcome) -> None:
    w = r.want("fwd", "structure")
    # qkv_bias=True, said as such even before any output is right (a claim read only to word this failure): every
    # parameter of the reference's there, and exactly 3 × d_out more, the query, key and value biases
    mine = claimed(r, "fwd", "structure")
    got_n, want_n = n_params(mine), n_params(w)
    if got_n is not None and want_n is not None and got_n - want_n == 3 * w["attrs"]["d_out"] and all(
            mine["params"].get(name) == shape for name, shape in w["params"].items()):
        raise expect.Failed(_("{n} parameters, expected {want}: the {extra} more are the query, key and value "
                              "biases, so qkv_bias should stay False").format(
            n=f"{got_n:,}", want=f"{want_n:,}", extra=f"{got_n - want_n:,}"))
    s = r.got("fwd", "structure")
    for attr in ("num_heads", "head_dim", "d_out"):
        expect.true(s["attrs"].get(attr) == w["attrs"][attr], _("{attr} is {got}, expected {want}").format(
            attr=attr, got=s["attrs"].get(attr), want=w["attrs"][attr]))
    for name, shape in w["params"].items():
        got = s["params"].get(name)
        expect.true(got == shape, _("parameter `{name}` is {got}, expected {want}").format(
            name=name, got=tuple(got) if got else None, want=tuple(shape)))
    expect.true(n_params(s) == want_n, _("{n} parameters, expected {want} (is qkv_bias False?)").format(
        n=f"{n_params(s):,}", want=f"{want_n:,}"))
    shown_by(r, "fwd", _("GPT-2 small's size"), DIMS)  # the facts above are what the module says of itself


@check(STEP, N_("causal, with context_length 1024: a 1024 × 1024 mask, no token sees the future"))
def causal_1024_context(r: Outcome) -> None:
    want = [shape for shape, _dtype in r.want("fwd", "structure")["buffers"].values()]
    got = [shape for shape, _dtype in r.got("fwd", "structure")["buffers"].values()]
    expect.true(any(shape in got for shape in want), _("mask buffers {got}, expected one of shape (1024, 1024) = "
                "(context_length, context_length)").format(got=", ".join(str(tuple(s)) for s in got) or "—"))
    moves_with_the_module(r, "fwd", "moved", DIMS)
    no_future(r, "fwd", r.inputs("fwd")["x"].shape[1] // 2, _("context vectors"))


@check(STEP, N_("matches the reference on a short sequence: (1, num_tokens, 768)"))
def matches_reference(r: Outcome) -> None:
    expect.close(r.got("fwd"), r.want("fwd"), _("context vectors"), DIMS)


@check(STEP, N_("dropout is passed on (training mode, dropout = 0.5)"))
def dropout_passed_on(r: Outcome) -> None:
    expect.close(r.got("dropout"), r.want("dropout"), _("context vectors in training mode with dropout = 0.5"),
                 DIMS)


@check(STEP, N_("dropout = 0.0 by default: gpt2_attention() drops nothing in training mode"))
def no_dropout_by_default(r: Outcome) -> None:
    expect.close(r.got("default"), r.want("default"), _("gpt2_attention() on one token in training mode"), DIMS)
