"""Probes: the code that exercises a submission's names on given inputs.

The same probe runs twice: in a worker on the learner's names, and in the grader on the
reference's. Probes only *produce* outputs (tensors, plus short facts as JSON-able values);
all judging happens in the checks, in the trusted process.

A probe is `fn(ns, inputs, **params) -> dict`, where `ns` maps public names to objects and
`inputs` holds the tensors the grader generated from its private, seeded generators.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn as nn

from grader.i18n import N_, Msg
from grader.worker import counting, roles
from grader.worker.fast_init import fast_uniform

Outputs = dict[str, Any]  # str -> torch.Tensor | JSON-able fact
PROBES: dict[str, Callable[..., Outputs]] = {}


class WrongType(Msg):
    """The learner's code returned something that is not what the step asks for.

    It carries a msgid and parameters (never a language): the trusted side words it for the report."""


NO_PARAMETER = N_("the module has no parameter `{name}` of shape {shape} (it has: {have})")
NO_PARAMETER_AT_ALL = N_("the module has no parameter `{name}` of shape {shape} (it has none)")
NO_ROLE = N_("no parameter of yours could be matched to {roles} (your parameters: {have}): name them as the book "
             "does (W_query, W_key, W_value, out_proj), or so that each name says query, key, value or out")
NO_QKV_BIAS = N_("your class has no parameter `qkv_bias` (did you mean `{close}`?): the book, and chapter 4's "
                 "GPTModel, pass it by keyword, as qkv_bias=...")
NO_QKV_BIAS_AT_ALL = N_("your class has no parameter `qkv_bias` (its parameters: {have}): add qkv_bias=False as its "
                        "last parameter, as the book does; chapter 4's GPTModel passes it by keyword")
PLAIN_LIST = N_("`self.{attr}` is a plain Python {type}: the modules in it are hidden from .parameters(), "
                "state_dict() and .to(); keep them in an nn.ModuleList")
# every template a worker may send back (probes here, the worker's own in grader/worker/serve.py)
MESSAGES = frozenset({
    N_("{what} returned {type}, expected a torch.Tensor"),
    NO_PARAMETER,
    NO_PARAMETER_AT_ALL,
    NO_ROLE,
    NO_QKV_BIAS,
    NO_QKV_BIAS_AT_ALL,
    PLAIN_LIST,
    N_("parameter `{name}` has shape {shape}, expected {want}"),
    N_("{cls}(...) built a {type}, expected an nn.Module"),
    N_("`{name}` is not defined"),
    N_("{key}: unsupported tensor ({dtype}, {layout})"),
    N_("{key}: a result of {n} elements is far larger than this step's answer"),
})


def probe(fn: Callable[..., Outputs]) -> Callable[..., Outputs]:
    PROBES[fn.__name__] = fn
    return fn


def _tensor(value: Any, what: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise WrongType("{what} returned {type}, expected a torch.Tensor", what=what, type=type(value).__name__)
    return value


def _args(inputs: Mapping[str, torch.Tensor], names: list[str], grad: bool) -> list[torch.Tensor]:
    args = [inputs[n].clone() for n in names]
    if grad:
        for a in args:
            if a.is_floating_point():
                a.requires_grad_(True)
    return args


@probe
def call(ns: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], *, fn: str, args: list[str],
         consts: list[Any] | None = None, grad: bool = False, repeat: int = 1) -> Outputs:
    """Call fn(*tensors, *consts); report its output, what became of its inputs, and input gradients."""
    arg_tensors = _args(inputs, args, grad)
    before = [a.detach().clone() for a in arg_tensors]
    out: Outputs = {}
    for r in range(repeat):
        result = _tensor(ns[fn](*arg_tensors, *(consts or [])), f"{fn}()")
        out["out" if r == 0 else f"out{r}"] = result
    out["inputs_modified"] = any(not torch.equal(b, a.detach()) for b, a in zip(before, arg_tensors, strict=True))
    result = out["out"]
    out["requires_grad"] = bool(result.requires_grad)
    if grad:
        g = inputs["grad_out"] if "grad_out" in inputs else torch.ones_like(result)
        if result.requires_grad and g.shape == result.shape:
            (result * g).sum().backward()
        for name, a in zip(args, arg_tensors, strict=True):
            if a.grad is not None:
                out[f"grad.{name}"] = a.grad
    return out


@probe
def loops(ns: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], *, fn: str, args: list[str],
          sizes: list[int]) -> Outputs:
    """Step 4's "no Python loops", as behaviour: call fn at each size (inputs `<size>.<arg>`), small, large, small,
    large, counting each call's line events, torch calls and torch operations (grader.worker.counting). The
    counts only: the trusted check says whether they grew with num_tokens. A first call may pay for a lazy import,
    so each size is measured twice, small first (once where the first pair grew already: a loop at the large size
    is the slow part). No tensor comes back: this case vouches for nothing."""
    work: dict[str, Any] = {"sizes": list(sizes), "lines": [], "calls": [], "ops": [], "tampered": []}
    tampered: set[str] = set()
    for size in (*sizes, *sizes):
        result, counts = counting.measure(ns[fn], [inputs[f"{size}.{a}"].clone() for a in args])
        _tensor(result, f"{fn}()")
        for key in ("lines", "calls", "ops"):
            work[key].append(getattr(counts, key))
        tampered |= counts.tampered
        if len(work["lines"]) == 2 and any(work[k][1] > work[k][0] for k in ("lines", "calls", "ops")):
            break  # grown already, though the first call pays any lazy import: a loop, no need to run it again
    work["tampered"] = sorted(tampered)
    return {"work": work}


def _load_weights(module: nn.Module, weights: Mapping[str, torch.Tensor]) -> list[roles.Piece]:
    """Copy the grader's weights (named like the reference's parameters) into the learner's module by role
    (grader.worker.roles): the same names, or names that say query/key/value/out, or a unique shape."""
    if not weights:
        return []
    try:
        pieces = roles.match(module, weights)
    except roles.NoMatch as exc:
        _explain(module, exc, weights)
        raise  # not reached: _explain always raises
    roles.load(pieces, weights)
    return pieces


def _explain(module: nn.Module, exc: roles.NoMatch, weights: Mapping[str, torch.Tensor]) -> None:
    """One message for a module the weights cannot be loaded into: its one real cause where it is known."""
    for sub in module.modules():
        for attr, value in vars(sub).items():
            if isinstance(value, list | tuple) and value and all(isinstance(v, nn.Module) for v in value):
                raise WrongType(PLAIN_LIST, attr=attr, type=type(value).__name__)
    if exc.shape is not None:
        name, got_shape, want_shape = exc.shape
        raise WrongType("parameter `{name}` has shape {shape}, expected {want}", name=name, shape=str(got_shape),
                        want=str(want_shape))
    params = dict(module.named_parameters())
    if not params:
        first = exc.roles[0]
        raise WrongType(NO_PARAMETER_AT_ALL, name=first, shape=str(tuple(weights[first].shape)), have="")
    have = ", ".join(f"{n} {tuple(p.shape)}" for n, p in params.items())
    want = ", ".join(f"{n} {tuple(weights[n].shape)}" for n in exc.roles)
    raise WrongType(NO_ROLE, roles=want, have=have)


def _roles(pieces: list[roles.Piece]) -> dict[str, list[list[Any]]]:
    """For each of the grader's names: the learner's parameters that play it, their owner, their orientation."""
    out: dict[str, list[list[Any]]] = {}
    for pc in pieces:
        entry = [pc.pname, pc.owner, pc.transposed]
        if entry not in out.setdefault(pc.ref, []):
            out[pc.ref].append(entry)
    return out


def _heads(module: nn.Module) -> Any:
    """`self.heads`, or else the module's one nn.ModuleList (its heads by another name)."""
    if hasattr(module, "heads"):
        return module.heads
    lists = [m for m in module.children() if isinstance(m, nn.ModuleList)]
    return lists[0] if len(lists) == 1 else None


