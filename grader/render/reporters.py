"""Turn a Report into what each reader needs: a terminal table, JSON. (A platform's results.json is its own
module's: grader.platforms.)"""

from __future__ import annotations

import json
import re

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
                line = Text("  ○ ", style="yellow") if c.waiting else Text("  ✗ ", style="red")
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
