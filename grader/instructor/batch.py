"""Grade a whole class: discover submissions, grade them in parallel, keep every result in a resumable index.

run_batch reads as its steps: discover (grader.instructor.discovery: one entry per upload), screen (what
cannot be graded gets its status without running anything), pending (what the index lacks), grade_groups
(the pool of grading processes), final_records (one record per submission), write_outputs
(grader.instructor.gradebook: the gradebook, feedback and summary); the staging folder is removed at the end.
Before any of it, check_out refuses an OUT whose results were graded under other settings (another key, no key,
another time-out, other steps, another grader), which this run would replace: only --regrade replaces them.

Layout of OUT:
  index.sqlite        results keyed by sha256(content hash, the run's settings), and the settings (gradebook.
                      RunSettings: the key's fingerprint, never the key; time-out; steps; grader version). A
                      result is kept unworded (grader.i18n.to_data): a run in another language
                      (`--lang zh --resume`) words the same results instead of grading them again
  gradebook.csv       one row per student, one column per step, the total, the settings (cells escaped)
  reports/NAME.json   one report per submission (grader/report.py, schema_version 1), with the settings
  feedback/NAME.txt   plain-language feedback per student
  summary.json        per step: mean, share of full marks, most common failed check; the settings; the names
                      that collided (discovery.collisions)
  .staging/           archives extracted while the batch runs (checked first; removed at the end)

The learner's code runs only in workers forked by the zygote (grader.pool.session). The trusted grading
processes are forked by the zygote too, before they learn the secret, so torch is imported once per batch
(by the zygote) and this coordinating process never imports it; each grades chunks of submissions and
sends back the reports as plain dicts.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import json
import os
import selectors
import shutil
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import i18n, limits
from grader.files import write_atomic
from grader.grading import forked
from grader.i18n import N_, _
from grader.instructor import classreport
from grader.instructor.discovery import (
    EMPTY,
    ERROR,
    GRADED,
    OVER_BUDGET,
    REJECTED,
    TOO_LARGE,
    UNREADABLE,
    Entry,
    collisions,
    content_hash,
    discover,
    escape_controls,
    spelled,
)
from grader.instructor.gradebook import (
    NO_KEY,
    Index,
    IndexUnreadable,
    RunSettings,
    class_summary,
    feedback_text,
    gradebook_csv,
    recorded_settings,
    result_key,
)
from grader.report import Report, clean
from grader.sandbox.framing import send_msg
from grader.settings import DEFAULT_TIMEOUT, grader_version, resolve_secret

# ---------------------------------------------------------------- grading processes (trusted)
#
# The zygote forks them (`Zygote.grader`), before they know the secret: they share its torch import, so
# torch is imported once per batch, and this coordinating process never imports it at all. Each gets its
# settings, then chunks of submissions, over a socket of its own; it asks the zygote for a worker per
# submission like any grading process, judges the chunk in one pytest session and sends back the reports.
# Messages are JSON, never pickles: no byte a worker could ever have written is unpickled anywhere.

_GRADE_ARGS: dict[str, Any] = {}
GRADING_ENTRY = f"{__name__}:grading_process"  # what the zygote runs in a grading process it forks
# the machinery every grading process shares is grader.grading.forked (one submission's too)


def grading_process(fd: int) -> None:
    """The main loop of a grading process (forked by the zygote): settings, then chunk after chunk."""
    from grader.pool.session import WeakSandbox

    try:
        sock, settings = forked.enter(fd)
        _GRADE_ARGS.update(settings)
        while True:
            chunk = forked.recv(sock)
            try:
                reply = _reply(_grade_chunk(chunk))
            except WeakSandbox as exc:  # instructor grading on a machine without the layers it needs
                reply = forked.encode_results({"weak_sandbox": str(exc)})
            send_msg(sock, reply)
    except forked.LOST:
        return  # the batch is over (or gone)


def _reply(results: list[tuple[int, dict[str, Any] | None, str, float]]) -> bytes:
    """The chunk's results, encoded here rather than on sending, so that a report that json cannot encode (a NaN
    score: a grader bug) is that one submission's error, never taken for a lost peer that costs the whole chunk."""
    try:
        return forked.encode_results(results)
    except (TypeError, ValueError):
        pass
    out = []
    for i, report, err, secs in results:
        try:
            forked.encode_results(report)
            out.append((i, report, err, secs))
        except (TypeError, ValueError) as exc:
            out.append((i, None, f"the report could not be encoded: {type(exc).__name__}: {exc}", secs))
    return forked.encode_results(out)


