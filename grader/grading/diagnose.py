"""Name the chapter's classic mistakes from what the learner's code *did* (trusted process only).

A step module declares its own diagnosis (grader.checks.registration: `mistakes(STEP, {id: message})` and
`@diagnosis(STEP) def _(r, kit)`); this module holds what they share: the mistake models and the messages of the
mistakes several steps make. A mistake model computes from a case's inputs (and the reference weights the grader
loaded, `w.<param>`) what a learner who made one classic mistake would have output: softmax over dim 0, no √d_k,
−inf replaced by 0, and so on. When the learner's output matches a mistake model (within tolerance) on every case
where both are available, and differs from the reference on at least one of them, that mistake is diagnosed
(`matches`). A few mistakes are recognised from structure facts (heads sharing weights, or the probe's structured
report of the parameters a module has: its template id and parameters, never its English wording) or from how a
case failed (a mask not cut to num_tokens raises torch's size error on inputs shorter than context_length).

Source text is never read: a diagnosis follows the behaviour, however the code is written.
`diagnose(outcome, lang)` never raises; it returns [{"id", "message"}] in the report's language.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

import torch

from grader import checks
from grader.checks import Outcome
from grader.i18n import N_, _, deferred
from grader.registry import BY_ID
from grader.report import clean
from grader.worker import roles

ATOL = 1e-4
RTOL = 1e-3

# the mistakes several steps make, id -> message (English msgid; the Chinese is in the catalogue); a step's own are
# in its module (grader.checks.registration.mistakes); the book section is added from the step
MESSAGES: dict[str, str] = {
    "softmax_wrong_dim": N_(
        'softmax over the wrong dimension: each row (one query) must sum to 1, so normalise with dim=-1'),
    "scale_missing": N_(
        'the attention scores are not scaled: divide them by √d_k (keys.shape[-1] ** 0.5) before the '
        'softmax'),
    "scale_by_d_k": N_(
        'the attention scores are divided by d_k: divide by its square root, √d_k = keys.shape[-1] ** '
        '0.5'),
    "scale_wrong_dim": N_(
        "the attention scores are scaled with the wrong dimension (d_in or d_out): d_k is the keys' "
        'last dimension, keys.shape[-1] (head_dim in multi-head attention)'),
    "mask_fill_zero": N_(
        'future scores are filled with 0 instead of −inf: exp(0) = 1, so future tokens still get '
        'weight; use masked_fill(mask, -torch.inf)'),
    "mask_diagonal": N_(
        'the mask hides the diagonal too (triu with diagonal=0): a token must attend to itself, and the '
        'first token then sees nothing (NaN); use torch.triu(..., diagonal=1)'),
    "mask_after_softmax": N_(
        'the mask is applied after the softmax: the remaining weights no longer sum to 1; mask the '
        'scores with −inf before the softmax (or renormalise each row)'),
    "roles_by_order": N_(
        'your projections have names that do not say their role ({names}), so they were taken as query, key '
        'and value in the order your __init__ defines them; if that is not their order, name them as the book '
        'does (W_query, W_key, W_value) or so that each name says query, key or value'),
    "query_key_swapped": N_(
        'queries and keys are swapped: the scores come out transposed (K Qᵀ instead of Q Kᵀ); compute '
        'queries with W_query, keys with W_key, and scores = queries @ keys.T'),
    "mask_discarded": N_(
        'the causal mask never reaches the scores: your weights are those of no mask at all. masked_fill returns '
        'a new tensor and leaves the scores as they were, so use masked_fill_ (in place) or assign its result: '
        'attn_scores = attn_scores.masked_fill(mask, -torch.inf)'),
    "input_changed_in_place": N_(
        'your function changes the tensor it was given, in place (a method ending in _, inplace=True, '
        'x[...] = …, x *= …): the caller\'s tensor must stay as it was, and a second call starts from what the '
        'first one left, which can explain the other failures here; compute into a new tensor instead'),
}


def messages() -> dict[str, str]:
    """Every mistake's message, id -> English msgid: the shared ones and those the step modules declare."""
    checks.load_all()
    return {**MESSAGES, **checks.MISTAKES}


def diagnosed_steps() -> list[str]:
    """The steps whose module declares a diagnosis, in the registry's order."""
    checks.load_all()
    return [s for s in BY_ID if s in checks.DIAGNOSES]


def message(diag_id: str, step: str) -> str:
    """A diagnosis's message, unworded (grader.i18n.Text): its reader's language words it."""
    section = BY_ID[step].section
    with deferred():
        return _("{message} (book §{section})").format(message=_(messages()[diag_id]), section=section)



