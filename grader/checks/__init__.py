"""Hidden checks: one module per step, each declaring its cases (seeded inputs) and its checks.

A step module defines
  @cases("step_id")   def _(g: Gen) -> dict[str, Case]   the probes to run, with inputs
  @check("step_id", N_("what is checked"), points=1)  def _check(r: Outcome) -> None   raises Failed

Check names are msgids marked N_() (translated when the report is built); Failed messages are written
with grader.i18n._ and run in the report's language (runner.py sets it per job from Outcome.lang).

Checks run under pytest in the trusted process only (grader/grading/runner.py).
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.i18n import N_, _
from grader.registry import STEPS

VOUCH_ATOL, VOUCH_RTOL = 1e-5, 1e-4  # as grader.checks.expect.close

# what a check says while no output it reads is right yet (Outcome.require_work, Outcome._vouch): the concrete
# finding, if it made one, and that the point follows; never why a fact is not believed yet (issue 26)
NOT_YET = N_("nothing wrong found here; this point follows once your outputs match the reference (none does yet)")
NOT_YET_AFTER = N_("{finding} — once that is fixed, this point follows when your outputs match the reference")


class Failed(AssertionError):
    """A check's verdict, worded for the learner."""


class Waiting(Failed):
    """A verdict that already says the point waits for right outputs (NOT_YET, common.shown_by): said as it is."""


@dataclass
class Case:
    probe: str
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0  # torch's global seed in the worker just before the probe runs
    # no draw of the secret's generator reaches it (the book's example): its answer can be known in advance, so it
    # proves no work (set by `plans`)
    public: bool = False

    def subject(self) -> str:
        """What the case exercises: the function or class it calls (several cases may call the same one)."""
        return str(self.params.get("fn") or self.params.get("cls") or self.probe)


@dataclass
class CheckSpec:
    step: str
    name: str
    fn: Callable[[Outcome], None]
    points: float = 1.0

    @property
    def key(self) -> str:
        return f"{self.step}::{self.name}"


CASES: dict[str, Callable[[Gen], dict[str, Case]]] = {}
CHECKS: dict[str, list[CheckSpec]] = {}
PROOFS: dict[str, list[Callable[[Outcome], None]]] = {}  # per step: its proofs of work (`proof`)


def cases(step: str) -> Callable:
    def deco(fn: Callable[[Gen], dict[str, Case]]) -> Callable:
        CASES[step] = fn
        return fn

    return deco


def proof(step: str) -> Callable:
    """Register a proof of work: a test (raising on failure, reading tensors only) that code computing nothing
    cannot pass, for outputs that never equal the reference's exactly (a random mask). When it passes, it vouches
    like a right output for the functions whose cases it read (Outcome.some_output_right). Not a check: no point."""
    def deco(fn: Callable[[Outcome], None]) -> Callable:
        PROOFS.setdefault(step, []).append(fn)
        return fn

    return deco


def check(step: str, name: str, points: float = 1.0) -> Callable:
    """Register a check. Whatever it tests, it earns its point only once some output of the step equals the
    reference's: a property alone ("no token sees the future", "leaves its input unchanged", "no loops") is
    also true of code that computes nothing, and a fact can be forged (Outcome._vouch)."""
    def deco(fn: Callable[[Outcome], None]) -> Callable:

        def gated(r: Outcome) -> None:
            r.reading = set()  # the cases this check reads: the work that vouches must be theirs (require_work)
            r.pending = set()  # the facts it read that no right output vouches for yet (Outcome._vouch)
            try:
                fn(r)
            except Waiting:
                raise
            except Failed as exc:
                if r.pending:  # the finding, whatever the facts: a forged fact only changes its words
                    raise Failed(_(NOT_YET_AFTER).format(finding=str(exc).rstrip(". 。"))) from None
                raise
            except Exception:  # an odd fact (its shape is the learner's) before any right output: no finding
                if r.pending:
                    raise Waiting(_(NOT_YET)) from None
                raise
            if r.pending:  # the facts hold, but nothing shows the work yet: they never earn a point alone
                raise Waiting(_(NOT_YET))
            r.require_work()

        gated.__name__ = gated.__qualname__ = getattr(fn, "__name__", "check")
        CHECKS.setdefault(step, []).append(CheckSpec(step, name, gated, points))
        return fn

    return deco