def _config() -> dict[str, Any]:
    return {"require_strong": _GRADE_ARGS.get("require_strong")}


def _start(job: tuple[int, str]) -> Any:
    """Read a submission and start its worker (engine.start), or None where even that failed (collect says why)."""
    from grader.grading import engine

    try:
        return engine.start(job[1], steps=_GRADE_ARGS.get("steps"), config=_config())
    except Exception:  # a grader bug: _collect_one meets it again, and reports it
        return None


def _collect_one(job: tuple[int, str], started: Any = None) -> tuple[int, Any, str, float]:
    """Run one submission in a worker; (index, engine.Collected or None, error, seconds)."""
    from grader.grading import engine
    from grader.pool.session import WeakSandbox

    i, path = job
    start = time.monotonic()
    try:
        col = engine.collect(path, steps=_GRADE_ARGS.get("steps"), secret=_GRADE_ARGS["secret"],
                             timeout=_GRADE_ARGS["timeout"], config=_config(), started=started)
        return i, col, "", time.monotonic() - start
    except WeakSandbox:
        raise
    except Exception as exc:  # a grader bug or an infrastructure error: listed, never a 0
        return i, None, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}", time.monotonic() - start


def _collect_all(chunk: list[tuple[int, str]]) -> list[tuple[int, Any, str, float]]:
    """Collect the chunk one submission at a time, the next one's worker started while this one runs: making
    a sandbox is mostly the kernel's waiting (namespaces, cgroups), which then overlaps with grading. At most
    two workers per grading process; each is still one submission's alone."""
    done: list[tuple[int, Any, str, float]] = []
    ahead = None
    try:
        for k, job in enumerate(chunk):
            current, ahead = ahead or _start(job), None
            if k + 1 < len(chunk):
                ahead = _start(chunk[k + 1])
            done.append(_collect_one(job, current))
    finally:
        if ahead is not None:  # the chunk stopped early (a weak sandbox): its worker goes too
            ahead.close()
    return done


def _grade_chunk(chunk: list[tuple[int, str]]) -> list[tuple[int, dict[str, Any] | None, str, float]]:
    """Collect a few submissions, then judge them in one pytest session (its start-up is shared)."""
    from grader.grading import engine

    done = _collect_all(chunk)
    ok = [(i, col, secs) for i, col, _, secs in done if col is not None]
    start = time.monotonic()
    try:
        reports = engine.judge([col for _, col, _ in ok], secret=_GRADE_ARGS["secret"])
    except Exception as exc:
        err = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
        return [(i, None, err or e, secs) for i, _, e, secs in done]
    share = (time.monotonic() - start) / max(1, len(ok))
    out: list[tuple[int, dict[str, Any] | None, str, float]] = [
        (i, None, err, secs) for i, col, err, secs in done if col is None]
    # unworded (grader.i18n.to_data): the batch words it in its language as it arrives (grade_groups)
    out += [(i, rep.to_data(), "", secs + share) for (i, _, secs), rep in zip(ok, reports, strict=True)]
    return out


MAX_CHUNK = limits.BATCH_CHUNK


