"""Grade one submission: ingest -> worker (untrusted) -> checks (trusted) -> Report."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from grader import checks, i18n, limits
from grader.checks import Case, CaseResult, Outcome, expect, structure
from grader.grading import diagnose, flags, ingest, pictures
from grader.grading.runner import run_jobs
from grader.i18n import _
from grader.pool.session import (
    InfrastructureError,
    WeakSandbox,
    Worker,
    WorkerHandle,
    WorkerLost,
    missing_layers,
    refusal,
    required_layers,
)
from grader.registry import BY_ID, STEPS, Step
from grader.report import CheckResult, Report, StepResult, clean
from grader.sandbox import channel, policy, wire
from grader.settings import DEFAULT_TIMEOUT, LOAD_TIMEOUT, backend, grader_version, portable_reason, resolve_secret
from grader.worker import probes

if sys.platform == "linux":
    from grader.sandbox import landlock

__all__ = ["DEFAULT_TIMEOUT", "LOAD_TIMEOUT", "Started", "collect", "grade", "grade_many", "grader_version",
           "judge", "prepared", "resolve_secret", "start"]

# StepResult.detail says what happened: passed, wrong_answer, wrong_type, timeout, memory_limit, crashed,
# no_result, import_error, rejected_input, not_implemented, not_started (infrastructure errors raise instead)
DETAIL_FOR_LOSS = {"timeout": "timeout", "crashed": "crashed", "unreadable": "no_result"}
BUDGET_FACTOR = limits.SUBMISSION_BUDGET  # a submission's wall-clock budget for all its steps, in per-step time-outs
# numbers a step's answers may hold, kept until the chunk is judged: this many times the reference's, or at least
# MIN_KEPT. A right answer holds exactly the reference's; a batch's grading process keeps a chunk's answers, and
# answers near the channel's 64 MiB cap once took one process past 4 GB (red team 8)
KEPT_FACTOR, MIN_KEPT = limits.ANSWER_KEPT_FACTOR, limits.ANSWER_MIN_KEPT


@functools.lru_cache(maxsize=8)
def prepared(secret: str) -> tuple[dict[str, dict[str, Case]], dict[str, dict[str, CaseResult]]]:
    """Cases (inputs from the secret) and the reference's results for them, computed here, once."""
    from grader.grading import reference
    from grader.worker import serve as worker

    plans = checks.plans(secret)
    ref = reference.namespace()
    results: dict[str, dict[str, CaseResult]] = {}
    for step_id, cases in plans.items():
        results[step_id] = {}
        # a step that builds on earlier ones runs on the public stand-ins, as the learner's does in the worker
        with reference.standins_for(ref, BY_ID[step_id]) as view:
            for name, case in cases.items():
                doc, tensors = worker.run_case(view, _as_doc(name, case), case.inputs, set())
                results[step_id][name] = _case_result(doc, tensors)
        probes.clear_kept()  # as the worker does after each step (grader.worker.serve)
    torch.manual_seed(0)
    gc.collect()
    gc.freeze()  # torch's and the reference's objects live for good: later collections skip them
    # what the reference's runs freed (step 14's 1024 x 1024 masks: ~10 MB) goes back: a grading process holds its
    # results while its worker runs, and one Gradescope container holds both
    if sys.platform == "linux":
        landlock.release_free_memory()
    return plans, results


@functools.lru_cache(maxsize=64)
def prepared_own_build(secret: str, step_id: str) -> dict[str, CaseResult]:
    """For a step that builds on earlier ones: the reference's results with the real earlier steps (not the
    stand-ins), for a learner whose code builds its own (a wrapper of their own for exercise 3.2): trusted side
    only, never sent anywhere. `judge` grades such a step against whichever of the two its outputs match, and
    computes this only when the stand-ins' results do not already match every case (then they win anyway)."""
    from grader.grading import reference
    from grader.worker import serve as worker

    plans, _refs = prepared(secret)
    ref = reference.namespace()
    results: dict[str, CaseResult] = {}
    for name, case in plans[step_id].items():  # each case reseeds torch (run_case): steps are independent
        doc, tensors = worker.run_case(ref, _as_doc(name, case), case.inputs, set())
        results[name] = _case_result(doc, tensors)
    probes.clear_kept()
    torch.manual_seed(0)
    return results