def _structure(module: nn.Module) -> dict[str, Any]:
    heads = _heads(module)
    return {
        "params": {n: list(p.shape) for n, p in module.named_parameters()},
        "buffers": {n: [list(b.shape), str(b.dtype)] for n, b in module.named_buffers()},
        "children": {n: type(m).__name__ for n, m in module.named_children()},
        "attrs": {a: getattr(module, a) for a in ("head_dim", "num_heads", "d_out")
                  if isinstance(getattr(module, a, None), int)},
        "heads": [type(h).__name__ for h in heads] if isinstance(heads, nn.ModuleList) else None,
        "heads_type": type(heads).__name__,
        "n_unique_params": len({id(p) for p in module.parameters()}),
        "roles": {},  # filled in once the grader's weights are matched (_roles)
        "unused": [],
    }


# the book's order of the constructors' parameters: it passes these positionally, and so does the grader (a
# learner's may be named otherwise: input_dim, ctx_length, ...); qkv_bias it passes by keyword (chapter 4's GPTModel:
# qkv_bias=cfg["qkv_bias"]), and so does the grader, so an extra parameter before it (is_causal=True) takes no value
# meant for it, and a misspelled one (kqv_bias) is seen
CTOR_ORDER = ("d_in", "d_out", "context_length", "dropout", "num_heads")
KEYWORD = ("qkv_bias",)
BY_KEYWORD = frozenset({"MultiHeadAttention", "MultiHeadAttentionWrapper"})