def _chunks(jobs: list[tuple[int, str]], workers: int) -> list[list[tuple[int, str]]]:
    """Guided: big chunks first (one pytest session judges a whole chunk, so its start-up is shared),
    shrinking towards the end so that no grading process is left with a long tail; 1 for small batches."""
    out, k = [], 0
    while k < len(jobs):
        size = max(1, min(MAX_CHUNK, (len(jobs) - k) // (workers * 2)))
        out.append(jobs[k:k + size])
        k += size
    return out


# ---------------------------------------------------------------- the batch


@dataclass
class BatchResult:
    total: int
    graded_now: int
    reused: int
    records: int
    not_graded: dict[str, str]  # student -> reason
    seconds: float
    summary: dict[str, Any]
    out: Path
    statuses: dict[str, str] = field(default_factory=dict)  # student -> status, for all but "graded"
    # uploads whose own names are one student's (case, Unicode normalisation aside): [[(student, source), ...]]
    collisions: list[list[tuple[str, str]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.not_graded and self.records == self.total


ProgressHook = Callable[[int, int], None]


class GradingUnavailable(Exception):
    """No grading process could be started (twice, the second time with a fresh zygote): the batch stops,
    keeping what it graded; nothing is recorded for the rest."""


class WeakSandboxError(GradingUnavailable):
    """Grading with a secret needs sandbox layers this machine does not provide (`attn-kata doctor`)."""


class ResumeRefused(Exception):
    """OUT holds results graded under other settings (another key, no key, another time-out, ...), or results
    whose settings cannot be known: this run would replace them. Raised before anything is graded or written."""


SETTING_NAMES = {"key_fingerprint": N_("key fingerprint"), "timeout": N_("time-out per step (s)"),
                 "steps": N_("steps"), "grader_version": N_("grader version")}


def _shown_setting(name: str, value: Any) -> str:
    if name == "key_fingerprint" and value == NO_KEY:
        return _("none (no key)")
    if name == "timeout" and isinstance(value, int | float):
        return f"{value:g}"
    return "?" if value is None else str(value)


def _fix_flags(differences: list[tuple[str, Any, Any]]) -> str:
    """The flags that give a run the settings it differs in, as OUT recorded them (the key as a file: the course's)."""
    flags = []
    for name, was, _now in differences:
        if name == "key_fingerprint" and was != NO_KEY:
            flags.append("--secret @course.key")
        elif name == "timeout" and isinstance(was, int | float):
            flags.append(f"--timeout {was:g}")
        elif name == "steps" and isinstance(was, str) and was != "all":
            flags += [f"--step {s}" for s in was.split(",")]
    return " ".join(flags)


def check_out(out: Path, settings: RunSettings, *, resume: bool, regrade: bool) -> None:
    """Refuse (ResumeRefused), before anything is graded or written, a run that would replace results in OUT that it
    did not produce under the same settings: a --resume, or a fresh run, over an index recorded under another key,
    no key, another time-out, other steps or another grader, or over an index that recorded none. --regrade is the
    one way to grade again into OUT; a fresh run under the same settings grades again, as it always did."""
    if resume and regrade:
        raise ResumeRefused(_("attn-kata: --resume keeps what {out} holds and --regrade replaces it: choose one")
                            .format(out=out))
    try:
        recorded, held = recorded_settings(out / "index.sqlite")
    except IndexUnreadable as exc:  # even --regrade: a file no batch wrote is never replaced
        raise ResumeRefused(_("attn-kata: {out}/index.sqlite is not a batch index ({error}); nothing was graded or "
                              "written. Grade into a new --out, or move that file away.").format(
            out=out, error=exc)) from None
    if regrade:
        return
    if recorded is None:
        if held:
            raise ResumeRefused(_("attn-kata: {out}/index.sqlite holds {n} results from an older grader, which did "
                                  "not record the key and settings they were graded under; nothing was graded or "
                                  "written. Grade into a new --out, or pass --regrade to grade everything again "
                                  "into {out}.").format(out=out, n=held))
        return
    differences = settings.differences(recorded)
    if not differences:
        return
    lines = [_("attn-kata: {out} holds results graded under other settings, which this run would replace; nothing "
               "was graded or written.").format(out=out)]
    for name, was, now in differences:
        lines.append("  " + _("{setting}: {recorded} in {out}, {now} in this run").format(
            setting=_(SETTING_NAMES.get(name, name)), recorded=_shown_setting(name, was), out=out,
            now=_shown_setting(name, now)))
    flags = _fix_flags(differences)
    versions = any(name == "grader_version" for name, _was, _now in differences)
    if versions:
        lines.append(_("Another grader graded {out}: grade into a new --out, or pass --regrade to grade everything "
                       "again into {out}.").format(out=out))
    elif resume:
        lines.append(_("To finish that run, resume it as it was started ({flags}); or grade into a new --out, or "
                       "pass --regrade to grade everything again into {out}.").format(
            flags=f"--resume {flags}".strip(), out=out))
    else:
        lines.append(_("To finish that run, add --resume with its settings ({flags}); or grade into a new --out, or "
                       "pass --regrade to grade everything again into {out}.").format(
            flags=f"--resume {flags}".strip(), out=out))
    raise ResumeRefused("\n".join(lines))


class _Grader:
    """One trusted grading process (forked by the zygote) and the chunk it is working on."""

    def __init__(self, settings: dict[str, Any]):
        try:
            self.sock, self.pid = forked.start(GRADING_ENTRY)
        except forked.Unavailable as exc:
            raise GradingUnavailable(str(exc)) from None
        self.chunk: list[tuple[int, str]] = []
        self.tries = 0  # earlier attempts at this chunk, by grading processes that died
        forked.send(self.sock, settings)

    def give(self, chunk: list[tuple[int, str]], tries: int) -> None:
        self.chunk, self.tries = chunk, tries
        forked.send(self.sock, chunk)

    def kill(self) -> None:
        if sys.platform == "linux":  # a grading process is forked from the zygote: Linux's alone (forked.start)
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        self.sock.close()

    def gone(self) -> bool:
        if sys.platform == "linux":
            from grader.pool.zygote import running

            return not running(self.pid)
        return True


def _grade_in_pool(chunks: list[list[tuple[int, str]]], jobs: int, settings: dict[str, Any],
                   record: Callable[[list[Any]], None], lost: Callable[[list[tuple[int, str]]], None]) -> None:
    """Hand the chunks to `jobs` grading processes, the next chunk to whichever finishes first. A grading
    process that dies (the OOM killer, a grader bug) is replaced and its chunk retried once; if it dies again,
    each of the chunk's submissions is tried once more alone, so that a crash one submission's data causes
    costs that submission only (`lost`), not its classmates."""
    queue = collections.deque((chunk, 0) for chunk in chunks)  # (chunk, earlier attempts)
    sel = selectors.DefaultSelector()
    busy: dict[int, _Grader] = {}
    retired: list[_Grader] = []

    def next_chunk(g: _Grader) -> None:
        if queue:
            g.give(*queue.popleft())
            sel.register(g.sock, selectors.EVENT_READ, g)
            busy[g.pid] = g
        else:  # nothing left: closing its socket ends it
            g.sock.close()
            retired.append(g)

    try:
        for _ in range(min(jobs, len(queue))):
            next_chunk(_Grader(settings))
        while busy:
            for key, _events in sel.select(timeout=1.0):
                g = key.data
                sel.unregister(g.sock)
                del busy[g.pid]
                try:
                    results = forked.recv(g.sock)
                    if isinstance(results, dict) and "weak_sandbox" in results:
                        raise WeakSandboxError(str(results["weak_sandbox"]))
                except forked.LOST:
                    g.kill()
                    retired.append(g)
                    if g.tries == 0:
                        queue.appendleft((g.chunk, 1))
                    elif len(g.chunk) > 1:  # one by one, first in the queue, each with one attempt of its own
                        queue.extendleft(([job], 1) for job in reversed(g.chunk))
                    else:
                        lost(g.chunk)
                    if queue:
                        next_chunk(_Grader(settings))
                    continue
                record(results)
                next_chunk(g)
    except BaseException:  # Ctrl-C, or this process's own failure: stop every grading process at once
        for g in [*busy.values(), *retired]:
            g.kill()
        raise
    finally:
        sel.close()
    deadline = time.monotonic() + 5.0  # they exit once their socket closes; wait, so their CPU is accounted
    while retired and time.monotonic() < deadline:
        retired = [g for g in retired if not g.gone()]
        if retired:
            time.sleep(0.01)


def run_batch(*, directory: str | Path, out: str | Path, jobs: int | None = None, resume: bool = False,
              secret: str | None = None, timeout: float | None = None, lang: str = "en",
              progress: Callable[[int], Any] | None = None, start: Callable[[int, int, int], Any] | None = None,
              allow_weak_sandbox: bool = False, steps: list[str] | None = None, regrade: bool = False) -> BatchResult:
    """Grade every submission in `directory` into `out` (only `steps`, when given). `start(total, not_to_grade,
    from_the_index)` and `progress(n_done_now)` let a caller draw a progress bar and say whether it resumes.
    ResumeRefused, before anything is written, where OUT holds results graded under other settings (check_out);
    `regrade` grades everything again into OUT whatever it holds."""
    t0 = time.monotonic()
    directory, out = Path(directory), Path(out)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: not a directory")
    secret = resolve_secret(secret)
    # the key's fingerprint is computed here, in the trusted coordinating process: the key goes nowhere new
    settings = RunSettings.of(secret, timeout if timeout is not None else DEFAULT_TIMEOUT, steps, grader_version())
    check_out(out, settings, resume=resume, regrade=regrade)
    out.mkdir(parents=True, exist_ok=True)
    staging = out / ".staging"
    if not resume:  # the zygote imports torch (~1.4 s) while this process discovers, screens and opens the index
        _start_zygote()
    words = Outputs(out, lang, settings)  # the only part of a batch that words anything: what it writes
    try:
        with i18n.deferred():  # the reasons for what cannot be graded, worded where they are written
            entries = discover(directory, staging)
            screen_entries(entries, settings)  # a result is indexed under the settings it was graded with
        index = Index(out / "index.sqlite")
        try:
            if resume:
                index.record(settings)
            else:
                index.start(settings)
            indexed = index.keys()
            groups = pending(entries, indexed)
            # from the index: results of an earlier run (only with --resume: a fresh run cleared it), never the
            # uploads that cannot be graded, which a fresh run skips too
            reused = sum(1 for e in entries if e.key and e.key in indexed)
            if start:
                start(len(entries), len(entries) - sum(len(g) for g in groups), reused)
            failures = grade_groups(groups, index, settings, jobs=jobs, secret=secret, timeout=settings.timeout,
                                    progress=progress, allow_weak_sandbox=allow_weak_sandbox, steps=steps,
                                    on_report=words.report)
            reports = final_records(entries, index, failures, words)
            sources = classreport.read_sources(entries, reports)  # before .staging goes: the class report's pairs
        finally:
            index.close()
    finally:
        _stop_zygote()  # when nothing was left to grade, or discovery failed
        shutil.rmtree(staging, ignore_errors=True)  # OUT holds nothing but results
    summary = write_outputs(entries, reports, out, steps, settings)
    classreport.save_sources(out, sources)
    classreport.write(out, lang)  # class.json and class.html beside the gradebook (`attn-kata report` rebuilds them)
    not_graded = {e.student: e.rejected for e in entries if reports.get(e.slug) is None}  # worded: Outputs
    return BatchResult(len(entries), len(groups), reused, len(entries),
                       not_graded, time.monotonic() - t0, summary, out,
                       {e.student: e.status for e in entries if e.status != GRADED},
                       [[(e.student, e.source) for e in group] for group in collisions(entries)])


def screen_entries(entries: list[Entry], settings: RunSettings) -> None:
    """Read each submission as text (nothing runs): what cannot be graded gets its status and one reason;
    the rest get the key their result is indexed by (its content under `settings`)."""
    for e in entries:
        if e.path is None or e.rejected:
            e.status = e.status or REJECTED
            continue
        try:
            e.content_hash = content_hash(e.path)
        except OSError as exc:
            e.status, e.rejected = UNREADABLE, _("could not be read ({error})").format(error=exc.strerror or exc)
            continue
        e.status, e.rejected = screen(e.path)
        if not e.rejected:
            e.key = result_key(e.content_hash, settings)


def screen(path: Path) -> tuple[str, str]:
    """("", "") for a submission worth grading, else (status, the one real problem)."""
    from grader.grading import ingest

    try:
        sub = ingest.read_submission(path)
    except ingest.SubmissionError as exc:
        return (TOO_LARGE if exc.kind == "too_large" else UNREADABLE), str(exc)
    units = [u for u in sub.units if u.source.strip()]
    if not units:
        return EMPTY, _("no code in the submission")
    if all("\x00" in u.source for u in units):
        return UNREADABLE, _("a binary file, not Python source")
    errors = []
    for u in units:
        try:
            compile(u.source, u.label, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
            return "", ""  # one unit that parses is enough to grade (the rest are parsed only if all fail)
        except SyntaxError as exc:
            errors.append(f"{u.label}, line {exc.lineno}: {exc.msg}")
        except (ValueError, RecursionError, MemoryError) as exc:
            errors.append(f"{u.label}: {type(exc).__name__}")
    first = errors[0] if len(errors) == 1 else errors[0] + ", …"  # here, no unit parses
    return UNREADABLE, _("syntax error in every file ({first})").format(first=first)


def pending(entries: list[Entry], done: set[str]) -> list[list[Entry]]:
    """What is left to grade, one group per distinct content (identical files are graded once)."""
    todo: dict[str, list[Entry]] = {}
    for e in entries:
        if e.key and e.key not in done:
            todo.setdefault(e.key, []).append(e)
    return list(todo.values())


def grade_groups(groups: list[list[Entry]], index: Index, run: RunSettings, *,
                 jobs: int | None, secret: str, timeout: float | None,
                 progress: Callable[[int], Any] | None, allow_weak_sandbox: bool, steps: list[str] | None = None,
                 on_report: Callable[[list[Entry], Report], Any] | None = None) -> dict[str, str]:
    """Grade each group in the pool and index each report (unworded: grader.i18n.to_data) as it arrives, then
    hand it to `on_report` (with its group: Outputs.report writes it); the failures, by slug."""
    failures: dict[str, str] = {}
    if not groups:
        return failures
    jobs = max(1, jobs or os.cpu_count() or 1)
    work = [(i, str(group[0].path)) for i, group in enumerate(groups)]
    settings = {"secret": secret, "timeout": timeout if timeout is not None else DEFAULT_TIMEOUT,
                # with a secret, scores must be trustworthy: no grading on a sandbox missing a needed layer
                "require_strong": bool(secret) and not allow_weak_sandbox, "steps": steps,
                "env": forked.settings_env()}  # what the trusted side reads from the environment

    timed_out: list[int] = []  # graded again, alone, once the pool is done

    def record(results: list[tuple[int, dict[str, Any] | None, str, float]], again: bool = False) -> None:
        for i, report, err, secs in results:
            if again and report is None:
                continue  # the first result stands
            group = groups[i]
            if report is None:
                for e in group:
                    failures[e.slug] = f"internal error: {err.splitlines()[0] if err else 'unknown'}"
            else:
                rep = Report.from_data(report)  # refused here (ValueError) if it is not one
                if not again and any(s.detail == "timeout" for s in rep.steps):
                    timed_out.append(i)
                index.put(group[0], run, report, secs)  # as it came: unworded
                if on_report:
                    on_report(group, rep)
            if progress and not again:
                progress(len(group))

    def lost(chunk: list[tuple[int, str]]) -> None:
        for i, _path in chunk:
            for e in groups[i]:
                failures[e.slug] = "internal error: the grading process died twice"
            if progress:
                progress(len(groups[i]))

    try:
        _grade_in_pool(_chunks(work, jobs), jobs, settings, record, lost)
        # a time-out beside other submissions may not be its own: a classmate's processes can starve it of CPU
        # where the grader's cpu cgroup is shared (red team 15: a victim's step timed out under a classmate's
        # spinners). Each submission that timed out is graded again, alone (one job, one submission a chunk), and
        # that result stands
        if jobs > 1 and timed_out:
            _grade_in_pool([[work[i]] for i in sorted(timed_out)], 1, settings, lambda r: record(r, again=True),
                           lambda c: None)
    finally:
        _stop_zygote()
    return failures


class Outputs:
    """What a batch writes for each student, in the instructor's language (the edge: everything before it is
    unworded): the report JSON as each result arrives, then, once all are in, every record and its feedback."""

    def __init__(self, out: Path, lang: str, settings: RunSettings | None = None):
        self.out, self.lang, self.settings = out, lang, settings
        self.written: dict[str, dict[str, Any]] = {}  # the reports written as they came, worded, by slug

    def report(self, group: list[Entry], rep: Report) -> None:
        worded = rep.worded(self.lang).to_dict()
        for e in group:
            self.written[e.slug] = _write_report(self.out, e, worded, self.settings)

    def record(self, e: Entry, data: dict[str, Any]) -> dict[str, Any]:
        """The report of `e` as the class sees it (written now unless it was as it came), and its feedback."""
        rep = self.written.get(e.slug)
        if rep is None:
            rep = _write_report(self.out, e, Report.from_data(data).worded(self.lang).to_dict(), self.settings)
        write_atomic(self.out / "feedback" / f"{e.slug}.txt", feedback_text(e.student, rep, lang=self.lang))
        return rep

    def no_record(self, e: Entry) -> None:
        e.rejected = i18n.word(e.rejected, self.lang)  # the gradebook's and the summary's reason, too
        write_atomic(self.out / "feedback" / f"{e.slug}.txt",
                     feedback_text(e.student, None, e.rejected, lang=self.lang))


def final_records(entries: list[Entry], index: Index, failures: dict[str, str],
                  outputs: Outputs) -> dict[str, dict[str, Any] | None]:
    """Exactly one record per submission, from the index: its report and feedback (Outputs.record), or why there
    is none (Outputs.no_record)."""
    reports: dict[str, dict[str, Any] | None] = {}
    for e in entries:
        data = index.get(e.key) if e.key else None
        if data is not None:
            e.status = OVER_BUDGET if over_budget(data) or hung_at_import(data) else GRADED
            reports[e.slug] = outputs.record(e, data)
        else:
            if not e.rejected:
                e.status, e.rejected = ERROR, failures.get(e.slug, "internal error: no result")
            reports[e.slug] = None
            outputs.no_record(e)
    return reports


def _msgid(message: Any) -> str:
    """The msgid a message (a report's, unworded: grader.i18n.to_data) was made from: `_(msgid).format(...)`'s
    own; "" for plain text."""
    node = message.get("text") if isinstance(message, dict) else None
    while isinstance(node, list) and len(node) in (3, 4) and node[0] in ("fmt", "call"):
        inner = node[1] if node[0] == "fmt" else node[2][0] if node[1] == "clean" and node[2] else None
        node = inner.get("text") if isinstance(inner, dict) else None  # (a cleaned message: the one it cleans)
    return node[1] if isinstance(node, list) and len(node) == 2 and node[0] == "msg" else ""


def over_budget(report: dict[str, Any]) -> bool:
    """Did the submission use up its wall-clock budget (some steps never got their turn)? `report` unworded."""
    return any(s.get("detail") == "timeout" and _msgid(s.get("message")) in BUDGET_MESSAGES for s in report["steps"])


def hung_at_import(report: dict[str, Any]) -> bool:
    """Did importing the submission never answer (every step a time-out of the import)? It used up its time as a
    submission over its budget does, and is scored on what finished: nothing. `report` unworded."""
    return bool(report["steps"]) and all(s.get("detail") == "timeout" and _msgid(s.get("message")) == IMPORT_FAILED
                                         for s in report["steps"])


IMPORT_FAILED = N_("importing the submission failed: {detail}")


BUDGET_MESSAGES = (N_("not finished: this submission used up its time budget ({budget:g} s for all steps)"),
                   N_("not run: this submission used up its time budget ({budget:g} s for all steps)"))


def write_outputs(entries: list[Entry], reports: dict[str, dict[str, Any] | None], out: Path,
                  steps: list[str] | None = None, settings: RunSettings | None = None) -> dict[str, Any]:
    """gradebook.csv and summary.json (each written atomically, for `steps` or every step); the summary, with the
    settings it was graded under and the uploads whose names collided (each group, with the name each row got)."""
    write_atomic(out / "gradebook.csv", gradebook_csv(entries, reports, steps, settings))
    summary = class_summary([r for r in reports.values() if r is not None], steps)
    summary.update(records=len(entries), total=len(entries),
                   gradable=sum(1 for e in entries if e.key),
                   statuses=dict(sorted(Counter(e.status for e in entries).items())),
                   not_graded=[{"student": e.student, "source": e.source, "status": e.status,
                                "reason": escape_controls(str(e.rejected))}
                               for e in entries if reports.get(e.slug) is None],
                   name_collisions=[[{"student": e.student, "source": e.source, "spelled": spelled(e.source)}
                                     for e in group] for group in collisions(entries)])
    if settings is not None:
        summary["settings"] = settings.to_dict()
    write_atomic(out / "summary.json", json.dumps(summary, ensure_ascii=False, indent=2))
    return summary


def _labelled(e: Entry, report: dict[str, Any], settings: RunSettings | None = None) -> dict[str, Any]:
    """The report as the class knows it: names from the upload, each one line (control characters as escapes), and
    the settings it was graded under (the key's fingerprint, never the key)."""
    labelled = {**report, "submission": clean(escape_controls(e.source)), "student": clean(escape_controls(e.student))}
    if settings is not None:
        labelled["settings"] = settings.to_dict()
    return labelled


def _write_report(out: Path, e: Entry, report: dict[str, Any], settings: RunSettings | None = None) -> dict[str, Any]:
    rep = _labelled(e, report, settings)
    # one line, by json's C encoder: indent=2 would take the pure-Python encoder, ~5 ms a report
    write_atomic(out / "reports" / f"{e.slug}.json", json.dumps(rep, ensure_ascii=False))
    return rep


def _start_zygote() -> None:
    if sys.platform == "linux":  # elsewhere no grading process can start (forked.start says why)
        from grader.pool import zygote

        zygote.warm_up()


def _stop_zygote() -> None:
    """Let the zygote exit and reap it, so its (and its workers') CPU time is accounted to this process."""
    if sys.platform == "linux":
        from grader.pool import zygote

        zygote.stop()
