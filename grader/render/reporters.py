"""Turn a Report into what each reader needs: a terminal table, JSON, Gradescope's results.json."""

from __future__ import annotations

import json
import re
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader import i18n
from grader.i18n import N_, _
from grader.render.terminal import fit, plain, text
from grader.report import Report

# the messages of an exception the learner's code raised (grader/checks, grader/grading/engine): "the same error"
RAISED = (N_("your code raised {exception}{where}: {message}"), N_("raised {exception}: {message}"))
STATUS_STYLE = {"passed": "green", "partial": "yellow", "failed": "red", "not_started": "dim", "error": "magenta"}


def to_json(report: Report) -> str:
    return json.dumps(report.to_dict(), ensure_ascii=False, indent=2, sort_keys=False)


def table(report: Report, console: Console, lang: str = "en", verbose: bool = True) -> None:
    with i18n.using(lang):
        _table(report, console, lang, verbose)


def _table(report: Report, console: Console, lang: str, verbose: bool) -> None:
    head = _("step")
    t = Table(title=text(f"{report.submission}: {report.score:g} / {report.max_score:g}"), title_justify="left",
              show_lines=False, expand=False)
    from grader.registry import BY_ID

    # the step column gets what the others leave (4 columns: 5 borders, 1 cell of padding each side), and its text
    # is wrapped to it here by display width: rich would cut an unbroken Chinese sentence with '…'
    statuses = [i18n.status(s.status) for s in report.steps]
    scores = [f"{s.score:g}/{s.max_score:g}" for s in report.steps]
    others = [max([1, *(len(str(BY_ID[s.id].number)) for s in report.steps)]),
              max(cell_len(x) for x in [_("status"), *statuses]), max(cell_len(x) for x in [_("score"), *scores])]
    width = max(console.width - sum(others) - 4 * 2 - 5, 12)
    t.add_column("#", justify="right")
    t.add_column(head, overflow="fold")
    t.add_column(_("status"), overflow="fold")
    t.add_column(_("score"), justify="right")

    # one problem for the whole submission (unreadable, a syntax error...): said once, under the table
    messages = {s.message for s in report.steps}
    shared = report.steps[0].message if report.steps and len(messages) == 1 and all(
        s.status == "error" for s in report.steps) else ""
    for s in report.steps:
        status = i18n.status(s.status)
        t.add_row(str(BY_ID[s.id].number), fit(Text(s.id).append(f"\n{s.title}", style="dim"), width) if verbose
                  else s.id, Text(status, style=STATUS_STYLE.get(s.status, "")), f"{s.score:g}/{s.max_score:g}")
        if not verbose or s.status in ("passed", "not_started"):
            continue
        if s.status == "error" and s.message:
            if not shared:
                t.add_row("", fit(text(f"  ! {s.message}", style="magenta", newlines=True), width), "", "")
            continue
        # one error met by every case (its sizes aside) reads once, then "the same" under it: only an exception the
        # learner's code raised, and only right under that same error (never under a line that is no error)
        raised = tuple(_(m).split("{")[0] for m in RAISED)
        above = ""
        for c in s.checks:
            if not c.passed:
                line = Text("  ✗ ", style="red")
                line.append(plain(c.name), style="bold")
                kind = re.sub(r"\d+", "#", c.message)
                error = any(mark and mark in c.message for mark in raised)
                message = _("(the same error as above)") if error and kind == above and len(kind) > 60 else \
                    c.message
                above = kind if error else ""
                line.append(f"\n    {plain(message, newlines=True)}")
                t.add_row("", fit(line, width), "", "")
        for d in getattr(s, "diagnoses", None) or []:
            label = _("diagnosis: ")
            t.add_row("", fit(text(f"  ⚑ {label}{d.get('message', '')}", style="cyan", newlines=True), width), "", "")
    console.print(t)
    if shared:
        console.print(text(f"! {shared}", style="magenta", newlines=True))
    for note in report.notes:
        console.print(text(_("note: {note}").format(note=note), style="dim", newlines=True))


def gradescope(report: Report, execution_time: float | None = None) -> dict[str, Any]:
    """Gradescope's results.json: one test per check, named by step and check."""
    tests = []
    from grader.registry import BY_ID

    for s in report.steps:
        number = BY_ID[s.id].number
        for c in s.checks:
            output = c.message if not c.passed else ""
            if s.status in ("not_started", "error") and s.message:
                output = s.message
            tests.append({"name": f"{number}. {s.id}: {c.name}", "score": c.score, "max_score": c.max_score,
                          "status": "passed" if c.passed else "failed", "output": output,
                          "visibility": "visible", "tags": [s.id]})
    out: dict[str, Any] = {"score": report.score, "max_score": report.max_score, "tests": tests,
                           "visibility": "visible", "stdout_visibility": "hidden"}
    if execution_time is not None:
        out["execution_time"] = round(execution_time, 3)
    return out


def prairielearn(report: Report, lang: str = "en") -> dict[str, Any]:
    """PrairieLearn's results.json: `score` in 0–1, one test per check (name, points, max_points, message,
    output), the table as `output`. A submission that could not be read at all is `gradable: false` (the student
    keeps the attempt) with the reason in `format_errors`."""
    from grader.registry import BY_ID

    if report.steps and all(s.detail == "rejected_input" for s in report.steps):
        return not_gradable(report.steps[0].message)
    tests = []
    for s in report.steps:
        diagnoses = "\n".join(d.get("message", "") for d in s.diagnoses)
        for c in s.checks:
            message = c.message if not c.passed else ""
            if s.status in ("not_started", "error") and s.message:
                message = s.message
            tests.append({"name": f"{BY_ID[s.id].number}. {s.id}: {c.name}", "description": s.title,
                          "points": c.score, "max_points": c.max_score, "message": message,
                          "output": diagnoses if not c.passed else ""})
    console = Console(width=100, force_terminal=False, color_system=None)
    with console.capture() as captured:
        table(report, console, lang=lang)
    with i18n.using(lang):
        message = _("{score:g} / {max_score:g} points").format(score=report.score, max_score=report.max_score)
    return {"gradable": True, "score": round(report.score / report.max_score, 6) if report.max_score else 0.0,
            "message": message, "output": captured.get(), "tests": tests}


def gradescope_not_gradable(reason: str) -> dict[str, Any]:
    """Gradescope's results.json for an upload that cannot be graded (empty, unreadable, a syntax error in every
    file): the reason once, no test (Gradescope has no "not gradable": the score is 0, the output says why)."""
    return {"score": 0, "output": _("Not graded: {reason}").format(reason=reason), "tests": [],
            "stdout_visibility": "visible"}


def not_gradable(reason: str) -> dict[str, Any]:
    """What PrairieLearn shows as "invalid, not gradable": no points awarded or lost, no attempt used."""
    return {"gradable": False, "format_errors": [reason], "message": reason, "tests": []}