def _agree(learner: dict[str, CaseResult], ref: dict[str, CaseResult]) -> int:
    """How many of the learner's cases equal the reference results `ref`."""
    n = 0
    for name, mine in learner.items():
        theirs = ref.get(name)
        if theirs is None or mine.status != "ok" or not theirs.tensors:
            continue
        same = all(k in mine.tensors and isinstance(mine.tensors[k], torch.Tensor)
                   and mine.tensors[k].shape == t.shape and mine.tensors[k].dtype == t.dtype
                   and bool(torch.allclose(mine.tensors[k], t, atol=1e-5, rtol=1e-4))
                   for k, t in theirs.tensors.items())
        n += same
    return n


def _matching(learner: dict[str, CaseResult], first: dict[str, CaseResult],
              other: Callable[[], dict[str, CaseResult]]) -> dict[str, CaseResult]:
    """The reference results that the most of the learner's cases equal: `first`, or `other()` (the first on a
    tie). `other` is computed only where it could win: `first` matching every case that ran is a tie at best."""
    mine = _agree(learner, first)
    if mine == sum(r.status == "ok" for r in learner.values()):
        return first
    theirs = other()
    return theirs if _agree(learner, theirs) > mine else first


@functools.lru_cache(maxsize=8)
def prepared_requests(secret: str) -> dict[str, bytes]:
    """Each step's request to a worker, encoded once per secret."""
    plans, _refs = prepared(secret)
    return {s.id: request(s, plans[s.id]) for s in STEPS}


def _as_doc(name: str, case: Case) -> dict[str, Any]:
    return {"name": name, "probe": case.probe, "params": case.params, "seed": case.seed}


def _case_result(entry: dict[str, Any], tensors: dict[str, torch.Tensor]) -> CaseResult:
    """One case's result, from the reference or from a worker: only plain, expected fields are kept."""
    facts = entry.get("facts")
    where = entry.get("where")
    return CaseResult(status=str(entry.get("status")), tensors=tensors,
                      facts=facts if isinstance(facts, dict) else {},
                      message=clean(str(entry.get("message", ""))), where=where if isinstance(where, dict) else None,
                      exception=clean(str(entry.get("exception", "")), 80), **_msgid(entry))


def _msgid(entry: dict[str, Any]) -> dict[str, Any]:
    """A worker's message template, kept only if it is one of ours (probes.MESSAGES) with plain parameters."""
    msgid, params = entry.get("msgid"), entry.get("params")
    if msgid not in probes.MESSAGES or not isinstance(params, dict):
        return {}
    if not all(isinstance(k, str) and isinstance(v, str | int | float) for k, v in params.items()):
        return {}
    return {"msgid": msgid, "params": {k: clean(v, 200) if isinstance(v, str) else v for k, v in params.items()}}


def request(step: Step, cases: dict[str, Case]) -> bytes:
    """A step's request: the names it reads, the earlier names it builds on (the worker puts the public stand-ins
    of grader.worker.standins there), and its cases' inputs. Never any reference code or output."""
    tensors = {f"{name}/{k}": v for name, case in cases.items() for k, v in case.inputs.items()}
    doc = {"names": list(step.names), "uses": list(step.uses), "cases": [_as_doc(n, c) for n, c in cases.items()]}
    return channel.encode(tensors, doc)


def _parse_response(cases: dict[str, Case], tensors: dict[str, torch.Tensor], doc: Any) -> dict[str, CaseResult]:
    """Take only what we asked for, checked against the schema (grader.sandbox.wire) before anything reads it: a case
    the worker left out is 'no result'; a malformed case, or a malformed answer as a whole (then every
    case), is an error that says the worker sent a malformed result."""
    try:
        entries, by_case = wire.validate_answer(doc, tensors, cases)
    except wire.Malformed as exc:
        return {name: _malformed(exc) for name in cases}
    out: dict[str, CaseResult] = {}
    for name in cases:
        entry = entries.get(name)
        if entry is None:
            out[name] = CaseResult("error", {}, {}, message=_("no result"), exception="NoResult")
        elif isinstance(entry, wire.Malformed):
            out[name] = _malformed(entry)
        else:
            out[name] = _own_stub(_case_result(entry, by_case.get(name, {})))
    return out


