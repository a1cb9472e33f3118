"""Helpers shared by the step modules: building cases and the checks several steps repeat."""

from __future__ import annotations

import math
from math import prod
from typing import Any

import torch

from grader.checks import Case, Failed, Gen, Outcome, Waiting, describe_failure, expect
from grader.i18n import N_, _
from grader.worker import probes


def call(fn: str, g: Gen, consts: list[Any] | None = None, grad_out: tuple[int, ...] | None = None,
         repeat: int = 1, **inputs: torch.Tensor) -> Case:
    """A case calling fn(*inputs in keyword order, *consts); with grad_out, also backward."""
    params = {"fn": fn, "args": list(inputs), "consts": consts or [], "grad": grad_out is not None,
              "repeat": repeat}
    extra = {"grad_out": g.randn(*grad_out)} if grad_out is not None else {}
    return Case("call", {**inputs, **extra}, params, seed=g.seed())


DROPOUT_COPIES = 1000
DROPOUT_Z = 6.0  # a right dropout fails this bound with probability ~1e-8 per entry


def dropout_mean_close(mean: torch.Tensor, target: torch.Tensor, std: torch.Tensor, copies: int) -> bool:
    """Is the mean of `copies` dropout draws `target`, within DROPOUT_Z standard errors? `std` is the spread of
    the reference's own draws (trusted), so the bound is as tight as the sample size allows and no looser.
    Tensors of different shapes are not close (never broadcast against each other)."""
    if not tuple(mean.shape) == tuple(target.shape) == tuple(std.shape):
        return False
    tol = DROPOUT_Z * std / copies**0.5 + 1e-4 * (1 + target.abs())
    return bool(((mean - target).abs() <= tol).all())


def linear_shapes(prefix: str, d_in: int, d_out: int, bias: bool = False) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for m in ("W_query", "W_key", "W_value"):
        shapes[f"{prefix}{m}.weight"] = (d_out, d_in)
        if bias:
            shapes[f"{prefix}{m}.bias"] = (d_out,)
    return shapes


def module(cls: str, g: Gen, ctor: dict[str, Any], shapes: dict[str, tuple[int, ...]], x: torch.Tensor,
           grad_out: tuple[int, ...] | None = None, train: bool = False,
           extra: dict[str, torch.Tensor] | None = None, structure: bool = False, window: int = 0,
           mask_size: int = 0) -> Case:
    """A case building cls(**ctor), loading seeded weights, running it on x (and extra inputs);
    with grad_out (the expected output shape), also backward; with structure, also the module's
    structure facts (parameters, buffers, children), for the cases whose checks read them; with window, the
    module's (mask_size, mask_size) tensors narrowed to a sliding window first (see `moves_with_the_module`)."""
    inputs = {**g.weights(shapes), "x": x, **(extra or {})}
    if grad_out is not None:
        inputs["grad_out"] = g.randn(*grad_out)
    params = {"cls": cls, "ctor": ctor, "grad": grad_out is not None, "train": train, "extra_x": list(extra or {}),
              "structure": structure}
    if window:
        params |= {"window": window, "mask_size": mask_size}
    return Case("module", inputs, params, seed=g.seed())


SHOWN_BY_OUTPUTS = N_("{what} is judged by what forward computes, and its context vectors do not match the "
                      "reference yet: this point follows once they do")


def shown_by(r: Outcome, case: str, what: str, dims: tuple[str, ...]) -> None:
    """The property a check reads from `case`'s facts (names, sizes, how many distinct parameters) decides that
    case's outputs, so those must be right before the facts are believed: a module can report anything, and the
    weaker rule (some output of the same class right, Outcome._vouch) lets a wrong module claim a property through
    a case the property does not touch (one head, one token)."""
    try:
        expect.close(r.got(case), r.want(case), _("context vectors"), dims)
    except Failed:
        raise Waiting(_(SHOWN_BY_OUTPUTS).format(what=what)) from None


