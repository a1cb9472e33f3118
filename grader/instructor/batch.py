"""Grade a whole class: discover submissions, grade them in parallel, keep every result in a resumable index.

Layout of OUT:
  index.sqlite        results keyed by sha256(content hash, grader version, secret hash); never the secret
  gradebook.csv       one row per student, one column per step, the total (cells escaped for spreadsheets)
  reports/NAME.json   one report per submission (DESIGN.md §4)
  feedback/NAME.txt   plain-language feedback per student
  summary.json        per step: mean, share of full marks, most common failed check
  .staging/           what was extracted from zip archives (checked first; nothing lands outside OUT)

The learner's code runs only in workers forked by the zygote (grader.pool.session). The trusted grading
processes are forked by the zygote too, before they learn the secret, so torch is imported once per batch
(by the zygote) and this coordinating process never imports it; each grades chunks of submissions and
sends back the reports as plain dicts.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import hashlib
import io
import json
import os
import re
import selectors
import shutil
import signal
import socket
import sqlite3
import stat
import time
import traceback
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import i18n
from grader.i18n import N_, _
from grader.registry import STEPS
from grader.sandbox.framing import ChannelError, recv_msg, send_msg
from grader.settings import DEFAULT_TIMEOUT, grader_version, resolve_secret

SUFFIXES = (".py", ".ipynb")
IGNORED_DIRS = {"__pycache__", ".ipynb_checkpoints", ".attn-kata", "__MACOSX", ".git"}
# archive limits (per archive): a zip bomb or a hostile archive is rejected with a reason
MAX_MEMBERS = 2000
MAX_MEMBER_BYTES = 16 * 1024 * 1024
MAX_TOTAL_BYTES = 128 * 1024 * 1024
MAX_RATIO = 200  # uncompressed / compressed, for archives that expand past 1 MiB
MAX_ZIP_DEPTH = 2  # an LMS export may hold one zip per student
MAX_DIR_FILES = 500


# ---------------------------------------------------------------- discovery


@dataclass
class Entry:
    """One submission found in DIR: what to grade, or why it cannot be."""

    student: str
    source: str  # where it came from, relative to DIR (zip members as archive.zip/member)
    path: Path | None = None  # what engine.grade gets
    rejected: str = ""  # the reason, when it is not graded at all
    content_hash: str = ""
    slug: str = ""  # file-name-safe unique name for reports/feedback
    key: str = ""


@dataclass
class Discovery:
    entries: list[Entry] = field(default_factory=list)


class UnsafeArchive(Exception):
    pass


_LMS_NAME = re.compile(r"^(.+?)_(?:late_|LATE_)?\d+_")


def student_name(name: str) -> str:
    """The student in an LMS export's file name (Canvas `smithalice_123_456_x.ipynb`,
    Moodle `Alice Smith_123_assignsubmission_file_`), or the name without its suffix."""
    stem = name
    for suf in (*SUFFIXES, ".zip"):
        if stem.lower().endswith(suf):
            stem = stem[: -len(suf)]
            break
    m = _LMS_NAME.match(stem + "_")
    return (m.group(1) if m else stem).strip() or stem


def slugify(name: str) -> str:
    s = re.sub(r"[^\w.\- ]+", "_", name, flags=re.UNICODE).strip(" .")
    return s[:80] or "submission"


def _is_step_dir(p: Path) -> bool:
    return any((p / s.file).is_file() for s in STEPS)


def _walk(p: Path, depth: int = 4) -> Iterator[Path]:
    """Regular files under p (no symlinks followed), skipping editor and cache folders."""
    try:
        children = sorted(p.iterdir())
    except OSError:
        return
    for c in children:
        if c.name in IGNORED_DIRS or c.name.startswith("."):
            continue
        if c.is_symlink():
            yield c
        elif c.is_dir():
            if depth > 0:
                yield from _walk(c, depth - 1)
        elif c.is_file():
            yield c


def _symlinks(p: Path) -> list[Path]:
    return [f for f in _walk(p) if f.is_symlink()]


def _folder_entry(student: str, source: str, p: Path) -> Entry:
    links = _symlinks(p)
    if links:
        return Entry(student, source, rejected=f"contains a symbolic link ({links[0].relative_to(p)})")
    if _is_step_dir(p):
        return Entry(student, source, p)
    files = [f for f in _walk(p) if f.suffix in SUFFIXES]
    nbs = [f for f in files if f.suffix == ".ipynb"]
    pick = nbs if nbs else files
    if len(pick) >= 1:
        # one notebook (or module) per student is the usual case; several: the first by name
        return Entry(student, f"{source}/{pick[0].relative_to(p)}", pick[0])
    zips = [f for f in _walk(p) if f.suffix.lower() == ".zip"]
    if zips:
        return Entry(student, source, p)  # handled by the caller (expanded)
    return Entry(student, source, p)  # graded as an empty workspace: every step "not started"


def safe_extract(archive: Path, dest: Path) -> None:
    """Extract a zip into dest, or raise UnsafeArchive: traversal, absolute names, symlinks,
    encryption, too many members, too large, too compressed. Sizes are counted as bytes are
    written, not taken from the headers (which a bomb can fake)."""
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise UnsafeArchive(f"not a readable zip archive ({exc})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise UnsafeArchive(f"{len(infos)} members; the limit is {MAX_MEMBERS}")
        packed = sum(i.compress_size for i in infos)
        for info in infos:
            name = info.filename
            mode = info.external_attr >> 16
            parts = name.replace("\\", "/").split("/")
            if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in parts or "\x00" in name:
                raise UnsafeArchive(f"member {name!r} points outside the archive (path traversal)")
            if stat.S_ISLNK(mode):
                raise UnsafeArchive(f"member {name!r} is a symbolic link")
            if info.flag_bits & 0x1:
                raise UnsafeArchive(f"member {name!r} is encrypted")
        root = dest.resolve()
        dest.mkdir(parents=True, exist_ok=True)
        total = 0
        for info in infos:
            target = (dest / info.filename.replace("\\", "/")).resolve()
            if root != target and root not in target.parents:
                raise UnsafeArchive(f"member {info.filename!r} points outside the archive (path traversal)")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            written = 0
            try:
                with zf.open(info) as src, open(target, "wb") as dst:
                    while chunk := src.read(1 << 16):
                        written += len(chunk)
                        total += len(chunk)
                        if written > MAX_MEMBER_BYTES:
                            raise UnsafeArchive(f"member {info.filename!r} expands past {MAX_MEMBER_BYTES} bytes")
                        if total > MAX_TOTAL_BYTES:
                            raise UnsafeArchive(f"the archive expands past {MAX_TOTAL_BYTES} bytes (zip bomb?)")
                        if total > (1 << 20) and total > MAX_RATIO * max(packed, 1):
                            raise UnsafeArchive(f"the archive expands more than {MAX_RATIO}x (zip bomb?)")
                        dst.write(chunk)
            except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
                raise UnsafeArchive(f"member {info.filename!r} could not be read ({exc})") from None


def _unwrap(p: Path) -> Path:
    """An archive that holds a single folder: look inside it."""
    while True:
        kids = [c for c in p.iterdir() if c.name not in IGNORED_DIRS and not c.name.startswith(".")]
        if (len(kids) == 1 and kids[0].is_dir() and not kids[0].is_symlink() and not _is_step_dir(p)
                and not _LMS_NAME.match(kids[0].name + "_")):  # a one-student LMS export keeps its folder
            p = kids[0]
        else:
            return p


def discover(directory: str | Path, staging: str | Path) -> list[Entry]:
    """Every submission in DIR: student folders, loose .py/.ipynb files, LMS zip exports."""
    root = Path(directory)
    staging = Path(staging)
    out: list[Entry] = []
    skip = {staging.resolve(), staging.resolve().parent}
    _scan(root, "", staging, out, skip, depth=0)
    _name(out)
    return out


def _scan(folder: Path, prefix: str, staging: Path, out: list[Entry], skip: set[Path], depth: int) -> None:
    if _is_step_dir(folder) and depth > 0:  # a zip that holds one workspace
        out.append(_folder_entry(student_name(prefix.rstrip("/").split("/")[-1]), prefix.rstrip("/"), folder))
        return
    for c in sorted(folder.iterdir()):
        rel = f"{prefix}{c.name}"
        if c.name in IGNORED_DIRS or c.name.startswith(".") or c.resolve() in skip:
            continue
        if c.is_symlink():
            out.append(Entry(student_name(c.name), rel, rejected="is a symbolic link"))
        elif c.is_dir():
            zips = [f for f in _walk(c) if f.suffix.lower() == ".zip" and not f.is_symlink()]
            entry = _folder_entry(student_name(c.name), rel, c)
            if not entry.rejected and entry.path == c and not _is_step_dir(c) and len(zips) == 1:
                _zip(zips[0], f"{rel}/{zips[0].relative_to(c)}", staging, out, skip, depth, student=entry.student)
            else:
                out.append(entry)
        elif c.suffix in SUFFIXES:
            out.append(Entry(student_name(c.name), rel, c))
        elif c.suffix.lower() == ".zip":
            _zip(c, rel, staging, out, skip, depth)


def _zip(archive: Path, rel: str, staging: Path, out: list[Entry], skip: set[Path], depth: int,
         student: str | None = None) -> None:
    name = student or student_name(archive.name)
    if depth >= MAX_ZIP_DEPTH:
        out.append(Entry(name, rel, rejected="an archive nested too deep"))
        return
    dest = staging / hashlib.sha256(rel.encode()).hexdigest()[:16]
    shutil.rmtree(dest, ignore_errors=True)
    try:
        safe_extract(archive, dest)
    except UnsafeArchive as exc:
        shutil.rmtree(dest, ignore_errors=True)
        out.append(Entry(name, rel, rejected=f"unsafe or unreadable archive: {exc}"))
        return
    inner = _unwrap(dest)
    if student is not None or _is_step_dir(inner):
        # one student's archive: their workspace or their notebook
        entry = _folder_entry(name, rel, inner)
        out.append(Entry(name, rel, entry.path, entry.rejected))
        return
    files = [f for f in _walk(inner) if f.suffix in SUFFIXES or f.is_symlink()]
    if len(files) == 1 and not _LMS_NAME.match(files[0].name) and files[0].parent == inner:
        # `alice.zip` holding `attention.ipynb`: the archive's name says who it is
        out.append(Entry(name, f"{rel}/{files[0].name}", files[0]))
        return
    before = len(out)
    _scan(inner, f"{rel}/", staging, out, skip, depth + 1)
    if len(out) == before:
        out.append(Entry(name, rel, rejected="the archive holds no .py or .ipynb submission"))


def _name(entries: list[Entry]) -> None:
    seen: Counter[str] = Counter()
    for e in entries:
        base = slugify(e.student)
        seen[base.lower()] += 1
        n = seen[base.lower()]
        e.slug = base if n == 1 else f"{base} ({n})"
        if n > 1:
            e.student = f"{e.student} ({n})"


# ---------------------------------------------------------------- keys and the index


def content_hash(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_dir():
        for f in sorted(_walk(path)):
            if f.suffix not in SUFFIXES or f.is_symlink():
                continue
            h.update(str(f.relative_to(path)).encode() + b"\0")
            h.update(hashlib.sha256(f.read_bytes()).digest())
    else:
        h.update(b"file:" + path.suffix.encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def secret_hash(secret: str) -> str:
    return hashlib.sha256(b"attn-kata secret\0" + secret.encode()).hexdigest()


def result_key(chash: str, version: str, shash: str, lang: str = "en") -> str:
    return hashlib.sha256(f"{chash}\0{version}\0{shash}\0{lang}".encode()).hexdigest()


class Index:
    """SQLite, one row per graded content: safe to kill at any moment (each insert is its own transaction)."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(str(path), timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("""CREATE TABLE IF NOT EXISTS results (
            key TEXT PRIMARY KEY, content_hash TEXT NOT NULL, grader_version TEXT NOT NULL,
            secret_hash TEXT NOT NULL, report TEXT NOT NULL, seconds REAL, graded_at REAL)""")

    def get(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT report FROM results WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def keys(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT key FROM results")}

    def put(self, e: Entry, version: str, shash: str, report: dict[str, Any], seconds: float) -> None:
        self.db.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (e.key, e.content_hash, version, shash, json.dumps(report, ensure_ascii=False),
                         seconds, time.time()))

    def clear(self) -> None:
        self.db.execute("DELETE FROM results")

    def close(self) -> None:
        self.db.close()


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---------------------------------------------------------------- grading processes (trusted)
#
# The zygote forks them (`Zygote.grader`), before they know the secret: they share its torch import, so
# torch is imported once per batch, and this coordinating process never imports it at all. Each gets its
# settings, then chunks of submissions, over a socket of its own; it asks the zygote for a worker per
# submission like any grading process, judges the chunk in one pytest session and sends back the reports.
# Messages are JSON, never pickles: no byte a worker could ever have written is unpickled anywhere.

_GRADE_ARGS: dict[str, Any] = {}
GRADING_ENTRY = f"{__name__}:grading_process"  # what the zygote runs in a grading process it forks
_MAX_MESSAGE = 256 * 1024 * 1024  # a chunk's reports
_LOST = (EOFError, OSError, ChannelError, ValueError)  # the other end is gone, or garbled


def _send(sock: socket.socket, obj: Any) -> None:
    send_msg(sock, json.dumps(obj, ensure_ascii=False, allow_nan=False).encode())


def _recv(sock: socket.socket) -> Any:
    return json.loads(recv_msg(sock, max_bytes=_MAX_MESSAGE))


def grading_process(fd: int) -> None:
    """The main loop of a grading process (forked by the zygote): settings, then chunk after chunk."""
    import torch

    from grader.pool.session import WeakSandbox

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinating process decides what Ctrl-C means
    torch.set_num_threads(1)
    sock = socket.socket(fileno=fd)
    try:
        _GRADE_ARGS.update(_recv(sock))
        _limit_memory(int(_GRADE_ARGS.get("memory_bytes") or GRADING_MEMORY))
        while True:
            chunk = _recv(sock)
            try:
                _send(sock, _grade_chunk(chunk))
            except WeakSandbox as exc:  # instructor grading on a machine without the layers it needs
                _send(sock, {"weak_sandbox": str(exc)})
    except _LOST:
        return  # the batch is over (or gone)


GRADING_MEMORY = 4 * 1024**3  # address space a grading process may add to what it inherited


def _limit_memory(extra: int) -> None:
    """A grading process judges learner tensors: whatever they provoke, it fails alone (MemoryError: that
    submission's error) rather than waking the OOM killer for the whole machine."""
    import resource

    with open("/proc/self/statm") as f:
        have = int(f.read().split()[0]) * resource.getpagesize()
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (have + extra, resource.getrlimit(resource.RLIMIT_AS)[1]))