# the kata's stub, `raise NotImplementedError  # your code here`, or any such raise the learner wrote themselves
OWN_RAISE = re.compile(r"raise\s+NotImplementedError\b")


def _own_stub(res: CaseResult) -> CaseResult:
    """"Not started" only where the learner's own code raised NotImplementedError (the deepest line of their code is
    the raise itself); raised from inside a library (torch's FlexAttention has no backward on CPU) it is an error,
    said with its message."""
    if res.status == "not_started":
        code = str((res.where or {}).get("code", ""))
        if not OWN_RAISE.match(code.strip()):
            res.status = "error"
    return res


def _malformed(exc: wire.Malformed) -> CaseResult:
    return CaseResult("error", {}, {}, message=clean(exc.detail), exception=wire.MALFORMED)


def _mentions(sub: ingest.Submission, unit: str | None, names: Iterable[str]) -> bool:
    """Could the load error have stopped a step's names from being defined? A notebook runs every cell, whatever
    the others did, so a step none of its cells names is not started (however many cells raise); one it names may
    be what the error stopped. A module stops at its first error: every step it should define is that error."""
    if sub.kind != "ipynb":
        return True
    words = re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b")
    return any(u.module == unit and words.search(u.text) for u in sub.units)


def _load_error_text(err: dict[str, Any]) -> str:
    if not isinstance(err, dict):  # a hello not checked by wire.validate_hello
        return wire.Malformed("hello.errors", "an entry is not an object").detail
    where = err.get("where") or {}
    where = where if isinstance(where, dict) else {}
    loc = _(" ({file}, line {line}: `{code}`)").format(file=where.get("file"), line=where.get("line"),
                                                        code=where.get("code", "")) if where else ""
    return clean(i18n.join("", [f"{err.get('exception', 'Error')}: {err.get('message', '')}", loc]))


def _blank(step: Step, status: str, detail: str, message: str) -> StepResult:
    checks.load_all()  # a submission rejected on reading comes here before anything has loaded the checks
    specs = checks.CHECKS[step.id]
    return StepResult(step.id, i18n.step_title(step), 0.0, sum(c.points for c in specs), status,
                      [CheckResult(i18n.translate(None, c.name), 0.0, c.points, False, message, c.id) for c in specs],
                      detail, message)


class Collected:
    """What the worker produced for one submission, before judging."""

    def __init__(self, display: str, step_list: list[Step]):
        self.display = display
        self.step_list = step_list
        self.results: dict[str, StepResult] = {}  # steps settled without checks (not started, error)
        self.learner: dict[str, dict[str, CaseResult]] = {}
        self.notes: list[str] = []
        self.flags: list[dict[str, str]] = []  # signs of studying the grader, for the instructor (grading/flags.py)
        self.sandbox: dict[str, Any] = {}  # what confined its worker (sandbox_record); empty when none ran


def strong_required(config: dict[str, Any], secret: str | None) -> bool:
    """Does this grading need the strong sandbox? Always with a course secret (every instructor path: grade,
    batch, Gradescope, PrairieLearn, nbgrader), unless the instructor waived it (`require_strong: False`, what
    --allow-weak-sandbox sets); `require_strong: True` asks for it without a secret."""
    if os.environ.get("ATTN_KATA_ALLOW_WEAK_SANDBOX") == "1":  # the instructor's waiver, for platform scripts
        return False
    asked = config.get("require_strong")
    return bool(resolve_secret(secret)) if asked is None else asked is True


def worker_config(config: dict[str, Any], secret: str | None) -> dict[str, Any]:
    """The worker's set-up: with the needs it must meet (alternatives per need) when the strong sandbox is
    required, so that it refuses to import a line of the submission where its own layers fall short."""
    context = str(config.get("context", "host"))
    needs = [list(any_of) for any_of in required_layers(context).values()] if strong_required(config, secret) else []
    # where the disk must be capped and no tmpfs can be mounted, the worker writes no file (sandbox/confine.py)
    writes = {"no_file_writes": True} if any("landlock_no_file_writes" in any_of for any_of in needs) else {}
    return {**config, **writes, "required": needs}