class Gen:
    """Private generator for one step: seeded by HMAC(secret, step id), never torch's global RNG."""

    def __init__(self, secret: str, step: str):
        digest = hmac.new(secret.encode(), f"attn-kata/{step}".encode(), hashlib.sha256).digest()
        self.g = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))

    def rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=self.g)

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=self.g) * scale

    def int(self, low: int, high: int) -> int:
        """Uniform integer in [low, high]."""
        return int(torch.randint(low, high + 1, (1,), generator=self.g))

    def distinct(self, draw: Callable[[], tuple[int, ...]], *fixed: int) -> tuple[int, ...]:
        """`draw()` again until its sizes are pairwise distinct and distinct from `fixed` (sizes the case sets):
        d_in, d_out, num_tokens, context_length, num_heads and head_dim then never coincide, so a bug that
        swaps two of them loses its points under every secret. Deterministic: only this generator is drawn."""
        for _attempt in range(10_000):
            sizes = draw()
            if len({*sizes, *fixed}) == len(sizes) + len(fixed):
                return sizes
        raise ValueError("no pairwise distinct sizes in these ranges")

    def seed(self) -> int:
        return int(torch.randint(0, 2**31 - 1, (1,), generator=self.g))

    def weights(self, shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
        """Weights for a module, named `w.<parameter>` as the probes expect."""
        return {f"w.{n}": self.randn(*s, scale=0.5) for n, s in shapes.items()}


def book_inputs() -> torch.Tensor:
    """The chapter's `inputs`: torch.manual_seed(123); torch.rand(6, 3) (drawn privately)."""
    return torch.rand(6, 3, generator=torch.Generator().manual_seed(123))


# "Your journey starts with one step": the embeddings printed in book §3.3.1
JOURNEY = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                        [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])


@dataclass
class CaseResult:
    status: str  # ok | not_started | missing | wrong_type | error | memory
    tensors: dict[str, torch.Tensor]
    facts: dict[str, Any]
    message: str = ""
    where: dict[str, Any] | None = None
    exception: str = ""
    msgid: str = ""  # a known template (grader.worker.probes.MESSAGES) for `message`, worded in the report's language
    params: dict[str, Any] = field(default_factory=dict)
    # a reference result's answer to Outcome.trivial, with the Case it was computed for: every submission graded
    # under one secret shares the reference's results, so it is computed once per case, not once per check
    trivial_for: tuple[Case, bool] | None = field(default=None, repr=False, compare=False)

    def text(self) -> str:
        """`message` in the current language (the worker sends English plus a msgid and its parameters)."""
        if self.msgid:
            try:
                return _(self.msgid).format(**self.params)
            except (KeyError, IndexError, ValueError, AttributeError):
                pass
        return self.message