def _takes_keywords(cls: Any, ctor: Mapping[str, Any]) -> None:
    """Raise WrongType when `cls` cannot take a keyword the grader passes (qkv_bias), naming its closest parameter."""
    wanted = [k for k in KEYWORD if k in ctor]
    if not wanted:
        return
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):  # no signature to read: the call itself says what is wrong
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    names = [n for n, p in params.items() if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                        inspect.Parameter.KEYWORD_ONLY)]
    for key in wanted:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
            if close:
                raise WrongType(NO_QKV_BIAS, close=close[0])
            raise WrongType(NO_QKV_BIAS_AT_ALL, have=", ".join(names) or "()")


def ctor_arguments(cls: str, ctor: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments `cls` is built with. Chapter 4's GPTModel builds the multi-head classes
    with qkv_bias=... by keyword; the book builds the single-head ones positionally (SelfAttention_v2(d_in, d_out,
    qkv_bias)), where a learner's own name for the flag counts."""
    order = CTOR_ORDER if cls in BY_KEYWORD else CTOR_ORDER + KEYWORD
    return [ctor[k] for k in order if k in ctor], {k: v for k, v in ctor.items() if k not in order}


def _build(ns: Mapping[str, Any], cls: str, ctor: dict[str, Any], seed: int | None,
           fast_init: bool = False) -> nn.Module:
    if seed is not None:
        torch.default_generator.manual_seed(seed)  # = torch.manual_seed on the CPU, without CUDA set-up
    args, kwargs = ctor_arguments(cls, ctor)
    if cls in BY_KEYWORD:
        _takes_keywords(ns[cls], ctor)
    # GPT-2-size builds: seeded weights from a table instead of one generator call per element (fast_init.py)
    with fast_uniform() if fast_init else contextlib.nullcontext():
        module = ns[cls](*args, **kwargs)
    if not isinstance(module, nn.Module):
        raise WrongType("{cls}(...) built a {type}, expected an nn.Module", cls=cls, type=type(module).__name__)
    return module


# Modules a case kept for a later case of the same request (`module(keep=...)`, `module(reuse=...)`): the worker
# and the reference run empty it after each step's cases (clear_kept).
KEPT: dict[str, nn.Module] = {}


def clear_kept() -> None:
    KEPT.clear()


@functools.lru_cache(maxsize=8)
def _far(size: int, window: int) -> torch.Tensor:
    """(size, size) bool: True where i - j > window (made once: 0.6 ms at GPT-2's 1024, on both sides; the zygote
    makes GPT-2's before it forks, grader.pool.preload, so a worker only reads them)."""
    return torch.ones(size, size, dtype=torch.bool).tril(-window - 1)


def make_windows(size: int, windows: tuple[int, ...]) -> None:
    """Make these windows now (the zygote, before it forks: a worker then only reads them, ~1 ms less each)."""
    for window in windows:
        _far(size, window)


def _windowed(size: int, window: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """For `nn.Module._apply` (what .to(), .cuda() and .double() use): every tensor whose last two sizes are
    (size, size), the causal mask in whatever convention (1, True or -inf where masked, or 1 where kept), also
    masks the tokens more than `window` positions back: they get the value it holds at a future position, (0,
    size - 1). Every other tensor is returned as it is. Only what moves with the module sees the change: its
    parameters and registered buffers, persistent or not, and not a plain attribute."""
    far = _far(size, window)

    def fn(t: torch.Tensor) -> torch.Tensor:
        if t.dim() < 2 or tuple(t.shape[-2:]) != (size, size):
            return t
        return torch.where(far, t[..., :1, -1:], t)  # t[..., :1, -1:]: (..., 1, 1), the masked value

    return fn


@probe
def module(ns: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], *, cls: str, ctor: dict[str, Any],
           train: bool = False, grad: bool = False, load: bool = True, seed: int | None = None,
           extra_x: list[str] | None = None, structure: bool = False, fast_init: bool = False,
           keep: str = "", reuse: str = "", window: int = 0, mask_size: int = 0) -> Outputs:
    """Build a module, load the grader's weights (inputs `w.<param>`), run it on `x` (and extra inputs).
    `keep`: remember the module under that name for a later case of the same step; `reuse`: run the module an
    earlier case kept (built by the same constructor call) instead of building another, where there is one.
    Step 14 builds GPT-2-size modules (2.4 million weights, a 1024 × 1024 mask): a build saved is ~1/3 of it.
    `window`: first, narrow what moves with the module and is (mask_size, mask_size) to a sliding window of
    that many tokens back (`_windowed`): only a mask kept where .to() finds it, and read by forward, changes the
    output as it changes the reference's."""
    m = KEPT.pop(reuse, None) if reuse else None
    if m is None:
        m = _build(ns, cls, ctor, seed, fast_init)
    if keep:
        KEPT[keep] = m
    if window:  # before anything runs: a forward that changes the module (in place) acts on the moved one
        m._apply(_windowed(mask_size, window))
    out: Outputs = {"structure": _structure(m)} if structure else {}
    weights = {k[2:]: v for k, v in inputs.items() if k.startswith("w.")}
    pieces = _load_weights(m, weights) if load else []
    if structure:
        out["structure"]["roles"] = _roles(pieces)
        out["structure"]["unused"] = sorted({n for n, _p in m.named_parameters()} - {pc.pname for pc in pieces})
    m.train(train)
    x = inputs["x"].clone()
    y = _tensor(m(x), f"{cls}.forward()")
    out["out"] = y
    for i, name in enumerate(extra_x or []):
        out[f"out{i + 1}"] = _tensor(m(inputs[name].clone()), f"{cls}.forward()")
    if grad:
        g = inputs["grad_out"]
        if y.requires_grad and g.shape == y.shape:
            (y * g).sum().backward()
        # in the grader's names (a learner's parameters may play them under other names, split or combined)
        out["grads"] = {}
        for n, gr in roles.grads(pieces, weights).items():
            out["grads"][n] = gr is not None and bool(gr.abs().sum() > 0)
            if gr is not None:
                out[f"grad.{n}"] = gr
    return out


@probe
def construct(ns: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], *, cls: str,
              ctor: dict[str, Any]) -> Outputs:
    """Only build the module: does the constructor accept (or reject) these arguments? With weights (inputs
    `w.<param>`), also which of its parameters play which of the grader's (none is loaded)."""
    m = _build(ns, cls, ctor, None)
    s = _structure(m)
    weights = {k[2:]: v for k, v in inputs.items() if k.startswith("w.")}
    if weights:
        try:
            pieces = roles.match(m, weights)
        except roles.NoMatch as exc:
            _explain(m, exc, weights)
            raise
        s["roles"] = _roles(pieces)
        s["unused"] = sorted({n for n, _p in m.named_parameters()} - {pc.pname for pc in pieces})
    return {"structure": s}