class Started:
    """A submission read, analysed and given its worker, not yet asked anything (`start`). Its worker confines
    itself and imports the code meanwhile: a batch starts the next submission while the current one runs, so
    that the kernel's work of making a sandbox (namespaces, cgroups: mostly waiting) overlaps with grading."""

    def __init__(self, path: str | Path, steps: Iterable[str] | None, config: dict[str, Any] | None,
                 spawn: bool) -> None:
        self.step_list = [BY_ID[s] for s in steps] if steps else list(STEPS)
        self.col = Collected(ingest.shown(Path(path).name), self.step_list)  # a non-UTF-8 name escaped
        self.sub: ingest.Submission | None = None
        self.units: list[tuple[str, str, str]] = []
        self.worker: WorkerHandle | None = None
        with i18n.deferred():  # its messages are worded at the edge (Report.worded)
            try:
                self.sub = ingest.read_submission(path)
            except ingest.SubmissionError as exc:
                self.col.results = {s.id: _blank(s, "error", "rejected_input", clean(i18n.said(exc)))
                                    for s in self.step_list}
                return
        self.col.notes = list(self.sub.notes)
        self.units = [(u.module, u.label, u.source) for u in self.sub.units]
        if spawn:
            with contextlib.suppress(InfrastructureError):  # collect() tries again, and says why if it fails
                self.worker = Worker(self.units, worker_config(config or {}, None))
        # the flags read the text alone, here while the worker confines itself and imports the code
        self.col.flags = flags.scan(self.sub)

    def close(self) -> None:
        """Stop a worker that was never used (the batch ended early)."""
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def start(path: str | Path, *, steps: Iterable[str] | None = None,
          config: dict[str, Any] | None = None) -> Started:
    """Read the submission and start its worker now; `collect(path, started=...)` asks it later. Never raises
    for the submission."""
    return Started(path, steps, config, spawn=True)


def collect(path: str | Path, *, steps: Iterable[str] | None = None, secret: str | None = None,
            timeout: float = DEFAULT_TIMEOUT, config: dict[str, Any] | None = None,
            started: Started | None = None) -> Collected:
    """Run the submission's code in a worker and gather its outputs. Never raises for the submission.
    `started`: what `start` made of this very path, with the same steps and config. Its messages are unworded
    (grader.i18n.Text): the reader's language words them (Report.worded)."""
    with i18n.deferred():
        return _collect(started or Started(path, steps, config, spawn=False), secret=secret,
                        timeout=timeout, config=config)


def portable_refusal(secret: str | None) -> WeakSandbox | None:
    """The portable backend never holds a secret, whatever is waived (sandbox/policy.py: the waiver covers the
    Linux sandbox's layers only): its worker runs unconfined as the grader's user and could read the secret from
    its ancestors' environment and command line. None where a secret may be held here."""
    if policy.PORTABLE_HOLDS_SECRET or backend() != "portable" or not resolve_secret(secret):
        return None
    return WeakSandbox(_("grading with a secret needs the Linux sandbox; this machine runs the portable backend, "
                         "which confines nothing ({why}) and never holds a secret, whatever is waived. Grade on "
                         "Linux (see `attn-kata doctor`)").format(why=portable_reason()))