@dataclass
class Outcome:
    """What a check sees: the learner's and the reference's results for each case of its step."""

    step: str
    case_specs: dict[str, Case]
    learner: dict[str, CaseResult]
    reference: dict[str, CaseResult]
    static: dict[str, Any] = field(default_factory=dict)  # facts read from the source, in this process
    lang: str = "en"  # the report's language: checks word their messages in it (grader.i18n)
    _behaves: dict[str, bool] = field(default_factory=dict, repr=False)
    reading: set[str] = field(default_factory=set, repr=False)  # the learner's cases read by the current check
    pending: set[str] = field(default_factory=set, repr=False)  # facts read by the current check, not vouched yet
    _proved: list[set[str]] | None = field(default=None, repr=False)  # what each passing proof read (its subjects)
    _right: dict[frozenset[str], bool] = field(default_factory=dict, repr=False)  # some_output_right, without proofs

    def _get(self, results: dict[str, CaseResult], case: str, key: str, who: str) -> Any:
        res = results.get(case)
        if res is None:
            raise Failed(_("no result for case {case}").format(case=case))
        if res.status != "ok":
            raise Failed(describe_failure(res) if who == "learner"
                         else _("reference failed: {message}").format(message=res.message))
        if who == "learner":
            self.reading.add(case)
        if key in res.tensors:
            return res.tensors[key]
        if key in res.facts:
            if who == "learner":
                self._vouch(case, key)
            return res.facts[key]
        raise Failed(_("no `{key}` in the result").format(key=key))

    def _vouch(self, case: str, key: str) -> None:
        """A fact (parameter and buffer names, "inputs unchanged", which gradients exist) is reported by code the
        learner controls: a module can override named_buffers(), a submission can patch the probe. So it is
        believed only once some case of the same function shows outputs equal to the reference's, which no amount
        of forging gives without doing the work (see `some_output_right`). Forging a fact then earns nothing that
        the work itself did not. Until then the fact is still read, to word a failure concretely ("1 heads,
        expected num_heads = 2"), and the check fails whatever it finds (`check`: NOT_YET, NOT_YET_AFTER)."""
        if not self.some_output_right({case}):
            self.pending.add(key)

    def require_work(self) -> None:
        """Some case of what the check read must show outputs equal to the reference's (see `check`)."""
        if not self.some_output_right(self.reading):
            raise Waiting(_(NOT_YET))

    def some_output_right(self, about: set[str] | frozenset[str] = frozenset()) -> bool:
        """Has the learner's code done the work: does some case equal the reference's outputs? Only a case that
        calls the same function or class as the cases in `about` (any of the step's when empty: a check of the
        source), whose inputs come from the secret (a lookup table of the book's printed example proves
        nothing), and that has outputs (a constructor alone computes nothing; a random case never equals them
        exactly, so only deterministic ones vouch). One function's right outputs never vouch for another's
        properties: uniform weights do sum to 1, zero weights do hide the future."""
        subjects = frozenset(self.case_specs[c].subject() for c in about if c in self.case_specs)
        right = self._right.get(subjects)
        if right is None:  # every check asks again: behaves and trivial never change for this outcome
            right = self._right[subjects] = any(
                self.behaves(c) and not self.trivial(c) for c, spec in self.case_specs.items()
                if not spec.public and (not subjects or spec.subject() in subjects))
        if right:
            return True
        return any(not subjects or read & subjects for read in self._proofs())

    def trivial(self, case: str) -> bool:
        """Is the reference's answer one that needs no work: each output a piece of the case's inputs (dropout
        with training=False returns its input, one token's context vector is that token's row) or all zeros or
        all ones (one token's attention weight)? See `no_work`."""
        ref, spec = self.reference.get(case), self.case_specs[case]
        if ref is None:
            return True
        if ref.trivial_for is not None and ref.trivial_for[0] is spec:
            return ref.trivial_for[1]
        inputs = list(spec.inputs.values())
        answer = all(no_work(t, inputs) for t in ref.tensors.values())
        ref.trivial_for = (spec, answer)
        return answer

    def _proofs(self) -> list[set[str]]:
        """For each of the step's proofs of work (`proof`) that passes: the subjects of the cases it read. Computed
        once; while they run, no proof vouches for a fact a proof reads."""
        if self._proved is None:
            self._proved = []
            saved, saved_pending = self.reading, self.pending
            for fn in PROOFS.get(self.step, []):
                self.reading, self.pending = set(), set()
                try:
                    fn(self)
                except Exception:  # a proof that fails, however it fails, proves nothing
                    continue
                if self.pending:  # a proof that read a fact nothing vouches for proves nothing either
                    continue
                self._proved.append({self.case_specs[c].subject() for c in self.reading if c in self.case_specs})
            self.reading, self.pending = saved, saved_pending
        return self._proved

    def behaves(self, case: str) -> bool:
        """Do the learner's tensors for `case` match every tensor of the reference's, in shape and value?"""
        if case in self._behaves:
            return self._behaves[case]
        mine, ref = self.learner.get(case), self.reference.get(case)
        ok = mine is not None and ref is not None and mine.status == "ok" and ref.status == "ok" and bool(ref.tensors)
        if ok:
            for name, want in ref.tensors.items():
                got = mine.tensors.get(name)
                if got is None or got.shape != want.shape or got.dtype.is_complex or (
                        not got.is_floating_point() and got.dtype != want.dtype):
                    ok = False
                    break
                if got.dtype == want.dtype and torch.equal(got, want):  # equal values are close (NaN never equal)
                    continue
                if not torch.allclose(got.to(torch.float64), want.to(torch.float64), atol=VOUCH_ATOL,
                                      rtol=VOUCH_RTOL, equal_nan=True):
                    ok = False
                    break
        self._behaves[case] = ok
        return ok

    def got(self, case: str, key: str = "out") -> Any:
        return self._get(self.learner, case, key, "learner")

    def want(self, case: str, key: str = "out") -> Any:
        return self._get(self.reference, case, key, "reference")

    def has(self, case: str, key: str) -> bool:
        res = self.learner.get(case)
        return res is not None and res.status == "ok" and (key in res.tensors or key in res.facts)

    def inputs(self, case: str) -> dict[str, torch.Tensor]:
        return self.case_specs[case].inputs