# ---------------------------------------------------------------- comparisons


def close(a: Any, b: Any) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or tuple(a.shape) != tuple(b.shape):
        return False
    try:
        return bool(torch.allclose(a.detach().to(torch.float64), b.detach().to(torch.float64),
                                   atol=ATOL, rtol=RTOL, equal_nan=True))
    except (RuntimeError, TypeError):
        return False


def got(r: Outcome, case: str, key: str = "out") -> Any:
    res = r.learner.get(case)
    if res is None or res.status != "ok":
        return None
    return res.tensors.get(key, res.facts.get(key))


def want(r: Outcome, case: str, key: str = "out") -> Any:
    res = r.reference.get(case)
    if res is None or res.status != "ok":
        return None
    return res.tensors.get(key, res.facts.get(key))


Model = Callable[[Outcome, str], "torch.Tensor | list[torch.Tensor] | None"]


def matches(r: Outcome, cases: Iterable[str], model: Model) -> bool:
    """The learner matches the model wherever both exist, and differs from the reference somewhere."""
    matched = differs = False
    for case in cases:
        mine = got(r, case)
        if not isinstance(mine, torch.Tensor):
            continue
        try:
            predicted = model(r, case)
        except Exception:  # a model that cannot apply to this case says nothing
            continue
        if predicted is None:
            continue
        candidates = predicted if isinstance(predicted, list) else [predicted]
        if not any(close(mine, p) for p in candidates):
            return False
        matched = True
        differs = differs or not close(mine, want(r, case))
    return matched and differs


# ---------------------------------------------------------------- attention with a mistake in it

# options: scale (what the scores are divided by), dim (softmax dim), swap (K Qᵀ), mask, merge
REF = {"scale": "sqrt_dk", "dim": -1, "swap": False, "mask": "inf", "merge": "ok"}

SCALE_MODELS = [("scale_missing", {"scale": "none"}), ("scale_by_d_k", {"scale": "d_k"}),
                ("scale_wrong_dim", {"scale": "sqrt_d_in"}), ("scale_wrong_dim", {"scale": "d_in"}),
                ("scale_wrong_dim", {"scale": "sqrt_d_out"})]
CORE_MODELS = [*SCALE_MODELS, ("softmax_wrong_dim", {"dim": -2}), ("query_key_swapped", {"swap": True})]
MASK_MODELS = [("mask_fill_zero", {"mask": "zero"}), ("mask_diagonal", {"mask": "diag"}),
               ("mask_after_softmax", {"mask": "after"}), ("mask_discarded", {"mask": None})]


def divisor(kind: str, d_k: int, d_in: int, d_out: int) -> float:
    return {"sqrt_dk": math.sqrt(d_k), "none": 1.0, "d_k": float(d_k), "sqrt_d_in": math.sqrt(d_in),
            "d_in": float(d_in), "sqrt_d_out": math.sqrt(d_out), "d_out": float(d_out)}[kind]


def weights(scores: torch.Tensor, opts: dict[str, Any], divisor: float) -> torch.Tensor:
    s = scores.transpose(-2, -1) if opts["swap"] else scores
    n = s.shape[-1]
    mask = opts["mask"]
    future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=0 if mask == "diag" else 1)
    if mask in ("inf", "diag"):
        s = s.masked_fill(future, -torch.inf)
    elif mask == "zero":
        s = s.masked_fill(future, 0.0)
    w = torch.softmax(s / divisor, dim=opts["dim"])
    if mask == "after":
        w = w.masked_fill(future, 0.0)
    return w


def project(x: torch.Tensor, inputs: dict[str, torch.Tensor], name: str, linear: bool) -> torch.Tensor:
    w = inputs[f"w.{name}.weight" if linear else f"w.{name}"].to(torch.float64)
    y = x @ (w.T if linear else w)
    bias = inputs.get(f"w.{name}.bias")
    return y + bias.to(torch.float64) if linear and bias is not None else y


