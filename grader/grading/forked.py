"""Trusted grading processes forked from the zygote, and one submission graded in one (importable without torch).

The zygote imported torch (never the reference, never the secret); a grading process forked from it shares that
import, learns its settings and the secret afterwards over a socket of its own, imports the reference then, asks
the zygote for its workers over the connection the zygote made for it at the fork (grader.pool.zygote), and sends
back plain JSON. A batch keeps a pool of them (grader.instructor.batch); a single submission (`grade`, `check`,
Gradescope's and PrairieLearn's run) gets one (`grade` below): either way the process that started the zygote
never imports torch, so a cold grade pays for one torch import, not two.

Messages are JSON, never pickles: no byte a worker could ever have written is unpickled anywhere.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from grader import i18n, limits
from grader.files import without_surrogates
from grader.pool.errors import InfrastructureError, WeakSandbox
from grader.report import Report
from grader.sandbox.framing import ChannelError, recv_msg, send_msg
from grader.settings import backend, resolve_secret

MAX_MESSAGE = limits.GRADING_MESSAGE_BYTES  # a batch chunk's reports
# the other end is gone, or what it sent is garbled (not JSON, not UTF-8); never a failure to encode our own message
LOST = (EOFError, OSError, ChannelError, json.JSONDecodeError, UnicodeDecodeError)
GRADING_MEMORY = limits.GRADING_MEMORY  # address space a grading process may add to what it inherited
# what the trusted side reads from its environment (grader.grading.reference, engine.strong_required): a grading
# process has the zygote's filtered one, so these travel with its settings (the secret travels as a value)
TRUSTED_ENV = ("ATTN_KATA_SOLUTIONS", "ATTN_KATA_ALLOW_WEAK_SANDBOX")


class Unavailable(InfrastructureError):
    """No grading process could be started (twice, the second time with a fresh zygote)."""


def encode(obj: Any) -> bytes:
    """ASCII JSON: a lone surrogate (a file name decoded with surrogateescape, learner text in a report) travels as
    an escape and arrives as it was."""
    return json.dumps(obj, ensure_ascii=True, allow_nan=False).encode()


def encode_results(obj: Any) -> bytes:
    """What a batch's grading process sends back, as UTF-8 JSON with every lone surrogate made U+FFFD: learner text
    that reached a report without report.clean (a notebook's magic line quoted in a note) could otherwise not be
    written by the coordinating process (a report file, the index) and would stop the whole batch."""
    return without_surrogates(json.dumps(obj, ensure_ascii=False, allow_nan=False)).encode()


def send(sock: socket.socket, obj: Any) -> None:
    send_msg(sock, encode(obj))


def recv(sock: socket.socket) -> Any:
    return json.loads(recv_msg(sock, max_bytes=MAX_MESSAGE))


def start(entry: str, *, become: bool = False) -> tuple[socket.socket, int]:
    """Fork a trusted grading process from this process's zygote (a fresh zygote if that one is gone) that runs
    `entry` ("module:function") on its end of a new socketpair; (our end, its pid). `become`: one submission's
    grading process, which a zygote that has forked nothing yet becomes itself after forking its worker
    (grader.pool.zygote's `become`: one process with torch fewer); else forked as a batch's are."""
    if sys.platform != "linux":  # `wanted` is never true elsewhere: a batch there grades in this process
        raise Unavailable(f"{sys.platform} has no zygote to fork a grading process from")
    from grader.pool import zygote

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            z = zygote.zygote()
            ask = z.become if become and z.can_become() else z.grader
            pid = ask(theirs.fileno(), entry)
        except (OSError, ValueError):  # the zygote is gone: once more with a fresh one
            try:
                pid = zygote.zygote(fresh=True).grader(theirs.fileno(), entry)
            except (OSError, ValueError) as exc:
                ours.close()
                raise Unavailable(f"could not start a grading process: {exc}") from None
    finally:
        theirs.close()
    return ours, pid


def settings_env() -> dict[str, str]:
    return {k: os.environ[k] for k in TRUSTED_ENV if k in os.environ}


def enter(fd: int, settings: dict[str, Any] | None = None) -> tuple[socket.socket, dict[str, Any]]:
    """The first moments of a grading process (forked by the zygote): Ctrl-C is the starter's to decide, one torch
    thread, its settings read from `fd` (with the environment the trusted side reads, and the starter's folder), an
    address-space limit. Its socket and settings."""
    import torch

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    sock = socket.socket(fileno=fd)
    settings = settings if settings is not None else recv(sock)
    os.environ.update(settings.get("env") or {})
    if settings.get("cwd"):
        os.chdir(settings["cwd"])
    limit_memory(int(settings.get("memory_bytes") or GRADING_MEMORY))
    return sock, settings


def limit_memory(extra: int) -> None:
    """A grading process judges learner tensors: whatever they provoke, it fails alone (MemoryError: that
    submission's error) rather than waking the OOM killer for the whole machine."""
    if sys.platform != "linux":  # grading processes are the Linux backend's
        return
    import resource

    with open("/proc/self/statm") as f:
        have = int(f.read().split()[0]) * resource.getpagesize()
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (have + extra, resource.getrlimit(resource.RLIMIT_AS)[1]))


# ---------------------------------------------------------------- one submission

ENTRY = f"{__name__}:grading_process"  # what the zygote runs in the grading process it forks for `grade`
RESIDENT_ENTRY = f"{__name__}:resident_process"  # the daemon's: one grading process for every `check` it serves


class _Resident:
    """The daemon's grading process (`keep_resident`): forked once, then every grade goes to it, so the reference's
    results it computed for the first serve the next and the daemon itself never imports torch. It holds no secret
    (the daemon serves none). Replaced when it dies, or when the environment the trusted side reads differs from
    the one it started with (its reference would be another's)."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.env: dict[str, str] = {}

    def ask(self, settings: dict[str, Any]) -> Any:
        if self.sock is not None and self.env != settings["env"]:
            self.close()
        if self.sock is None:
            self.sock, _pid = start(RESIDENT_ENTRY)
            self.env = dict(settings["env"])
        try:
            self.sock.settimeout(answer_timeout(settings))
            send(self.sock, settings)
            return recv(self.sock)
        except BaseException:  # lost, or interrupted mid-answer: its next answer would be this one's
            self.close()
            raise

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None


_resident: _Resident | None = None


def keep_resident() -> None:
    """From now on, grade in one grading process kept for this process's life (the daemon), started now: it imports
    the reference and computes its results for the no-secret cases while the daemon waits for its first client."""
    global _resident
    if _resident is None:
        _resident = _Resident()
    with contextlib.suppress(InfrastructureError, *LOST):
        _resident.ask({"warm": True, "env": settings_env(), "cwd": os.getcwd()})


def wanted() -> bool:
    """Grade in a forked grading process? On the Linux backend, unless this process has already imported torch
    (the warm daemon, a Python session, a test): there the trusted side costs no second import, and the reference's
    results it keeps serve the next grade."""
    return sys.platform == "linux" and backend() == "linux" and "torch" not in sys.modules


def grade(path: str | Path, *, steps: list[str] | None = None, secret: str | None = None,
          timeout: float | None = None, lang: str = "en", config: dict[str, Any] | None = None,
          pictures: bool = False) -> Report:
    """engine.grade, run in a trusted process forked from the zygote (`wanted`), else here: the same report.
    `pictures`: each step also carries its attention-weight matrices (StepResult.pictures), as engine.grade's
    `pictures=True` gives them; from a grading process as `PlainMatrix`es, which grader.render draws alike.
    Raises WeakSandbox and InfrastructureError as engine.grade does; a grader bug there is GradingFailed."""
    from grader.settings import DEFAULT_TIMEOUT

    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    if not wanted():
        from grader.grading import engine

        return engine.grade(path, steps=steps, secret=secret, timeout=timeout, config=config,
                            pictures=pictures).worded(lang)
    settings = {"path": os.fsdecode(path), "steps": list(steps) if steps else None, "secret": resolve_secret(secret),
                "timeout": timeout, "config": config or {}, "env": settings_env(), "cwd": os.getcwd(),
                "pictures": pictures}
    for attempt in (1, 2):  # a grading process that dies (the OOM killer, a crash) is replaced once
        try:
            if _resident is not None:
                answer = _resident.ask(settings)
            else:
                sock, _pid = start(ENTRY, become=True)
                try:
                    sock.settimeout(answer_timeout(settings))
                    send(sock, settings)
                    answer = recv(sock)
                except TimeoutError:  # stopped or wedged (whatever did it): ended now, never waited for again
                    _end_spent_zygote()
                    raise
                finally:
                    sock.close()
        except LOST as exc:
            if attempt == 2:
                raise InfrastructureError(f"the grading process died twice ({type(exc).__name__})") from None
            continue
        if not isinstance(answer, dict):
            raise InfrastructureError("the grading process sent a malformed answer")
        if "report" in answer:
            report = Report.from_data(answer["report"])  # unworded: worded here, for this reader
            drawn = answer.get("pictures") or {}
            for step in report.steps:
                step.pictures = [PlainMatrix.from_dict(m) for m in drawn.get(step.id, [])]
            return report.worded(lang)
        if "weak_sandbox" in answer:
            raise WeakSandbox(str(answer["weak_sandbox"]))
        if "infrastructure" in answer:
            raise InfrastructureError(str(answer["infrastructure"]))
        raise GradingFailed(str(answer.get("error", "the grading process failed")))
    raise AssertionError("unreachable")


ANSWER_MARGIN = 60.0  # seconds past the longest a grading process can honestly take: its reference, a fresh zygote


def answer_timeout(settings: dict[str, Any]) -> float:
    """How long to wait for a grading process's answer: its submission's whole budget (engine.collect's), two
    imports of the code (a second pass, in a worker of a fresh zygote) and a margin. Past it the process is not
    answering (a stopped process, a wedged one) and a command that waits for it would wait forever."""
    from grader.settings import LOAD_TIMEOUT

    step = float(settings.get("timeout") or 0) or limits.STEP_TIMEOUT
    budget = float((settings.get("config") or {}).get("budget") or limits.SUBMISSION_BUDGET * step)
    return budget + 2 * LOAD_TIMEOUT + ANSWER_MARGIN


def _end_spent_zygote() -> None:
    """A zygote that became the grading process and stopped answering: kill it (our own child, not yet reaped: its
    pid is still its own); its watch of our connection, which would end it and its worker, may not be running."""
    if sys.platform != "linux":
        return
    from grader.pool import zygote

    z = zygote.current()
    if isinstance(z, zygote.Zygote) and z.spent:
        z.stop(wait=0.0)


class GradingFailed(Exception):
    """The grading process met a grader bug (its exception, said in the message)."""


def grading_process(fd: int) -> None:
    """The grading process of one submission: its settings, engine.grade, the report as a dict; then it exits."""
    try:
        sock, settings = enter(fd)
    except LOST:
        return  # the starter is gone
    _answer(sock, settings)


def resident_process(fd: int) -> None:
    """The daemon's grading process (`keep_resident`): each message a submission's settings (or a warm-up), each
    answered as grading_process answers one, until the daemon closes its end."""
    try:
        sock, settings = enter(fd)
        while True:
            if settings.get("warm"):
                from grader.grading import engine

                engine.prepared_requests("")  # the no-secret cases and the reference's results, once
                send(sock, {"warm": True})
            else:
                os.chdir(settings["cwd"])  # the client's folder: a relative path in its command is its own
                _answer(sock, settings)
            settings = recv(sock)
    except LOST:
        return  # the daemon is gone, or closed its end


def _answer(sock: socket.socket, settings: dict[str, Any]) -> None:
    """Grade the submission `settings` names and send the answer: a report (unworded), or why there is none."""
    try:
        from grader.grading import engine

        path, steps, secret = settings["path"], settings["steps"], settings["secret"]
        config = dict(settings["config"])
        # said outright: engine.start's worker set-up would otherwise look for the secret in the environment
        config.setdefault("require_strong", engine.strong_required(config, secret))
        # engine.grade, with the worker started first (as a batch does): it confines itself and imports the
        # submission while this process imports the reference and computes its results
        started = engine.start(path, steps=steps, config=config)
        try:
            col = engine.collect(path, steps=steps, secret=secret, timeout=settings["timeout"], config=config,
                                 started=started)
        finally:
            started.close()
        report = engine.judge([col], secret=secret, with_pictures=bool(settings.get("pictures")))[0]
        answer: dict[str, Any] = {"report": report.to_data()}  # its messages unworded (grader.i18n.to_data)
        if settings.get("pictures"):
            answer["pictures"] = {s.id: [plain_matrix(m) for m in s.pictures] for s in report.steps if s.pictures}
    except WeakSandbox as exc:  # before InfrastructureError: it is one
        answer = {"weak_sandbox": str(exc)}
    except InfrastructureError as exc:
        answer = {"infrastructure": str(exc)}
    except Exception as exc:  # a grader bug: said by the starter, never a score
        answer = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=5)}
    try:
        data = encode(answer)
    except (TypeError, ValueError) as exc:  # a report json cannot hold (a NaN score: a grader bug)
        data = encode({"error": f"the report could not be encoded: {type(exc).__name__}: {exc}"})
    with contextlib.suppress(*LOST):
        send_msg(sock, data)


# ---------------------------------------------------------------- pictures, without torch

def _cell(v: Any) -> Any:
    """A matrix entry as JSON holds it: a finite float as it is (repr: exact), a bool as it is, else its name."""
    return v if isinstance(v, bool) or math.isfinite(v) else repr(v)  # 'nan', 'inf', '-inf'


def _rows(t: Any) -> list[list[Any]] | None:
    return None if t is None else [[_cell(v) for v in row] for row in t.tolist()]


def plain_matrix(m: Any) -> dict[str, Any]:
    """A grader.grading.pictures.Matrix as plain data, with what the renderers read of it computed here."""
    return {"step": m.step, "case": m.case, "label": m.label, "note": i18n.to_data(m.note), "want": _rows(m.want),
            "got": _rows(m.got), "leaked": _rows(m.leaked), "differs": _rows(m.differs),
            "leak_count": m.leak_count, "vmax": m.vmax, "comparable": m.comparable}


class Grid:
    """A matrix as nested lists, read as the renderers read a tensor: `.shape`, `[i, j]`."""

    def __init__(self, rows: list[list[Any]]):
        self.rows = [[float(v) if isinstance(v, str) else v for v in row] for row in rows]  # 'nan' -> nan
        self.shape = (len(self.rows), len(self.rows[0]) if self.rows else 0)

    def __getitem__(self, ij: tuple[int, int]) -> Any:
        return self.rows[ij[0]][ij[1]]


class PlainMatrix:
    """What a grading process sends of a pictures.Matrix: the same attributes grader.render reads (step, case,
    label, note, want, got, leaked, differs, leak_count, vmax, comparable), with no torch in this process."""

    def __init__(self, d: dict[str, Any]):
        self.step, self.case, self.label = str(d["step"]), str(d["case"]), str(d["label"])
        self.note = i18n.from_data(d["note"])  # worded with its report (`worded`)
        self.want = Grid(d["want"])
        self.got, self.leaked, self.differs = (Grid(d[k]) if d.get(k) is not None else None
                                               for k in ("got", "leaked", "differs"))
        self.leak_count, self.vmax, self.comparable = int(d["leak_count"]), float(d["vmax"]), bool(d["comparable"])

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PlainMatrix:
        return cls(d)

    def worded(self, lang: str | None) -> PlainMatrix:
        worded = copy.copy(self)
        worded.note = i18n.word(self.note, lang)
        return worded
