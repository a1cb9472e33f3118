"""The vouching rule, the project's central idea: a fact the learner's code reports counts only once the step's
outputs are right.

Every check reads two kinds of evidence. Tensors (outputs, gradients) are compared with the reference's: code
cannot fake an output equal to the reference's without computing it, because the inputs are drawn from a secret
it never sees. Facts ("the inputs were left unchanged", "these are the parameter names", "no token sees the
future", "these gradients exist") are reported by the worker, in a process that runs the learner's code: the
code can override `named_buffers()`, patch the probe, or return anything at all. And many properties are true of
code that computes nothing: uniform weights do sum to 1, zero weights do hide the future.

So a check earns its point only when (1) what it tests holds and (2) some case of the same function or class
shows outputs equal to the reference's (`Outcome.some_output_right`): a case whose inputs come from the secret
(`Case.public` is False), whose answer needs work (`no_work`: not a slice of the inputs, not all zeros or ones),
and which has outputs. A fact read before that is still read, to word a failure concretely ("1 heads, expected
num_heads = 2"), but the check fails with NOT_YET or NOT_YET_AFTER whatever it finds (`vouched`). Forging a fact
then earns nothing the work itself did not.

Outputs that are random by design (a dropout mask) never equal the reference's; a step proves its work there with
a `proof`: a test that code computing nothing cannot pass. When it passes, it vouches like a right output for
the functions whose cases it read.

Trusted side: runs in the grading process only (grader/grading/runner.py), on results the worker sent.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from grader import limits
from grader.checks.model import Case, CaseResult, Failed, Waiting, describe_failure
from grader.i18n import N_, _, said

VOUCH_ATOL, VOUCH_RTOL = 1e-5, 1e-4  # as grader.checks.expect.close

# what a check says while no output it reads is right yet (Outcome.require_work, Outcome._vouch): the concrete
# finding, if it made one, and that the point follows; never why a fact is not believed yet (issue 26)
NOT_YET = N_("this point waits until your outputs match the reference (none does yet)")
NOT_YET_AFTER = N_("{finding} — once that is fixed, this point follows when your outputs match the reference")

PROOFS: dict[str, list[Callable[[Outcome], None]]] = {}  # per step: its proofs of work (`proof`)


def proof(step: str) -> Callable:
    """Register a proof of work: a test (raising on failure, reading tensors only) that code computing nothing
    cannot pass, for outputs that never equal the reference's exactly (a random mask). When it passes, it vouches
    like a right output for the functions whose cases it read (Outcome.some_output_right). Not a check: no point."""
    def deco(fn: Callable[[Outcome], None]) -> Callable:
        PROOFS.setdefault(step, []).append(fn)
        return fn

    return deco



def vouched(fn: Callable[[Outcome], None]) -> Callable[[Outcome], None]:
    """`fn`, a check, as it is registered: whatever it tests, it earns its point only once some output of the step
    equals the reference's: a property alone ("no token sees the future", "leaves its input unchanged") is also
    true of code that computes nothing, and a fact can be forged (Outcome._vouch)."""

    def gated(r: Outcome) -> None:
        r.reading = set()  # the cases this check reads: the work that vouches must be theirs (require_work)
        r.pending = set()  # the facts it read that no right output vouches for yet (Outcome._vouch)
        try:
            fn(r)
        except Waiting:
            raise
        except Failed as exc:
            if r.pending:  # the finding, whatever the facts: a forged fact only changes its words
                raise Failed(_(NOT_YET_AFTER).format(finding=said(exc).rstrip(". 。"))) from None
            raise
        except Exception:  # an odd fact (its shape is the learner's) before any right output: no finding
            if r.pending:
                raise Waiting(_(NOT_YET)) from None
            raise
        if r.pending:  # the facts hold, but nothing shows the work yet: they never earn a point alone
            raise Waiting(_(NOT_YET))
        r.require_work()

    gated.__name__ = gated.__qualname__ = getattr(fn, "__name__", "check")
    return gated


@dataclass
class Outcome:
    """What a check sees: the learner's and the reference's results for each case of its step."""

    step: str
    case_specs: dict[str, Case]
    learner: dict[str, CaseResult]
    reference: dict[str, CaseResult]
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
        if ok and mine is not None and ref is not None:  # (what `ok` says, spelled out for the type checker)
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


NO_WORK_STARTS = limits.VOUCH_STARTS  # places in one arrangement of an input where a piece equal to an answer may start
NO_WORK_BUDGET = limits.VOUCH_BUDGET  # pieces compared, per answer and input: past it the answer counts as work


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