def _collect(started: Started, *, secret: str | None, timeout: float,
             config: dict[str, Any] | None) -> Collected:
    if (refused := portable_refusal(secret)) is not None:  # before the key is used, whatever the waiver says
        started.close()
        raise refused
    col, step_list, units = started.col, started.step_list, started.units
    plans, refs = prepared(resolve_secret(secret))
    sub = started.sub
    if sub is None:  # rejected: its reason is already each step's result
        return col
    requests = prepared_requests(resolve_secret(secret))
    todo = list(step_list)
    config = config or {}
    # one wall-clock budget for all steps and restarts (counted from the first import): a submission whose
    # every step hangs costs about two time-outs, not one per step plus a re-import each
    budget = float(config.get("budget") or BUDGET_FACTOR * timeout)
    over_budget = _("not finished: this submission used up its time budget ({budget:g} s for all steps)").format(
        budget=budget)
    deadline: float | None = None
    while todo:  # one worker per pass; a step that kills it is recorded and the next pass starts after it
        if deadline is not None and deadline - time.monotonic() <= 0:
            msg = _("not run: this submission used up its time budget ({budget:g} s for all steps)").format(
                budget=budget)
            for s in todo:
                col.results[s.id] = _blank(s, "error", "timeout", msg)
            break
        # the first pass: the one started
        worker, started.worker = started.worker or Worker(units, worker_config(config, secret)), None
        try:
            try:
                left = LOAD_TIMEOUT if deadline is None else min(LOAD_TIMEOUT, deadline - time.monotonic())
                layers = worker.confined(left)  # sent before any learner code ran: nothing it does can forge it
                context = str(config.get("context", "host"))
                strong = strong_required(config, secret)
                col.sandbox = sandbox_record(layers, context, strong)
                if strong and (missing := missing_layers(layers, context)):
                    # the worker saw it too and exited without importing the submission (grader.worker.serve)
                    if backend() == "portable":  # no sandbox at all (require_strong without a secret)
                        raise WeakSandbox(_("this needs the Linux sandbox; this machine runs the portable "
                                            "backend, which confines nothing ({why}). Grade on Linux (see "
                                            "`attn-kata doctor`)").format(why=portable_reason()))
                    raise WeakSandbox(_("this machine's sandbox lacks what grading with a secret needs: {layers} "
                                        "(see `attn-kata doctor`; --allow-weak-sandbox grades anyway)").format(
                        layers=refusal(missing)))
                hello = worker.hello(left)
                names, errors = wire.validate_hello(hello)
                _note_dropped(col, hello)
            except (WorkerLost, wire.Malformed) as exc:
                reason = DETAIL_FOR_LOSS.get(getattr(exc, "reason", ""), "no_result")
                msg = _("importing the submission failed: {detail}").format(detail=getattr(exc, "detail", exc))
                if reason == "timeout" and left < LOAD_TIMEOUT:
                    msg = over_budget
                for s in todo:
                    col.results.setdefault(s.id, _blank(s, "error", reason, msg))
                break
            if deadline is None:
                deadline = time.monotonic() + budget
            asked = []
            for step in todo:
                unit = sub.unit_for(step)
                err = errors.get(unit) if unit else None
                if any(n in names for n in step.names):
                    asked.append(step)
                elif err and _mentions(sub, unit, step.names):
                    col.results[step.id] = _blank(step, "error", "import_error", _load_error_text(err))
                else:
                    col.results[step.id] = _blank(step, "not_started", "not_started", _("not started"))
            todo = []
            worker.send_all([requests[s.id] for s in asked])  # answers stream back, one per step
            for i, step in enumerate(asked):
                left = deadline - time.monotonic()
                try:
                    tensors, doc = worker.receive(max(min(timeout, left), 0.001))
                except WorkerLost as exc:
                    msg = {"timeout": _("stopped after {timeout:g} s: is there an infinite loop?"),
                           "crashed": _("the worker process died ({detail})"),
                           "unreadable": _("the result could not be read ({detail})")}[exc.reason].format(
                        timeout=timeout, detail=exc.detail)
                    if exc.reason == "timeout" and left < timeout:
                        msg = over_budget
                    col.results[step.id] = _blank(step, "error", DETAIL_FOR_LOSS[exc.reason], msg)
                    todo = asked[i + 1:]  # the next pass, in a new worker, starts after it
                    break
                _note_dropped(col, doc)
                if oversized := _oversized(tensors, refs[step.id]):
                    shapes = _first_shapes(tensors, refs[step.id])
                    tensors, doc = {}, _oversized_answer(plans[step.id], *oversized, shapes)  # let go of them now
                cases = _parse_response(plans[step.id], tensors, doc)
                if oversized:  # the wire takes plain text: the message goes back to its unworded form
                    for r in cases.values():
                        r.message = clean(_oversized_message(*oversized, shapes))
                if all(r.status == "not_started" for r in cases.values()):
                    col.results[step.id] = _blank(step, "not_started", "not_implemented",
                                                  _("raises NotImplementedError"))
                else:
                    col.learner[step.id] = cases
        finally:
            worker.close()
    return col


