"""Name the chapter's classic mistakes from what the learner's code *did* (trusted process only).

For each step, "mistake models" compute from a case's inputs (and the reference weights the grader
loaded, `w.<param>`) what a learner who made one classic mistake would have output: softmax over
dim 0, no √d_k, −inf replaced by 0, and so on. When the learner's output matches a mistake model
(within tolerance) on every case where both are available, and differs from the reference on at
least one of them, that mistake is diagnosed. A few mistakes are recognised from structure facts
(heads sharing weights, or the probe's structured report of the parameters a module has: its
template id and parameters, never its English wording) or from how a case failed (a mask not cut to
num_tokens raises torch's size error on inputs shorter than context_length).

Source text is never read: a diagnosis follows the behaviour, however the code is written.
`diagnose(outcome, lang)` never raises; it returns [{"id", "message"}] in the report's language.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import torch

from grader.checks import Outcome
from grader.checks.causal_attention import PLACE_P, PLACE_TOKENS
from grader.checks.common import dropout_mean_close
from grader.checks.multihead_attention import PLACE_HEADS, PLACE_SHIFT
from grader.i18n import N_, _, using
from grader.registry import BY_ID
from grader.report import clean
from grader.worker import probes, roles

ATOL = 1e-4
RTOL = 1e-3

# id -> message (English msgid; the Chinese is in the catalogue); the book section is added from the step
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
    "mask_not_cut": N_(
        "the (context_length, context_length) mask is not cut to the input's length: inputs shorter "
        'than context_length fail; use self.mask.bool()[:num_tokens, :num_tokens]'),
    "dropout_no_rescale": N_(
        'dropout does not rescale the kept weights: multiply them by 1/(1−p) so their expected value is '
        'unchanged (inverted dropout)'),
    "dropout_rescale_wrong": N_(
        'dropout multiplies the kept weights by (1−p): divide by (1−p) instead, i.e. scale by 1/(1−p)'),
    "dropout_keep_prob": N_(
        'p is used as the probability to keep: it is the probability to drop (keep where '
        'torch.rand(...) >= p)'),
    "dropout_in_eval": N_(
        'dropout is active in evaluation mode: with training=False (after model.eval()) the weights '
        'must pass through unchanged'),
    "heads_cat_wrong_dim": N_(
        'the heads are concatenated along the wrong dimension: join their outputs along the features '
        'with torch.cat([...], dim=-1)'),
    "heads_stacked": N_(
        'the heads are stacked (torch.stack adds a new dimension): concatenate them with '
        'torch.cat([...], dim=-1)'),
    "heads_share_weights": N_(
        'all heads share one set of weights ([CausalAttention(...)] * num_heads repeats one object): '
        'build a new CausalAttention for every head, e.g. [CausalAttention(...) for _ in '
        'range(num_heads)]'),
    "heads_merge_without_transpose": N_(
        'the heads are merged without transposing back: call .transpose(1, 2) before '
        '.contiguous().view(b, num_tokens, d_out), or tokens and heads get mixed up'),
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
}


def message(diag_id: str, step: str, lang: str = "en") -> str:
    section = BY_ID[step].section
    with using(lang):
        return _("{message} (book §{section})").format(message=_(MESSAGES[diag_id]), section=section)


# ---------------------------------------------------------------- comparisons


def _close(a: Any, b: Any) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or tuple(a.shape) != tuple(b.shape):
        return False
    try:
        return bool(torch.allclose(a.detach().to(torch.float64), b.detach().to(torch.float64),
                                   atol=ATOL, rtol=RTOL, equal_nan=True))
    except (RuntimeError, TypeError):
        return False


def _got(r: Outcome, case: str, key: str = "out") -> Any:
    res = r.learner.get(case)
    if res is None or res.status != "ok":
        return None
    return res.tensors.get(key, res.facts.get(key))


def _want(r: Outcome, case: str, key: str = "out") -> Any:
    res = r.reference.get(case)
    if res is None or res.status != "ok":
        return None
    return res.tensors.get(key, res.facts.get(key))


Model = Callable[[Outcome, str], "torch.Tensor | list[torch.Tensor] | None"]


def _matches(r: Outcome, cases: Iterable[str], model: Model) -> bool:
    """The learner matches the model wherever both exist, and differs from the reference somewhere."""
    matched = differs = False
    for case in cases:
        got = _got(r, case)
        if not isinstance(got, torch.Tensor):
            continue
        try:
            predicted = model(r, case)
        except Exception:  # a model that cannot apply to this case says nothing
            continue
        if predicted is None:
            continue
        candidates = predicted if isinstance(predicted, list) else [predicted]
        if not any(_close(got, p) for p in candidates):
            return False
        matched = True
        differs = differs or not _close(got, _want(r, case))
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


def _divisor(kind: str, d_k: int, d_in: int, d_out: int) -> float:
    return {"sqrt_dk": math.sqrt(d_k), "none": 1.0, "d_k": float(d_k), "sqrt_d_in": math.sqrt(d_in),
            "d_in": float(d_in), "sqrt_d_out": math.sqrt(d_out), "d_out": float(d_out)}[kind]


def _weights(scores: torch.Tensor, opts: dict[str, Any], divisor: float) -> torch.Tensor:
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


def _project(x: torch.Tensor, inputs: dict[str, torch.Tensor], name: str, linear: bool) -> torch.Tensor:
    w = inputs[f"w.{name}.weight" if linear else f"w.{name}"].to(torch.float64)
    y = x @ (w.T if linear else w)
    bias = inputs.get(f"w.{name}.bias")
    return y + bias.to(torch.float64) if linear and bias is not None else y


def _attention(r: Outcome, case: str, opts: dict[str, Any], *, linear: bool, multi: bool = False,
               key: str = "x") -> torch.Tensor | None:
    """What SelfAttention_v1/_v2, CausalAttention or MultiHeadAttention with these options returns."""
    spec = r.case_specs[case]
    if spec.probe != "module":
        return None
    inputs = spec.inputs
    opts = {**REF, **opts}
    x = inputs[key].to(torch.float64)
    q, k, v = (_project(x, inputs, n, linear) for n in ("W_query", "W_key", "W_value"))
    d_in, d_out = x.shape[-1], q.shape[-1]
    h = int(spec.params["ctor"]["num_heads"]) if multi else 1
    d_k = d_out // h
    split = (*q.shape[:-1], h, d_k)
    q, k, v = (t.reshape(split).transpose(-3, -2) for t in (q, k, v))  # (…, heads, tokens, d_k)
    w = _weights(q @ k.transpose(-2, -1), opts, _divisor(opts["scale"], d_k, d_in, d_out))
    ctx = w @ v
    if opts["merge"] == "ok":
        ctx = ctx.transpose(-3, -2)
    ctx = ctx.contiguous().reshape((*x.shape[:-1], d_out))
    if multi:  # MultiHeadAttention's out_proj
        ctx = ctx @ inputs["w.out_proj.weight"].to(torch.float64).T + inputs["w.out_proj.bias"].to(torch.float64)
    return ctx


def _by_models(r: Outcome, cases: list[str], models: list[tuple[str, dict[str, Any]]],
               fn: Callable[[Outcome, str, dict[str, Any]], torch.Tensor | None]) -> list[str]:
    found: list[str] = []
    for diag_id, opts in models:
        if diag_id in found or (diag_id.startswith("scale_") and any(f.startswith("scale_") for f in found)):
            continue  # one scaling diagnosis at most: the first (most specific) model that fits
        if _matches(r, cases, lambda r, c, o=opts: fn(r, c, o)):
            found.append(diag_id)
    return found


def _mask_not_cut(r: Outcome, short: str = "short", full: str = "fwd") -> list[str]:
    """A mask not cut to num_tokens: fine at context_length, a size error on shorter inputs."""
    res, ok = r.learner.get(short), r.learner.get(full)
    if res is None or ok is None or ok.status != "ok" or res.status != "error":
        return []
    text = f"{res.exception} {res.message}".lower()
    if res.exception == "RuntimeError" and any(w in text for w in ("size", "shape", "match", "broadcast")):
        return ["mask_not_cut"]
    return []


# ---------------------------------------------------------------- the steps


def _softmax(r: Outcome) -> list[str]:
    def wrong_dim(r: Outcome, case: str) -> list[torch.Tensor] | None:
        s = r.inputs(case)["scores"].to(torch.float64)
        return [torch.softmax(s, dim=d) for d in range(s.dim() - 1)] or None

    return ["softmax_wrong_dim"] if _matches(r, ["w2d", "w3d"], wrong_dim) else []


def _all_tokens(r: Outcome) -> list[str]:
    def wrong_dim(r: Outcome, case: str) -> torch.Tensor:
        return torch.softmax(r.inputs(case)["attn_scores"].to(torch.float64), dim=0)

    return ["softmax_wrong_dim"] if _matches(r, ["weights"], wrong_dim) else []


def _v1(r: Outcome) -> list[str]:
    return _by_models(r, ["fwd", "single", "wide"], CORE_MODELS,
                      lambda r, c, o: _attention(r, c, {**o, "mask": None}, linear=False))


def _v2(r: Outcome) -> list[str]:
    return _by_models(r, ["fwd", "bias", "single"], CORE_MODELS,
                      lambda r, c, o: _attention(r, c, {**o, "mask": None}, linear=True))


def _causal_mask(r: Outcome) -> list[str]:
    def masked(r: Outcome, case: str, opts: dict[str, Any]) -> torch.Tensor | None:
        spec = r.case_specs[case]
        if spec.params.get("fn") != "masked_attention_weights":
            return None
        d_k = int(spec.params["consts"][0])
        opts = {**REF, **opts}
        return _weights(spec.inputs["attn_scores"].to(torch.float64), opts,
                        _divisor(opts["scale"], d_k, d_k, d_k))

    cases = ["w2d", "batch", "single"]
    models = [*SCALE_MODELS[:2], ("softmax_wrong_dim", {"dim": -2}), *MASK_MODELS]
    found = _by_models(r, cases, models, masked)
    if "mask_diagonal" not in found:
        def diag_mask(r: Outcome, case: str) -> torch.Tensor:
            n = int(r.case_specs[case].params["consts"][0])
            return torch.triu(torch.ones(n, n), diagonal=0)

        if _matches(r, ["mask", "mask1"], diag_mask):
            found.append("mask_diagonal")
    return found


def _dropout(r: Outcome) -> list[str]:
    found: list[str] = []
    ratios: dict[float, float] = {}
    fracs: dict[float, float] = {}
    for case, p in (("half", 0.5), ("fifth", 0.2)):
        got, w = _got(r, case), r.inputs(case)["attn_weights"]
        if not isinstance(got, torch.Tensor) or got.shape != w.shape or not got.is_floating_point():
            continue
        kept = got != 0
        fracs[p] = float((~kept).float().mean())
        if kept.any() and fracs[p] > 0.02:  # something was dropped: how were the survivors scaled?
            ratio = (got[kept] / w[kept]).to(torch.float64)
            if torch.allclose(ratio, torch.full_like(ratio, ratio.mean().item()), atol=1e-4, rtol=1e-3):
                ratios[p] = ratio.mean().item()
    if ratios and all(abs(q - 1.0) < 1e-3 for q in ratios.values()):
        found.append("dropout_no_rescale")
    elif ratios and all(abs(q - (1 - p)) < 1e-3 for p, q in ratios.items()):
        found.append("dropout_rescale_wrong")
    if 0.2 in fracs and abs(fracs[0.2] - 0.8) < 0.03:
        found.append("dropout_keep_prob")
    got, w = _got(r, "eval"), r.inputs("eval")["attn_weights"]
    if isinstance(got, torch.Tensor) and got.shape == w.shape and not _close(got, w) and bool((got == 0).any()):
        found.append("dropout_in_eval")
    return found


def _causal_attention(r: Outcome) -> list[str]:
    found = _by_models(r, ["fwd", "short", "leak", "eval_dropout"], CORE_MODELS + MASK_MODELS,
                       lambda r, c, o: _attention(r, c, o, linear=True))
    found += _mask_not_cut(r)
    # dropout=0.5 in eval mode: the learner's output differs although dropout=0.0 is right
    if _close(_got(r, "fwd"), _want(r, "fwd")) and isinstance(_got(r, "eval_dropout"), torch.Tensor) \
            and not _close(_got(r, "eval_dropout"), _want(r, "eval_dropout")):
        found.append("dropout_in_eval")
    # training mode, averaged over many draws: without 1/(1−p) the mean shrinks by (1−p)
    ev, mean, spread = _got(r, "dropout", "eval"), _got(r, "dropout", "mean"), _want(r, "dropout", "std")
    spec = r.case_specs.get("dropout")
    p = float(spec.params.get("ctor", {}).get("dropout", 0.0)) if spec else 0.0
    if isinstance(ev, torch.Tensor) and isinstance(mean, torch.Tensor) and isinstance(spread, torch.Tensor) \
            and ev.shape == mean.shape == spread.shape and 0 < p < 1 and "dropout_in_eval" not in found:
        def near(factor: float) -> bool:  # the draws of a mean scaled by `factor` spread `factor` times as much
            return dropout_mean_close(mean, factor * ev, factor * spread, int(spec.params["copies"]))

        if not near(1.0):
            if near(1 - p):
                found.append("dropout_no_rescale")
            elif near((1 - p) ** 2):
                found.append("dropout_rescale_wrong")
    return found + _dropout_placement(r)


def _dropout_placement(r: Outcome, heads: int = 1, shift: float = 0.0) -> list[str]:
    """Where dropout acts, from the exact placement cases (checks.causal_attention.placed_on_the_weights: x = I,
    each head's values [I | 2I], out_proj of weight I and bias `shift` in step 11), once the eval output is right.
    Per attention weight w[i, j] the training output holds two copies a (× 1) and b (× 2): dropout on the weights
    drops or scales both together; on the context vectors each copy alone; on the values each copy alone but for
    every query i at once (one value row serves them all); after out_proj each output entry alone, bias included;
    on the scores the rows still sum to 1 but are not dropped-or-scaled weights."""
    ev, tr, want = _got(r, "place_eval"), _got(r, "place"), _want(r, "place_eval")
    if not isinstance(tr, torch.Tensor) or not _close(ev, want) or tr.dim() != 3 or tr.shape[1:] != ev.shape[1:]:
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


def _shared_heads(r: Outcome) -> bool:
    """One head object repeated: fewer distinct parameters than heads × 3, seen in the structure facts, or
    (as the grader cannot then load each head's weights) in the probe's own report of the parameters that
    exist: only heads.0's, although num_heads > 1."""
    for case in ("fwd", "short"):
        s, want = _got(r, case, "structure"), _want(r, case, "structure")
        if isinstance(s, dict) and isinstance(want, dict) and isinstance(s.get("n_unique_params"), int) \
                and s["n_unique_params"] < want.get("n_unique_params", 0):
            return True
        res = r.learner.get(case)
        heads = int(r.case_specs[case].params.get("ctor", {}).get("num_heads", 1)) if case in r.case_specs else 1
        # the probe's structured report (its template and parameters), never the English text made of them
        if res is not None and res.status == "wrong_type" and heads > 1 and res.msgid in (probes.NO_PARAMETER,
                                                                                        probes.NO_ROLE):
            asked = str(res.params.get("name", res.params.get("roles", "")))
            has = str(res.params.get("have", ""))
            if re.match(r"heads\.[1-9]", asked) and set(re.findall(r"(?:^|, )heads\.(\d+)\.", has)) == {"0"}:
                return True
    return False


def _wrapper(r: Outcome) -> list[str]:
    found = ["heads_share_weights"] if _shared_heads(r) else []

    def chunks(r: Outcome, case: str) -> list[torch.Tensor] | None:
        ref = _want(r, case)
        if not isinstance(ref, torch.Tensor):
            return None
        return list(ref.split(int(r.case_specs[case].params["ctor"]["d_out"]), dim=-1))

    def cat_wrong(r: Outcome, case: str) -> list[torch.Tensor] | None:
        parts = chunks(r, case)
        return None if parts is None or len(parts) < 2 else [torch.cat(parts, dim=d) for d in (0, 1)]

    def stacked(r: Outcome, case: str) -> list[torch.Tensor] | None:
        parts = chunks(r, case)
        return None if parts is None else [torch.stack(parts, dim=d) for d in range(parts[0].dim() + 1)]

    for diag_id, model in (("heads_cat_wrong_dim", cat_wrong), ("heads_stacked", stacked)):
        if _matches(r, ["fwd", "short", "one"], model):
            found.append(diag_id)
    return found


def _mha(r: Outcome) -> list[str]:
    models = [*CORE_MODELS, *MASK_MODELS, ("heads_merge_without_transpose", {"merge": "no_transpose"})]
    found = _by_models(r, ["fwd", "short", "one", "leak"], models,
                       lambda r, c, o: _attention(r, c, o, linear=True, multi=True))
    return found + _mask_not_cut(r) + _dropout_placement(r, PLACE_HEADS, PLACE_SHIFT)


STEPS: dict[str, Callable[[Outcome], list[str]]] = {
    "softmax": _softmax,
    "all_tokens": _all_tokens,
    "self_attention_v1": _v1,
    "self_attention_v2": _v2,
    "causal_mask": _causal_mask,
    "dropout": _dropout,
    "causal_attention": _causal_attention,
    "multihead_wrapper": _wrapper,
    "multihead_attention": _mha,
}


def silent_roles(r: Outcome) -> list[str]:
    """The learner's parameters that play query, key or value under names that say nothing (grader.worker.roles
    took them in the order they are defined), when some output of theirs differs from the reference's."""
    silent: set[str] = set()
    wrong = False
    for case in r.case_specs:
        facts = _got(r, case, "structure")
        if isinstance(facts, dict) and isinstance(facts.get("roles"), dict):
            for ref, entries in facts["roles"].items():
                if roles.kinds_of(str(ref)) in (["q"], ["k"], ["v"]) and isinstance(entries, list):
                    # names the learner chose (add_module takes any string): quoted only cleaned and capped
                    silent |= {clean(str(e[0]), 60) for e in entries
                               if isinstance(e, list) and e and roles.kinds_of(str(e[0])) is None}
            wrong = wrong or not _close(_got(r, case), _want(r, case))
    return sorted(silent)[:6] if len(silent) >= 2 and wrong else []


def changed_in_place(r: Outcome) -> bool:
    """A function of the step changed a tensor it was given (the call probe's `inputs_modified`, a fact the learner's
    code reports: it only words a diagnosis, never a point)."""
    return any(res.status == "ok" and res.facts.get("inputs_modified") is True for res in r.learner.values())


def ids(outcome: Outcome) -> list[str]:
    """The classic mistakes the learner's outputs show, by id (empty when none is recognised)."""
    fn = STEPS.get(outcome.step)
    try:
        with torch.no_grad():
            found = fn(outcome) if fn is not None else []
            if changed_in_place(outcome):
                found.append("input_changed_in_place")
        if silent_roles(outcome):
            found.append("roles_by_order")
    except Exception:  # a diagnosis is a bonus: it must never cost the learner their report
        return []
    return list(dict.fromkeys(found))


def diagnose(outcome: Outcome, lang: str = "en") -> list[dict[str, str]]:
    """[{"id", "message"}] for the step of `outcome`, worded in `lang` ("en" or "zh")."""
    out = []
    for i in ids(outcome):
        text = message(i, outcome.step, lang)
        if i == "roles_by_order":
            text = text.replace("{names}", ", ".join(silent_roles(outcome)))
        out.append({"id": i, "message": text})
    return out