def moves_with_the_module(r: Outcome, plain: str, moved: str, dims: tuple[str, ...]) -> None:
    """The mask is a buffer, shown by behaviour: case `moved` builds the module of case `plain` and, before it
    runs, narrows its (context_length, context_length) tensors to a sliding window with `_apply` (what .to() and
    .cuda() use; grader.worker.probes._windowed); its output must be the reference's so changed. A plain attribute,
    or a mask made anew in forward, does not move. Buffer names are facts the module reports, which a submission
    can forge; this output it cannot give without computing it. Judged only once `plain` is right (a wrong
    forward's moved output proves nothing): the point is not earned before."""
    shown_by(r, plain, _("the mask buffer"), dims)
    try:
        expect.close(r.got(moved), r.want(moved), _("context vectors"), dims)
    except Failed:
        raise Failed(_("the mask does not move with the module: module.to(...) or .cuda() changed every buffer "
                       "but forward did not see it. Register the mask with self.register_buffer('mask', ...) "
                       "and use self.mask in forward (not a plain attribute, not a mask made anew in forward)")
                     ) from None


def book(cls: str, g: Gen, ctor: dict[str, Any], seed: int, x: torch.Tensor,
         layers: list[tuple[str, tuple[int, ...], str]] | None = None) -> Case:
    """The chapter's printed example: built under torch.manual_seed(seed), then given the initial weights the book's
    own layers draw under that seed (`layers`, see `book_weights`), loaded by role like every module case's: a module
    that creates its parameters in another order, or draws them its own way (the bonus einsum variant), computes
    the printed values when its computation is right."""
    inputs = {"x": x, **(book_weights(seed, layers) if layers else {})}
    return Case("book_example", inputs, {"cls": cls, "ctor": ctor, "seed": seed}, seed=g.seed())


def book_weights(seed: int, layers: list[tuple[str, tuple[int, ...], str]]) -> dict[str, torch.Tensor]:
    """What the book's layers draw under torch.manual_seed(seed), in the book's order, from a private generator
    (the same stream): `(name, shape, kind)`, kind "rand" for nn.Parameter(torch.rand(*shape)) (SelfAttention_v1),
    "linear" for nn.Linear's weight (shape (d_out, d_in); kaiming_uniform_ with a = √5), "linear_bias" for its weight
    and then its bias. Public values (the book prints what they give), never a reference output."""
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, torch.Tensor] = {}
    for name, shape, kind in layers:
        if kind == "rand":
            out[f"w.{name}"] = torch.rand(*shape, generator=gen)
            continue
        fan_in = shape[1]
        bound = math.sqrt(3.0) * (math.sqrt(2.0 / (1 + 5)) / math.sqrt(fan_in))  # torch.nn.init.kaiming_uniform_
        out[f"w.{name}.weight"] = torch.empty(*shape).uniform_(-bound, bound, generator=gen)
        if kind == "linear_bias":
            b = 1 / math.sqrt(fan_in)  # nn.Linear.reset_parameters
            out[f"w.{name}.bias"] = torch.empty(shape[0]).uniform_(-b, b, generator=gen)
    return out


def book_linears(d_in: int, d_out: int, out_proj: bool = False) -> list[tuple[str, tuple[int, ...], str]]:
    """The book's W_query, W_key, W_value (nn.Linear, qkv_bias=False), then out_proj (with its bias) if asked."""
    layers: list[tuple[str, tuple[int, ...], str]] = [(name, (d_out, d_in), "linear")
                                                      for name in ("W_query", "W_key", "W_value")]
    return layers + ([("out_proj", (d_out, d_out), "linear_bias")] if out_proj else [])


def grads_match(r: Outcome, case: str, what: str) -> None:
    """Every parameter's gradient equals the reference's (so gradients reach every weight)."""
    want = r.want(case, "grads")
    got = r.got(case, "grads")
    # an output of the wrong shape gets no upstream gradient at all: say the shape, not "detached"
    expect.shape(expect.tensor(r.got(case), what), r.want(case).shape, what)
    missing = [n for n in want if not got.get(n)]
    expect.true(not missing, _("no gradient reaches {names}: is something detached, or unused?").format(
        names=", ".join(missing)))
    for n in want:
        expect.close(r.got(case, f"grad.{n}"), r.want(case, f"grad.{n}"),
                     _("{what}: gradient of {name}").format(what=what, name=n))