def attention(r: Outcome, case: str, opts: dict[str, Any], *, linear: bool, multi: bool = False,
              key: str = "x") -> torch.Tensor | None:
    """What SelfAttention_v1/_v2, CausalAttention or MultiHeadAttention with these options returns."""
    spec = r.case_specs[case]
    if spec.probe != "module":
        return None
    inputs = spec.inputs
    opts = {**REF, **opts}
    x = inputs[key].to(torch.float64)
    q, k, v = (project(x, inputs, n, linear) for n in ("W_query", "W_key", "W_value"))
    d_in, d_out = x.shape[-1], q.shape[-1]
    h = int(spec.params["ctor"]["num_heads"]) if multi else 1
    d_k = d_out // h
    split = (*q.shape[:-1], h, d_k)
    q, k, v = (t.reshape(split).transpose(-3, -2) for t in (q, k, v))  # (…, heads, tokens, d_k)
    w = weights(q @ k.transpose(-2, -1), opts, divisor(opts["scale"], d_k, d_in, d_out))
    ctx = w @ v
    if opts["merge"] == "ok":
        ctx = ctx.transpose(-3, -2)
    ctx = ctx.contiguous().reshape((*x.shape[:-1], d_out))
    if multi:  # MultiHeadAttention's out_proj
        ctx = ctx @ inputs["w.out_proj.weight"].to(torch.float64).T + inputs["w.out_proj.bias"].to(torch.float64)
    return ctx


def _with_options(fn: Callable[[Outcome, str, dict[str, Any]], torch.Tensor | None], opts: dict[str, Any],
                  r: Outcome, case: str) -> torch.Tensor | None:
    return fn(r, case, opts)


def by_models(r: Outcome, cases: list[str], models: list[tuple[str, dict[str, Any]]],
              fn: Callable[[Outcome, str, dict[str, Any]], torch.Tensor | None]) -> list[str]:
    found: list[str] = []
    for diag_id, opts in models:
        if diag_id in found or (diag_id.startswith("scale_") and any(f.startswith("scale_") for f in found)):
            continue  # one scaling diagnosis at most: the first (most specific) model that fits
        if matches(r, cases, functools.partial(_with_options, fn, opts)):
            found.append(diag_id)
    return found


# what a step's diagnosis (grader.checks.registration.diagnosis) is given as `kit`: the checks cannot import this
# module (it is a layer above them), so it is handed to them
KIT = SimpleNamespace(
    ATOL=ATOL, RTOL=RTOL, REF=REF, SCALE_MODELS=SCALE_MODELS, CORE_MODELS=CORE_MODELS, MASK_MODELS=MASK_MODELS,
    close=close, got=got, want=want, matches=matches, divisor=divisor, weights=weights, attention=attention,
    by_models=by_models)


def silent_roles(r: Outcome) -> list[str]:
    """The learner's parameters that play query, key or value under names that say nothing (grader.worker.roles
    took them in the order they are defined), when some output of theirs differs from the reference's."""
    silent: set[str] = set()
    wrong = False
    for case in r.case_specs:
        facts = got(r, case, "structure")
        if isinstance(facts, dict) and isinstance(facts.get("roles"), dict):
            for ref, entries in facts["roles"].items():
                if roles.kinds_of(str(ref)) in (["q"], ["k"], ["v"]) and isinstance(entries, list):
                    # names the learner chose (add_module takes any string): quoted only cleaned and capped
                    silent |= {clean(str(e[0]), 60) for e in entries
                               if isinstance(e, list) and e and roles.kinds_of(str(e[0])) is None}
            wrong = wrong or not close(got(r, case), want(r, case))
    return sorted(silent)[:6] if len(silent) >= 2 and wrong else []


def changed_in_place(r: Outcome) -> bool:
    """A function of the step changed a tensor it was given (the call probe's `inputs_modified`, a fact the learner's
    code reports: it only words a diagnosis, never a point)."""
    return any(res.status == "ok" and res.facts.get("inputs_modified") is True for res in r.learner.values())


def ids(outcome: Outcome) -> list[str]:
    """The classic mistakes the learner's outputs show, by id (empty when none is recognised)."""
    checks.load_all()
    fn = checks.DIAGNOSES.get(outcome.step)
    try:
        with torch.no_grad():
            found = fn(outcome, KIT) if fn is not None else []
            if changed_in_place(outcome):
                found.append("input_changed_in_place")
        if silent_roles(outcome):
            found.append("roles_by_order")
    except Exception:  # a diagnosis is a bonus: it must never cost the learner their report
        return []
    return list(dict.fromkeys(found))


def diagnose(outcome: Outcome) -> list[dict[str, str]]:
    """[{"id", "message"}] for the step of `outcome`, messages unworded (Report.worded words them)."""
    out = []
    for i in ids(outcome):
        text = message(i, outcome.step)
        if i == "roles_by_order":  # the names are the learner's, never translated
            text = text.replace("{names}", ", ".join(silent_roles(outcome)))
        out.append({"id": i, "message": text})
    return out