def _collect_one(job: tuple[int, str]) -> tuple[int, Any, str, float]:
    """Run one submission in a worker; (index, engine.Collected or None, error, seconds)."""
    from grader.grading import engine
    from grader.pool.session import WeakSandbox

    i, path = job
    start = time.monotonic()
    try:
        col = engine.collect(path, secret=_GRADE_ARGS["secret"], timeout=_GRADE_ARGS["timeout"],
                             lang=_GRADE_ARGS["lang"], config={"require_strong": _GRADE_ARGS.get("require_strong")})
        return i, col, "", time.monotonic() - start
    except WeakSandbox:
        raise
    except Exception as exc:  # a grader bug or an infrastructure error: listed, never a 0
        return i, None, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}", time.monotonic() - start


def _grade_chunk(chunk: list[tuple[int, str]]) -> list[tuple[int, dict[str, Any] | None, str, float]]:
    """Collect a few submissions, then judge them in one pytest session (its start-up is shared)."""
    from grader.grading import engine

    done = [_collect_one(job) for job in chunk]
    ok = [(i, col, secs) for i, col, _, secs in done if col is not None]
    start = time.monotonic()
    try:
        reports = engine.judge([col for _, col, _ in ok], secret=_GRADE_ARGS["secret"])
    except Exception as exc:
        err = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
        return [(i, None, err or e, secs) for i, _, e, secs in done]
    share = (time.monotonic() - start) / max(1, len(ok))
    out = [(i, None, err, secs) for i, col, err, secs in done if col is None]
    out += [(i, rep.to_dict(), "", secs + share) for (i, _, secs), rep in zip(ok, reports, strict=True)]
    return out