def sandbox_record(layers: dict[str, bool], context: str, strong: bool) -> dict[str, Any]:
    """What confined the code of this report (its `sandbox` key): the backend, the context and whether the strong
    sandbox was required there, and the layers the worker observed of itself before any learner code ran."""
    return {"backend": backend(), "context": context, "strong_required": strong,
            "layers": sorted(k for k, v in layers.items() if v is True),
            "missing": missing_layers(layers, context)}


def _oversized(tensors: dict[str, torch.Tensor], refs: dict[str, CaseResult]) -> tuple[int, int] | None:
    """(numbers held, the reference's) when a step's answers hold far more numbers than the reference's."""
    got = sum(t.numel() for t in tensors.values() if isinstance(t, torch.Tensor))
    want = sum(t.numel() for r in refs.values() for t in r.tensors.values())
    return (got, want) if got > max(KEPT_FACTOR * want, MIN_KEPT) else None


def _first_shapes(tensors: dict[str, torch.Tensor], refs: dict[str, CaseResult]) -> tuple[str, str] | None:
    """(the learner's shape, the reference's) of the first output whose shapes differ, as the learner reads them:
    first in the plan's order of cases and outputs (the answer's own order is safetensors', which varies from one
    process to the next)."""
    for case, ref in refs.items():
        for key, want in ref.tensors.items():
            t = tensors.get(f"{case}/{key}")
            if isinstance(t, torch.Tensor) and t.shape != want.shape:
                return expect.fmt_shape(t.shape), expect.fmt_shape(want.shape)
    return None


def _oversized_answer(cases: dict[str, Case], got: int, want: int,
                      shapes: tuple[str, str] | None = None) -> dict[str, Any]:
    """The answer put in the place of one too large to keep: every case a wrong type that says why, with the first
    output's shape against the reference's where they differ (exercise 3.3 built with the wrapper: 12 × 768)."""
    return {"cases": {name: {"status": "wrong_type", "message": str(_oversized_message(got, want, shapes))}
                      for name in cases}}


def _oversized_message(got: int, want: int, shapes: tuple[str, str] | None) -> str:
    """Why the answers were let go (unworded under i18n.deferred: the wire takes the English, the report this)."""
    if shapes:
        message = _("the answers hold {got:,} numbers, far more than this step's {want:,}: an output has shape "
                    "{shape}, expected {expected}").format(got=got, want=want, shape=shapes[0], expected=shapes[1])
    else:
        message = _("the answers hold {got:,} numbers, far more than this step's {want:,}: does a function return "
                    "the wrong tensor?").format(got=got, want=want)
    return message


def _note_dropped(col: Collected, doc: Any) -> None:
    """Say once that the learner's prints went over the worker's cap (grader.sandbox.confine.CappedOutput)."""
    note = _("printed output over 1 MiB was dropped")
    if isinstance(doc, dict) and doc.get("output_dropped") is True and note not in col.notes:
        col.notes.append(note)


def _detail(cases: dict[str, CaseResult]) -> tuple[str, str]:
    """Why a judged step lost points, from what its cases did (worst first), unworded."""
    with i18n.deferred():
        return _detail_text(cases)


def _detail_text(cases: dict[str, CaseResult]) -> tuple[str, str]:
    by_status = {r.status: r for r in cases.values()}
    if "memory" in by_status:
        return "memory_limit", _("ran out of memory")
    if "error" in by_status:
        r = by_status["error"]
        if r.exception == "NoResult":
            return "no_result", _("the worker sent no result for some cases")
        if r.exception == wire.MALFORMED:
            return "no_result", r.message
        return "crashed", _("raised {exception}: {message}").format(exception=r.exception, message=r.message)
    if "wrong_type" in by_status:
        return "wrong_type", by_status["wrong_type"].text()
    if "missing" in by_status or "not_started" in by_status:
        return "not_implemented", _("part of this step is not written yet")
    return "wrong_answer", ""