NO_WORK_STARTS = 64  # places in one arrangement of an input where a piece equal to an answer may start
NO_WORK_BUDGET = 4096  # pieces compared, per answer and input: past it the answer counts as work (as before)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a, b, atol=VOUCH_ATOL, rtol=VOUCH_RTOL)  # a = the candidate, b = the answer (behaves)


def _extents(start: tuple[int, ...], shape: tuple[int, ...], n: int) -> Iterator[tuple[int, ...]]:
    """Block sizes from `start` within `shape` holding `n` elements together (a size of 1 is an index)."""
    if not shape:
        if n == 1:
            yield ()
        return
    for e in range(1, min(n, shape[0] - start[0]) + 1):
        if n % e == 0:
            for rest in _extents(start[1:], shape[1:], n // e):
                yield (e, *rest)


def no_work(answer: torch.Tensor, inputs: list[torch.Tensor]) -> bool:
    """Can `answer` be had without computing anything, within the tolerance that `Outcome.behaves` allows? That
    is: empty, or a broadcast of a constant 0 or 1, or a broadcast, reshape or transposition of a block of one
    input (the whole input, a slice, a row, a column, one element). Code that returns such a thing does no
    work (`inputs[0]`, `inputs.T`, `x[:, :1].expand(...)`), so an answer the reference gets this way proves
    nothing when the learner's equals it. Blocks are contiguous (slices of step 1) of any arrangement of the
    input's dimensions; the search is bounded (NO_WORK_STARTS, NO_WORK_BUDGET), and past its bound an answer
    counts as work, as every answer did before the class was widened."""
    t = answer.detach().to(torch.float64)
    if t.numel() == 0:
        return True
    for d in range(t.dim()):  # a broadcast: along a dimension where every slice is the first, keep the first
        if t.shape[d] > 1 and _close(t.narrow(d, 0, 1).expand_as(t), t):
            t = t.narrow(d, 0, 1)
    flat = t.reshape(-1)
    if flat.numel() == 1 and any(_close(torch.full_like(flat, c), flat) for c in (0.0, 1.0)):
        return True
    return any(_piece_of(flat, x) for x in inputs)


def _piece_of(flat: torch.Tensor, x: torch.Tensor) -> bool:
    """Is `flat` (an answer, flattened) the flattening of a block of `x` in some order of its dimensions?"""
    x = x.detach()
    if x.numel() < flat.numel() or x.is_complex():
        return False
    x = x.to(torch.float64)
    budget = NO_WORK_BUDGET
    orders = itertools.permutations(range(x.dim())) if x.dim() <= 4 else [tuple(range(x.dim()))]
    for order in orders:
        arranged = x.permute(order)
        first = torch.isclose(arranged, flat[0].expand_as(arranged), atol=VOUCH_ATOL, rtol=VOUCH_RTOL)
        for start in first.nonzero()[:NO_WORK_STARTS].tolist():
            for ext in _extents(tuple(start), tuple(arranged.shape), flat.numel()):
                block = arranged[tuple(slice(s, s + e) for s, e in zip(start, ext, strict=True))]
                if _close(block.reshape(-1), flat):
                    return True
                budget -= 1
                if budget <= 0:
                    return False
    return False


def describe_failure(res: CaseResult) -> str:
    if res.status == "not_started":
        return _("not implemented yet (raises NotImplementedError)")
    if res.status in ("missing", "wrong_type"):
        return res.text()
    if res.exception == "MalformedResult":  # refused by grader.sandbox.wire: the message says why
        return res.message
    where = ""
    if res.where:
        where = _(" at {file} line {line}: `{code}`").format(file=res.where.get("file"), line=res.where.get("line"),
                                                            code=res.where.get("code", ""))
    if res.status == "memory":
        return _("ran out of memory{where}").format(where=where)
    return _("your code raised {exception}{where}: {message}").format(exception=res.exception, where=where,
                                                                     message=res.message)


def load_all() -> None:
    for s in STEPS:
        importlib.import_module(f"{__name__}.{s.id}")


class _Drawn(int):
    """An integer drawn from the secret's generator; what is computed from it stays marked."""

    def _op(name: str) -> Callable:  # type: ignore[misc] - a class-body helper
        def op(self: int, *other: Any) -> Any:
            v = getattr(int, name)(self, *other)
            return _Drawn(v) if type(v) is int else v
        return op

    for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
                  "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__neg__", "__abs__"):
        locals()[_name] = _op(_name)
    del _name, _op


