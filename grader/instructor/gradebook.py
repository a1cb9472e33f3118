"""What a batch leaves in OUT for people: the gradebook, feedback, the class summary, and the index that
makes a batch resumable (results keyed by content and the settings that change a score: the key's fingerprint,
the time-out, the steps, the grader's version; the index, every report, the summary and the gradebook record
those settings, so a resume under others is refused and a result's key can be seen afterwards)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import sqlite3
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grader import i18n
from grader.i18n import N_, _
from grader.instructor.discovery import Entry, escape_controls
from grader.registry import STEPS
from grader.report import clean
from grader.settings import NO_KEY, key_fingerprint  # noqa: F401 - this module's API too (shared with grade --secret)

# ---------------------------------------------------------------- keys and the index


@dataclass(frozen=True)
class RunSettings:
    """What changes a score, as a batch records it: results graded under other settings are never mixed with or
    replaced by this run's without --regrade (grader.instructor.batch.check_out)."""

    key_fingerprint: str
    timeout: float  # seconds per step
    steps: str  # the steps graded, comma-separated in the registry's order; "all" for every step
    grader_version: str

    @classmethod
    def of(cls, secret: str, timeout: float, steps: list[str] | None, version: str) -> RunSettings:
        chosen = set(steps or ())
        known = [s.id for s in STEPS if s.id in chosen]
        return cls(key_fingerprint(secret), float(timeout),
                   ",".join(known + sorted(chosen - set(known))) or "all", version)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def differences(self, recorded: dict[str, Any]) -> list[tuple[str, Any, Any]]:
        """(setting, as recorded, as now) for each setting that differs from `recorded` (a `to_dict`)."""
        out = []
        for name, now in self.to_dict().items():
            was = recorded.get(name)
            same = was == now if name != "timeout" else isinstance(was, int | float) and float(was) == now
            if not same:
                out.append((name, was, now))
        return out


def result_key(chash: str, settings: RunSettings) -> str:
    """An index row's key: the same content under the same settings (key, time-out, steps, grader). The language is
    not in it: the index keeps results unworded ("data", a shape an index of worded results never matches)."""
    return hashlib.sha256(f"{chash}\0{settings.grader_version}\0{settings.key_fingerprint}\0{settings.steps}\0"
                          f"{settings.timeout!r}\0data".encode()).hexdigest()


class IndexUnreadable(Exception):
    """OUT/index.sqlite is not an index a batch wrote (or cannot be read): nothing is graded over it."""


def recorded_settings(path: Path) -> tuple[dict[str, Any] | None, int]:
    """What the index at `path` says it was graded under, and how many results it holds, read without creating
    anything: (None, 0) where there is no index; (None, n) for an index that recorded no settings (an older
    grader's). IndexUnreadable where it is not an index."""
    if not path.exists():
        return None, 0
    try:
        db = sqlite3.connect(str(path), timeout=30, isolation_level=None)
    except sqlite3.Error as exc:
        raise IndexUnreadable(str(exc)) from None
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        n = db.execute("SELECT COUNT(*) FROM results").fetchone()[0] if "results" in tables else 0
        row = db.execute("SELECT value FROM meta WHERE name = 'settings'").fetchone() if "meta" in tables else None
        settings = json.loads(row[0]) if row else None
    except (sqlite3.Error, ValueError) as exc:
        raise IndexUnreadable(str(exc)) from None
    finally:
        db.close()
    if settings is not None and not isinstance(settings, dict):
        raise IndexUnreadable("its settings are not a record")
    return settings, n


