"""What a batch leaves in OUT for people: the gradebook, feedback, the class summary, and the index that
makes a batch resumable (results keyed by content, grader version and a hash of the secret)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

from grader import i18n
from grader.i18n import N_, _
from grader.instructor.discovery import Entry
from grader.registry import STEPS
from grader.report import clean

# ---------------------------------------------------------------- keys and the index


def secret_hash(secret: str) -> str:
    return hashlib.sha256(b"attn-kata secret\0" + secret.encode()).hexdigest()


def result_key(chash: str, version: str, shash: str, steps: str = "") -> str:
    """An index row's key: the same content, grader, secret and steps (comma-separated; "" for all). The language
    is not in it: the index keeps results unworded ("data", a shape an index of worded results never matches)."""
    return hashlib.sha256(f"{chash}\0{version}\0{shash}\0{steps}\0data".encode()).hexdigest()


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


# ---------------------------------------------------------------- outputs

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# what `cat gradebook.csv` would run or a viewer reorder (file names reach the student and submission columns):
# C0 but tab and line ends (the csv module quotes those), DEL, C1, bidi controls, line/paragraph separators, and
# lone surrogates (a file name that is not UTF-8), which UTF-8 cannot even write
_CELL_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                           r"\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def csv_cell(value: Any) -> Any:
    """A cell as spreadsheets and terminals may safely show it: control characters written as escapes
    (`\\x1b`), then a leading formula character defused with a quote."""
    if not isinstance(value, str):
        return value
    if not value.isascii() or not value.isprintable():
        value = _CELL_CONTROL.sub(_escape, value)
    return "'" + value if value.startswith(FORMULA_START) else value


def gradebook_csv(entries: list[Entry], reports: dict[str, dict[str, Any] | None],
                  steps: list[str] | None = None) -> str:
    """One row per student: a score per step, the total, the status (graded, over_budget, empty, unreadable,
    too_large, rejected, ambiguous, error) and, when it was not graded, the one reason."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    columns = [s for s in STEPS if not steps or s.id in steps]
    w.writerow(["student", "submission", *[s.id for s in columns], "total", "max_score", "status", "reason"])
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
        w.writerow([csv_cell(c) for c in row])
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
    chose: their control characters go (`cat feedback/*.txt` must not act on an escape sequence)."""
    with i18n.using(lang):
        return _feedback_text(clean(student), report, clean(reason))


def _feedback_text(student: str, report: dict[str, Any] | None, reason: str) -> str:
    number = {s.id: s.number for s in STEPS}
    if report is None:
        return (_("Feedback for {student}").format(student=student) + "\n\n"
                + _("Your submission could not be graded: {reason}").format(reason=reason) + "\n"
                + _("Please resubmit a .py file, a notebook (.ipynb) or a folder like exercises/.") + "\n")
    lines = [_("Feedback for {student}").format(student=student),
             _("Submission: {name}").format(name=clean(report["submission"])),
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