@i18n.deferred()
def judge(collected: list[Collected], *, secret: str | None = None, with_pictures: bool = False) -> list[Report]:
    """Run the checks on many submissions' outputs in one pytest session (trusted process only). `with_pictures`:
    each step also carries the matrices of its picture cases, both sides' (StepResult.pictures, grading.pictures).
    The reports' messages are unworded (grader.i18n.Text): `Report.worded(lang)` says them in the reader's language;
    their JSON as they are is the English report."""
    plans, stand_in_results = prepared(resolve_secret(secret))
    chosen: dict[tuple[int, str], dict[str, CaseResult]] = {}  # (submission, step) -> the reference results it meets
    jobs = []
    for i, col in enumerate(collected):
        for sid, cases in col.learner.items():
            refs = stand_in_results[sid]
            if BY_ID[sid].uses:  # built on the stand-ins, or on code of its own (real earlier steps)
                refs = _matching(cases, refs, functools.partial(prepared_own_build, resolve_secret(secret), sid))
            chosen[i, sid] = refs
            outcome = Outcome(sid, plans[sid], cases, refs)
            jobs.append((f"{i}::{sid}", checks.CHECKS[sid], outcome))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the checks touch small tensors: threads cost more than they bring
    try:
        verdicts = run_jobs(jobs)
    finally:
        torch.set_num_threads(threads)
    reports, version = [], grader_version()  # once: importlib.metadata reads the package's metadata each time
    for i, col in enumerate(collected):
        results = dict(col.results)
        for sid in col.learner:
            v = verdicts[f"{i}::{sid}"]
            specs = checks.CHECKS[sid]
            # a structural cause (heads in a plain list, parameters that match no role) is said once (issue 12)
            said = structure.first(sid, [c.name for c in specs], [v[c.key] for c in specs], col.learner[sid])
            crs = [CheckResult(i18n.translate(None, c.name), c.points if ok else 0.0, c.points, ok, msg, c.id,
                               not ok and structure.waits(msg))
                   for c, (ok, msg) in zip(specs, said, strict=True)]
            score = sum(c.score for c in crs)
            total = sum(c.max_score for c in crs)
            status = "passed" if score == total else "failed" if score == 0 else "partial"
            detail, message = _detail(col.learner[sid]) if status != "passed" else ("passed", "")
            results[sid] = StepResult(sid, i18n.step_title(BY_ID[sid]), score, total, status, crs, detail,
                                      message)
            if status != "passed":  # name the classic mistake the outputs show, if any
                results[sid].diagnoses = diagnose.diagnose(
                    Outcome(sid, plans[sid], col.learner[sid], chosen[i, sid]))
        if with_pictures:  # against the stand-ins' results, whatever the step was judged against
            for step in col.step_list:
                results[step.id].pictures = pictures.of_step(step, col.learner.get(step.id), col.results.get(step.id),
                                                             stand_in_results.get(step.id, {}))
        reports.append(Report(col.display, [results[s.id] for s in col.step_list], notes=col.notes, flags=col.flags,
                              grader_version=version, sandbox=col.sandbox))
    return reports


def grade_many(paths: Iterable[str | Path], **kwargs: Any) -> list[Report]:
    """Grade several submissions, judging them together (one pytest session). `pictures=True`: each step also
    carries its attention-weight matrices (StepResult.pictures), which grader.render draws."""
    secret, with_pictures = kwargs.get("secret"), kwargs.pop("pictures", False)
    return judge([collect(p, **kwargs) for p in paths], secret=secret, with_pictures=with_pictures)


def grade(path: str | Path, **kwargs: Any) -> Report:
    """Grade one submission. Never raises for anything the submission does.

    Keyword arguments: steps, secret, timeout, config (see `collect`); pictures (see `grade_many`). Its messages are
    unworded: `grade(...).worded(lang)` for a reader of `lang`."""
    return grade_many([path], **kwargs)[0]