class _Moved(Gen):
    """The same draws in the same order (so every choice the plan makes from them is the same), each value
    marked: tensors moved to other values, integers wrapped as _Drawn. A case that comes out equal and unmarked
    drew nothing from the secret."""

    def rand(self, *shape: int) -> torch.Tensor:
        return (super().rand(*shape) + 0.5) % 1.0

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return super().randn(*shape, scale=scale) + scale

    def int(self, low: int, high: int) -> int:
        return _Drawn(super().int(low, high))


def _marked(v: Any) -> bool:
    if isinstance(v, _Drawn):
        return True
    if isinstance(v, dict):
        return any(_marked(x) for x in v.values())
    return isinstance(v, list | tuple) and any(_marked(x) for x in v)


def _same(a: Case, b: Case) -> bool:
    """The same probe, parameters and inputs, no parameter drawn (the seed aside: a case that differs only there
    is counted public, so it vouches for nothing, the safe side)."""
    if a.probe != b.probe or a.params != b.params or _marked(b.params) or a.inputs.keys() != b.inputs.keys():
        return False
    return all(x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
               for x, y in ((a.inputs[k], b.inputs[k]) for k in a.inputs))


def plans(secret: str) -> dict[str, dict[str, Case]]:
    """Each step's cases under `secret`, those its answer can be known without it (Case.public) marked."""
    load_all()
    out = {}
    for s in STEPS:
        cases = CASES[s.id](Gen(secret, s.id))
        moved = CASES[s.id](_Moved(secret, s.id))
        for name, case in cases.items():
            case.public = name in moved and _same(case, moved[name])
        out[s.id] = cases
    return out