class Index:
    """SQLite, one row per graded content: safe to kill at any moment (each insert is its own transaction). The
    settings it was graded under (RunSettings) are in `meta`; each row keeps its key's fingerprint."""

    RESULTS = """CREATE TABLE IF NOT EXISTS results (
            key TEXT PRIMARY KEY, content_hash TEXT NOT NULL, grader_version TEXT NOT NULL,
            key_fingerprint TEXT NOT NULL, report TEXT NOT NULL, seconds REAL, graded_at REAL)"""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(str(path), timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(self.RESULTS)
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def get(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT report FROM results WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def keys(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT key FROM results")}

    def put(self, e: Entry, settings: RunSettings, report: dict[str, Any], seconds: float) -> None:
        self.db.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (e.key, e.content_hash, settings.grader_version, settings.key_fingerprint,
                         json.dumps(report, ensure_ascii=False), seconds, time.time()))

    def settings(self) -> dict[str, Any] | None:
        row = self.db.execute("SELECT value FROM meta WHERE name = 'settings'").fetchone()
        return json.loads(row[0]) if row else None

    def start(self, settings: RunSettings) -> None:
        """A fresh run (or --regrade): every result goes (an older grader's table too), the settings are this run's."""
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("DROP TABLE IF EXISTS results")
        self.db.execute(self.RESULTS)
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('settings', ?)", (json.dumps(settings.to_dict()),))
        self.db.execute("COMMIT")

    def record(self, settings: RunSettings) -> None:
        """A resume of a run that graded nothing yet and recorded no settings: this run's are recorded."""
        self.db.execute("INSERT OR IGNORE INTO meta VALUES ('settings', ?)", (json.dumps(settings.to_dict()),))

    def close(self) -> None:
        self.db.close()


# ---------------------------------------------------------------- outputs

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A cell as spreadsheets, terminals and line-based importers may safely read it: every control character (tab,
    CR and LF included: an importer that splits rows on them would make two rows of one; ESC, C1, bidi controls,
    line separators, lone surrogates) written as an escape (`\\x0a`: discovery.escape_controls), then a leading
    formula character defused with a quote."""
    if not isinstance(value, str):
        return value
    value = escape_controls(value)
    return "'" + value if value.startswith(FORMULA_START) else value


SETTINGS_COLUMNS = ("key_fingerprint", "timeout", "grader_version")  # the gradebook's last columns, every row


def gradebook_csv(entries: list[Entry], reports: dict[str, dict[str, Any] | None],
                  steps: list[str] | None = None, settings: RunSettings | None = None) -> str:
    """One row per student: a score per step, the total, the status (graded, over_budget, empty, unreadable,
    too_large, rejected, ambiguous, error) and, when it was not graded, the one reason; with `settings`, the key's
    fingerprint, the time-out and the grader's version the row was graded under."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    columns = [s for s in STEPS if not steps or s.id in steps]
    tail = list(SETTINGS_COLUMNS) if settings else []
    w.writerow(["student", "submission", *[s.id for s in columns], "total", "max_score", "status", "reason", *tail])
    recorded = [getattr(settings, name) for name in SETTINGS_COLUMNS] if settings else []
    max_total: float | None = next((r["max_score"] for r in reports.values() if r is not None), None)
    for e in entries:
        r = reports.get(e.slug)
        if r is not None:
            by = {s["id"]: s["score"] for s in r["steps"]}
            status = e.status or "graded"
            row = [e.student, e.source, *[_num(by.get(s.id, 0)) for s in columns], _num(r["score"]),
                   _num(r["max_score"]), status, "" if status == "graded" else report_reason(r)]
        else:  # not graded: 0 where the upload is at fault (empty, unreadable, ...), no total where the grader is
            status = e.status or "error"
            row = [e.student, e.source, *["" for _ in columns], "" if status == "error" else 0,
                   _num(max_total) if max_total is not None else "", status, e.rejected]
        w.writerow([csv_cell(c) for c in [*row, *[_num(v) if isinstance(v, float) else v for v in recorded]]])
    return buf.getvalue()


def report_reason(report: dict[str, Any]) -> str:
    """Why a graded report's status is not plain `graded` (over_budget: its time ran out, in its steps or at
    import): the message of the last step that timed out (the budget's own, which the steps after the one that used
    it up carry), else of the last that failed to run."""
    steps = report.get("steps") or []
    for want in ("timeout", None):
        for s in reversed(steps):
            if s.get("status") == "error" and s.get("message") and want in (None, s.get("detail")):
                return str(s["message"])
    return ""


def _num(x: float) -> Any:
    return int(x) if float(x).is_integer() else x


def feedback_text(student: str, report: dict[str, Any] | None, reason: str = "", lang: str = "en") -> str:
    """Plain-language feedback for one student, in `lang`. The name and the reason come from file names a student
    chose: each is one line, its control characters (newlines included) written as escapes (`cat feedback/*.txt`
    must not act on an escape sequence, nor show a line the student wrote as the grader's)."""
    with i18n.using(lang):
        return _feedback_text(_one_line(student), report, _one_line(reason))


def _one_line(text: Any) -> str:
    return clean(escape_controls(str(text)))


def _feedback_text(student: str, report: dict[str, Any] | None, reason: str) -> str:
    number = {s.id: s.number for s in STEPS}
    if report is None:
        return (_("Feedback for {student}").format(student=student) + "\n\n"
                + _("Your submission could not be graded: {reason}").format(reason=reason) + "\n"
                + _("Please resubmit a .py file, a notebook (.ipynb) or a folder like exercises/.") + "\n")
    lines = [_("Feedback for {student}").format(student=student),
             _("Submission: {name}").format(name=_one_line(report["submission"])),
             _("Score: {score:g} out of {max_score:g}").format(score=report["score"], max_score=report["max_score"]),
             ""]
    words = {"passed": N_("passed, well done"), "partial": N_("partly right"), "failed": N_("not right yet"),
             "not_started": N_("not started"), "error": N_("could not run")}
    messages = {s.get("message") for s in report["steps"]}
    shared = report["steps"][0].get("message", "") if report["steps"] and len(messages) == 1 and all(
        s["status"] == "error" for s in report["steps"]) else ""  # one problem for the whole submission
    for s in report["steps"]:
        title = s["title"]
        if not re.match(r"^(Step \d|第 \d)", title):
            title = _("Step {n}. {title}").format(n=number.get(s["id"], "?"), title=title)
        word = _(words[s["status"]]) if s["status"] in words else s["status"]
        lines.append(f"{title}: {word} ({s['score']:g}/{s['max_score']:g})")
        if s["status"] == "error" and s.get("message") and not shared:
            lines.append("    " + _("What went wrong: {message}").format(message=s["message"]))
        elif s["status"] in ("partial", "failed"):
            for c in s["checks"]:
                if not c["passed"]:
                    lines.append(f"    - {c['name']}: {c['message']}" if c["message"] else f"    - {c['name']}")
            lines += ["    " + _("diagnosis: ") + d.get("message", "") for d in s.get("diagnoses", [])]
    todo = [s for s in report["steps"] if s["status"] != "passed"]
    lines.append("")
    if shared:
        lines.append(_("What went wrong: {message}").format(message=shared))
    elif not todo:
        lines.append(_("Every step passes. Well done!"))
    else:
        first = todo[0]
        lines.append(_("Next: work on step {n} ({step}); `attn-kata hint {step}` gives a hint.").format(
            n=number.get(first["id"], "?"), step=first["id"]))
    for note in report.get("notes") or []:
        lines.append(_("Note: {note}").format(note=note))
    return "\n".join(lines) + "\n"


def class_summary(reports: list[dict[str, Any]], only: list[str] | None = None) -> dict[str, Any]:
    steps = []
    for s in STEPS:
        if only and s.id not in only:
            continue
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
    # code that studies the grader (grading/flags.py): for a human to look at, scores untouched
    flagged = [{"submission": r["submission"], "flags": r["flags"]} for r in reports if r.get("flags")]
    return {"submissions": len(reports), "mean": round(sum(totals) / len(totals), 4) if totals else None,
            "max_score": reports[0]["max_score"] if reports else None, "steps": steps, "flagged": flagged}