def no_future(r: Outcome, case: str, cut: int, what: str) -> None:
    """Outputs before position `cut` must not change when tokens from `cut` on are changed."""
    a = expect.tensor(r.got(case, "out"), what)
    b = expect.tensor(r.got(case, "out1"), what)
    if a.dim() < 2:  # no (batch, num_tokens, …) to cut: say so by the expected shape
        expect.shape(a, r.want(case).shape, what)
    expect.shape(b, a.shape, what)
    changed = ~torch.isclose(a[:, :cut], b[:, :cut], atol=1e-6, rtol=1e-5)
    if changed.any():
        pos = int(torch.nonzero(changed)[0][1])
        raise expect.Failed(_("{what}: output at position {pos} changed when tokens {cut}.. changed: "
                              "a token can see the future (is the causal mask applied before the softmax?)").format(
            what=what, pos=pos, cut=cut))


def claimed(r: Outcome, case: str, key: str) -> Any:
    """A fact the learner's code reports for `case`, read without vouching (Outcome._vouch) and so only to word a
    failure, never to pass one: a forged fact then buys another wording of the same failure. None when the case
    did not run or holds no such fact."""
    res = r.learner.get(case)
    return res.facts.get(key) if res is not None and res.status == "ok" else None


def n_params(structure: Any) -> int | None:
    """How many numbers a module's parameters hold (its structure fact), None for an odd fact."""
    try:
        return sum(prod(int(d) for d in shape) for shape in structure["params"].values())
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


QKV_BIAS_CHECK = N_("qkv_bias=True adds a bias to W_query, W_key and W_value")
NO_QKV_BIAS_PARAM = N_("the constructor takes no qkv_bias: add qkv_bias=False as its last parameter, as the book "
                       "does (`{call}` raised {exception}: {message})")


def qkv_bias_added(r: Outcome, plain: str, built: str, case: str, no_bias: str, count: str,
                   dims: tuple[str, ...]) -> None:
    """The constructor takes qkv_bias (`built`: a construct case with qkv_bias=True, next to `plain`, a case that
    reports the structure of the same module with qkv_bias=False), it adds exactly the reference's biases
    (`no_bias`, `count`: the messages when it adds none, or another number), and `case`, run with the grader's
    biases among its weights, computes the reference's output. Only that output passes the check: the facts read
    before it (claimed, unvouched) only say why it fails."""
    base = r.learner.get("fwd")  # the same module without biases: a structural cause there is the cause here too
    if base is not None and base.status == "wrong_type":
        raise Failed(describe_failure(base))  # said once, on the step's structure check (grader.checks.structure)
    res, plain_s = r.learner.get(built), claimed(r, plain, "structure")
    spec = r.case_specs[built].params
    ctor = spec["ctor"]
    args, kwargs = probes.ctor_arguments(spec["cls"], ctor)  # the call as the worker made it
    call_args = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    call = f"{spec['cls']}({', '.join(call_args)})"
    if res is not None and res.status == "wrong_type":  # no parameter qkv_bias (probes._takes_keywords)
        raise Failed(describe_failure(res))
    if res is not None and res.status == "error" and plain_s is not None:
        if res.exception == "TypeError" and "argument" in res.message:
            raise Failed(_(NO_QKV_BIAS_PARAM).format(call=call, exception=res.exception, message=res.message))
        raise Failed(_("`{call}`: {failure}").format(call=call, failure=describe_failure(res)))
    n_plain, n_bias = n_params(plain_s), n_params(claimed(r, built, "structure"))
    want_plain, want_bias = (n_params(r.want(c, "structure")) for c in (plain, built))
    if n_plain is not None and n_bias is not None and want_plain is not None and want_bias is not None \
            and n_plain == want_plain:
        expect.true(n_bias != n_plain, _(no_bias))
        expect.true(n_bias - n_plain == want_bias - want_plain, _(count).format(
            got=f"{n_bias - n_plain:,}", want=f"{want_bias - want_plain:,}"))
    expect.close(r.got(case), r.want(case), _("context vectors with qkv_bias=True (do the biases reach queries, "
                                              "keys and values in forward?)"), dims)