@probe
def book_example(ns: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], *, cls: str, ctor: dict[str, Any],
                 seed: int) -> Outputs:
    """The chapter's printed example: torch.manual_seed(seed), build, forward the chapter's inputs; with the initial
    weights the book's own layers draw under that seed (inputs `w.<name>`) loaded by role, where the case has them."""
    m = _build(ns, cls, ctor, seed)
    _load_weights(m, {k[2:]: v for k, v in inputs.items() if k.startswith("w.")})
    m.eval()
    return {"out": _tensor(m(inputs["x"].clone()), f"{cls}.forward()")}


@probe
def transfer(ns: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], *, d_in: int, d_out: int) -> Outputs:
    """Exercise 3.1: build a v2 with the grader's weights and a fresh v1, transfer, compare."""
    sa_v2 = ns["SelfAttention_v2"](d_in, d_out)
    _load_weights(sa_v2, {k[2:]: v for k, v in inputs.items() if k.startswith("w.")})
    sa_v1 = ns["SelfAttention_v1"](d_in, d_out)
    returned = ns["transfer_weights"](sa_v2, sa_v1)
    if isinstance(returned, nn.Module):
        sa_v1 = returned
    x = inputs["x"].clone()
    out: Outputs = {"out_v1": _tensor(sa_v1(x), "SelfAttention_v1.forward()"), "out_v2": sa_v2(x)}
    out["v1_param_types"] = {n: type(getattr(sa_v1, n, None)).__name__ for n in ("W_query", "W_key", "W_value")}
    for n in ("W_query", "W_key", "W_value"):
        p = getattr(sa_v1, n, None)
        if isinstance(p, torch.Tensor):
            out[f"v1.{n}"] = p
        out[f"v2.{n}"] = getattr(sa_v2, n).weight
    return out


@probe
def dropout_average(ns: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], *, cls: str,
                    ctor: dict[str, Any], copies: int) -> Outputs:
    """Run one input `copies` times in a batch in training mode: dropout's mean must match eval."""
    m = _build(ns, cls, ctor, None)
    _load_weights(m, {k[2:]: v for k, v in inputs.items() if k.startswith("w.")})
    x = inputs["x"].clone()  # (1, num_tokens, d_in)
    m.eval()
    with torch.no_grad():
        eval_out = _tensor(m(x), f"{cls}.forward()")
        m.train()
        samples = _tensor(m(x.expand(copies, *x.shape[1:]).contiguous()), f"{cls}.forward()")
    return {"eval": eval_out, "mean": samples.mean(dim=0, keepdim=True), "sample": samples[:2],
            "std": samples.std(dim=0, keepdim=True)}