MAX_CHUNK = 24


def _chunks(jobs: list[tuple[int, str]], workers: int) -> list[list[tuple[int, str]]]:
    """Guided: big chunks first (one pytest session judges a whole chunk, so its start-up is shared),
    shrinking towards the end so that no grading process is left with a long tail; 1 for small batches."""
    out, k = [], 0
    while k < len(jobs):
        size = max(1, min(MAX_CHUNK, (len(jobs) - k) // (workers * 2)))
        out.append(jobs[k:k + size])
        k += size
    return out


# ---------------------------------------------------------------- outputs

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def gradebook_csv(entries: list[Entry], reports: dict[str, dict[str, Any] | None], notes: dict[str, str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(["student", "submission", *[s.id for s in STEPS], "total", "max_score", "status"])
    max_total = next((r["max_score"] for r in reports.values() if r is not None), "")
    for e in entries:
        r = reports.get(e.slug)
        if r is not None:
            by = {s["id"]: s["score"] for s in r["steps"]}
            row = [e.student, e.source, *[_num(by.get(s.id, 0)) for s in STEPS], _num(r["score"]),
                   _num(r["max_score"]), "graded"]
        else:
            row = [e.student, e.source, *["" for _ in STEPS], 0, _num(max_total) if max_total != "" else "",
                   f"not graded: {notes.get(e.slug, '')}"]
        w.writerow([csv_cell(c) for c in row])
    return buf.getvalue()


def _num(x: float) -> Any:
    return int(x) if float(x).is_integer() else x


def feedback_text(student: str, report: dict[str, Any] | None, reason: str = "", lang: str = "en") -> str:
    """Plain-language feedback for one student, in `lang`."""
    with i18n.using(lang):
        return _feedback_text(student, report, reason)


def _feedback_text(student: str, report: dict[str, Any] | None, reason: str) -> str:
    number = {s.id: s.number for s in STEPS}
    if report is None:
        return (_("Feedback for {student}").format(student=student) + "\n\n"
                + _("Your submission could not be graded: {reason}").format(reason=reason) + "\n"
                + _("Please resubmit a .py file, a notebook (.ipynb) or a folder like exercises/.") + "\n")
    lines = [_("Feedback for {student}").format(student=student),
             _("Submission: {name}").format(name=report["submission"]),
             _("Score: {score:g} out of {max_score:g}").format(score=report["score"], max_score=report["max_score"]),
             ""]
    words = {"passed": N_("passed, well done"), "partial": N_("partly right"), "failed": N_("not right yet"),
             "not_started": N_("not started"), "error": N_("could not run")}
    for s in report["steps"]:
        title = s["title"]
        if not re.match(r"^(Step|步骤)", title):
            title = _("Step {n}. {title}").format(n=number.get(s["id"], "?"), title=title)
        word = _(words[s["status"]]) if s["status"] in words else s["status"]
        lines.append(f"{title}: {word} ({s['score']:g}/{s['max_score']:g})")
        if s["status"] == "error" and s.get("message"):
            lines.append("    " + _("What went wrong: {message}").format(message=s["message"]))
        elif s["status"] in ("partial", "failed"):
            for c in s["checks"]:
                if not c["passed"]:
                    lines.append(f"    - {c['name']}: {c['message']}" if c["message"] else f"    - {c['name']}")
    todo = [s for s in report["steps"] if s["status"] != "passed"]
    lines.append("")
    if not todo:
        lines.append(_("Every step passes. Well done!"))
    else:
        first = todo[0]
        lines.append(_("Next: work on step {n} ({step}); `attn-kata hint {step}` gives a hint.").format(
            n=number.get(first["id"], "?"), step=first["id"]))
    for note in report.get("notes") or []:
        lines.append(_("Note: {note}").format(note=note))
    return "\n".join(lines) + "\n"


def class_summary(reports: list[dict[str, Any]]) -> dict[str, Any]:
    steps = []
    for s in STEPS:
        rows = [st for r in reports for st in r["steps"] if st["id"] == s.id]
        failed: Counter[str] = Counter(c["name"] for st in rows for c in st["checks"]
                                       if not c["passed"] and st["status"] in ("partial", "failed"))
        top = failed.most_common(1)
        steps.append({
            "id": s.id, "number": s.number,
            "max_score": rows[0]["max_score"] if rows else None,
            "mean": round(sum(st["score"] for st in rows) / len(rows), 4) if rows else None,
            "full_marks_share": round(sum(st["score"] == st["max_score"] for st in rows) / len(rows), 4)
            if rows else None,
            "most_common_failed_check": {"name": top[0][0], "count": top[0][1]} if top else None,
        })
    totals = [r["score"] for r in reports]
    return {"submissions": len(reports), "mean": round(sum(totals) / len(totals), 4) if totals else None,
            "max_score": reports[0]["max_score"] if reports else None, "steps": steps}


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

    @property
    def ok(self) -> bool:
        return not self.not_graded and self.records == self.total


ProgressHook = Callable[[int, int], None]


class GradingUnavailable(Exception):
    """No grading process could be started (twice, the second time with a fresh zygote): the batch stops,
    keeping what it graded; nothing is recorded for the rest."""


class WeakSandboxError(GradingUnavailable):
    """Grading with a secret needs sandbox layers this machine does not provide (`attn-kata doctor`)."""


class _Grader:
    """One trusted grading process (forked by the zygote) and the chunk it is working on."""

    def __init__(self, settings: dict[str, Any]):
        from grader.pool import zygote

        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                self.pid = zygote.zygote().grader(theirs.fileno(), GRADING_ENTRY)
            except (OSError, ValueError):  # the zygote is gone: once more with a fresh one
                try:
                    self.pid = zygote.zygote(fresh=True).grader(theirs.fileno(), GRADING_ENTRY)
                except (OSError, ValueError) as exc:
                    self.sock.close()
                    raise GradingUnavailable(f"could not start a grading process: {exc}") from None
        finally:
            theirs.close()
        self.chunk: list[tuple[int, str]] = []
        self.tries = 0  # earlier attempts at this chunk, by grading processes that died
        _send(self.sock, settings)

    def give(self, chunk: list[tuple[int, str]], tries: int) -> None:
        self.chunk, self.tries = chunk, tries
        _send(self.sock, chunk)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        self.sock.close()

    def gone(self) -> bool:
        from grader.pool.zygote import running

        return not running(self.pid)


def _grade_in_pool(chunks: list[list[tuple[int, str]]], jobs: int, settings: dict[str, Any],
                   record: Callable[[list[Any]], None], lost: Callable[[list[tuple[int, str]]], None]) -> None:
    """Hand the chunks to `jobs` grading processes, the next chunk to whichever finishes first. A grading
    process that dies (the OOM killer, a grader bug) is replaced and its chunk retried once."""
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
                    results = _recv(g.sock)
                    if isinstance(results, dict) and "weak_sandbox" in results:
                        raise WeakSandboxError(str(results["weak_sandbox"]))
                except _LOST:
                    g.kill()
                    retired.append(g)
                    if g.tries == 0:
                        queue.appendleft((g.chunk, 1))
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
              progress: Callable[[int], Any] | None = None, start: Callable[[int, int], Any] | None = None,
              allow_weak_sandbox: bool = False) -> BatchResult:
    """Grade every submission in `directory` into `out`. `start(total, already_done)` and
    `progress(n_done_now)` let a caller draw a progress bar."""
    t0 = time.monotonic()
    directory, out = Path(directory), Path(out)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: not a directory")
    out.mkdir(parents=True, exist_ok=True)
    secret = resolve_secret(secret)
    version = grader_version()
    shash = secret_hash(secret)
    entries = discover(directory, out / ".staging")
    for e in entries:
        if e.path is not None and not e.rejected:
            try:
                e.content_hash = content_hash(e.path)
            except OSError as exc:
                e.rejected = f"could not be read ({exc})"
                continue
            e.key = result_key(e.content_hash, version, shash, lang)

    index = Index(out / "index.sqlite")
    if not resume:
        index.clear()
    done = index.keys()
    todo: dict[str, list[Entry]] = {}
    for e in entries:
        if e.key and e.key not in done:
            todo.setdefault(e.key, []).append(e)
    gradable = sum(1 for e in entries if e.key)
    if start:
        start(len(entries), len(entries) - sum(len(v) for v in todo.values()))

    failures: dict[str, str] = {}
    written: set[str] = set()  # reports written as they arrived, in this run
    jobs = max(1, jobs or os.cpu_count() or 1)
    work = [(i, str(group[0].path)) for i, group in enumerate(todo.values())]
    groups = list(todo.values())
    if work:
        settings = {"secret": secret, "timeout": timeout if timeout is not None else DEFAULT_TIMEOUT, "lang": lang,
                    # with a secret, scores must be trustworthy: no grading on a sandbox missing a needed layer
                    "require_strong": bool(secret) and not allow_weak_sandbox}

        def record(results: list[tuple[int, dict[str, Any] | None, str, float]]) -> None:
            for i, report, err, secs in results:
                group = groups[i]
                if report is None:
                    for e in group:
                        failures[e.slug] = f"internal error: {err.splitlines()[0] if err else 'unknown'}"
                else:
                    index.put(group[0], version, shash, report, secs)
                    for e in group:
                        _write_report(out, e, report)
                        written.add(e.slug)
                if progress:
                    progress(len(group))

        def lost(chunk: list[tuple[int, str]]) -> None:
            for i, _path in chunk:
                for e in groups[i]:
                    failures[e.slug] = "internal error: the grading process died twice"
                if progress:
                    progress(len(groups[i]))

        _grade_in_pool(_chunks(work, jobs), jobs, settings, record, lost)

    # the final pass: exactly one record per submission, from the index
    reports: dict[str, dict[str, Any] | None] = {}
    notes: dict[str, str] = {}
    for e in entries:
        rep = index.get(e.key) if e.key else None
        if rep is not None:
            rep = _labelled(e, rep) if e.slug in written else _write_report(out, e, rep)
            reports[e.slug] = rep
            write_atomic(out / "feedback" / f"{e.slug}.txt", feedback_text(e.student, rep, lang=lang))
        else:
            reason = e.rejected or failures.get(e.slug, "no result")
            notes[e.slug] = reason
            reports[e.slug] = None
            write_atomic(out / "feedback" / f"{e.slug}.txt", feedback_text(e.student, None, reason, lang=lang))
    index.close()
    if work:
        _stop_zygote()
    write_atomic(out / "gradebook.csv", gradebook_csv(entries, reports, notes))
    summary = class_summary([r for r in reports.values() if r is not None])
    records = sum(1 for r in reports.values() if r is not None) + len(notes)
    summary.update(records=records, total=len(entries), gradable=gradable,
                   not_graded=[{"student": e.student, "source": e.source, "reason": notes[e.slug]}
                               for e in entries if e.slug in notes])
    write_atomic(out / "summary.json", json.dumps(summary, ensure_ascii=False, indent=2))
    return BatchResult(len(entries), len(work), len(entries) - sum(len(g) for g in groups), records,
                       {e.student: notes[e.slug] for e in entries if e.slug in notes},
                       time.monotonic() - t0, summary, out)


def _labelled(e: Entry, report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "submission": e.source, "student": e.student}


def _write_report(out: Path, e: Entry, report: dict[str, Any]) -> dict[str, Any]:
    rep = _labelled(e, report)
    # one line, by json's C encoder: indent=2 would take the pure-Python encoder, ~5 ms a report
    write_atomic(out / "reports" / f"{e.slug}.json", json.dumps(rep, ensure_ascii=False))
    return rep


def _stop_zygote() -> None:
    """Let the zygote exit and reap it, so its (and its workers') CPU time is accounted to this process."""
    from grader.pool import zygote

    zygote.stop()
