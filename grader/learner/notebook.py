"""`check()` inside a notebook: grade the functions this kernel has defined, show the result per step."""

from __future__ import annotations

import html
import sys
from typing import Any

from grader import i18n
from grader.i18n import _
from grader.registry import get_step
from grader.report import Report

_COLOURS = {"passed": "#1a7f37", "partial": "#9a6700", "failed": "#cf222e", "not_started": "#6e7781",
            "error": "#8250df"}


def _in_jupyter() -> bool:
    try:
        from IPython import get_ipython

        ip = get_ipython()
    except ImportError:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def to_html(report: Report, lang: str = "en", mats: dict[str, list[Any]] | None = None) -> str:
    """What the terminal shows, as HTML: the table with each failing check and the diagnosis, the heatmaps of a
    failing step's attention weights (`mats`, grader.render.heatmap), then the next step."""
    with i18n.using(lang):
        return _to_html(report) + _heatmaps(report, mats or {}, lang) + _next_html(report)


def _next(report: Report) -> str:
    """The tip under the table, as `attn-kata check` gives it: the first step asked for that does not pass."""
    nxt = next((s for s in report.steps if s.status != "passed"), None)
    if nxt is None:
        return _("every step asked for passes")
    return _("next: step {number}, {step}: write it in its cell, then run its check() cell").format(
        number=get_step(nxt.id).number, step=nxt.id)


def _next_html(report: Report) -> str:
    return f"<p class='attn-kata-next'>{html.escape(_next(report))}</p>"


def _heatmaps(report: Report, mats: dict[str, list[Any]], lang: str) -> str:
    """The weights of each failing step whose output is an attention matrix, the learner's beside the expected."""
    from grader.render.html_report import HEATMAP_CSS, matrix_section

    parts = [matrix_section(m, lang) for s in report.steps if s.status in ("failed", "partial")
             for m in mats.get(s.id, []) if m.got is not None]
    if not parts:
        return ""
    return f"<div class='attn-kata-hm'><style>{HEATMAP_CSS}</style>" + "".join(parts) + "</div>"


def _to_html(report: Report) -> str:
    rows = []
    for s in report.steps:
        status = i18n.status(s.status)
        detail = ""
        if s.status == "error" and s.message:
            detail = html.escape(s.message)
        elif s.status not in ("passed", "not_started"):
            detail = "<br>".join(f"{'○' if c.waiting else '✗'} <b>{html.escape(c.name)}</b>: {html.escape(c.message)}"
                                 for c in s.checks if not c.passed)
            label = _("diagnosis: ")
            detail += "".join(f"<br><span style='color:#0969da'>⚑ {html.escape(label + d.get('message', ''))}</span>"
                              for d in s.diagnoses)
        rows.append(f"<tr><td>{get_step(s.id).number}</td><td><code>{s.id}</code><br><small>"
                    f"{html.escape(s.title)}</small></td><td style='color:{_COLOURS.get(s.status, '')}'>"
                    f"<b>{html.escape(status)}</b></td><td>{s.score:g}/{s.max_score:g}</td>"
                    f"<td style='text-align:left'>{detail}</td></tr>")
    head = ("#", _("step"), _("status"), _("score"), _("details"))
    return (f"<table class='attn-kata'><caption style='text-align:left'><b>attention-kata: {report.score:g} / "
            f"{report.max_score:g}</b></caption><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) +
            "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


TEXT_WIDTH = 100  # the plain-text form's width (a terminal's table is as wide as the terminal)


def to_text(report: Report, lang: str = "en", width: int = TEXT_WIDTH) -> str:
    """What `attn-kata check` prints, without colour: the same table (grader.render.reporters), with each failing
    check and the diagnosis, then the next step. check()'s form outside Jupyter's HTML: printed by a script or a
    terminal IPython, and the text/plain of its output in a notebook (nbconvert --to markdown, a plain-text front
    end)."""
    from dataclasses import replace

    from rich.console import Console

    from grader.render import reporters

    console = Console(width=width, force_terminal=False, force_jupyter=False, color_system=None, highlight=False)
    with console.capture() as captured:  # titled as the HTML is: the kernel's cells have no file name of their own
        reporters.table(replace(report, submission="attention-kata"), console, lang=lang)
    with i18n.using(lang):
        return "\n".join([*(line.rstrip() for line in captured.get().rstrip("\n").splitlines()), _next(report)])


class Shown:
    """check()'s output in a notebook: the HTML table for Jupyter, and the terminal's text as its text/plain (what
    nbconvert --to markdown or script, a console front end, or a notebook viewer without HTML shows)."""

    def __init__(self, html_text: str, plain_text: str):
        self.html, self.text = html_text, plain_text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": self.html, "text/plain": self.text}

    def __repr__(self) -> str:
        return self.text


def check_report(*steps: str, secret: str | None = None, lang: str = "en",
                 namespace: dict[str, Any] | None = None) -> Report:
    """Grade the code this kernel has run (or the running script, outside IPython)."""
    return _graded(*steps, secret=secret, lang=lang, namespace=namespace)[0]


def _graded(*steps: str, secret: str | None = None, lang: str = "en", namespace: dict[str, Any] | None = None,
            pictures: bool = False) -> tuple[Report, dict[str, list[Any]]]:
    """(the report, the weight matrices when `pictures`) of the code this kernel has run."""
    from grader.learner.kernel import grade_sources, grade_sources_with_matrices, kernel_sources

    ids = [get_step(s).id for s in steps] or None
    sources = kernel_sources(namespace)
    if sources is None:  # a plain script: grade the file that is running
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        if not main_file:
            raise RuntimeError("check() needs a notebook, IPython or a script file to grade")
        with open(main_file, encoding="utf-8") as fh:
            sources = [fh.read()]
    if pictures:
        return grade_sources_with_matrices(sources, ids, secret=secret, lang=lang)
    return grade_sources(sources, ids, secret=secret, lang=lang), {}


def check(*steps: str, secret: str | None = None, lang: str | None = None) -> Report:
    """Grade the functions defined so far in this notebook; shows an HTML table in Jupyter, text elsewhere."""
    from grader.learner.api import default_lang

    lang = lang or default_lang()
    jupyter = _in_jupyter()
    report, mats = _graded(*steps, secret=secret, lang=lang, pictures=jupyter)
    if jupyter:
        from IPython.display import display

        display(Shown(to_html(report, lang, mats), to_text(report, lang)))
    else:
        print(to_text(report, lang))
    return _Quiet(report)


class _Quiet(Report):
    """The report, without a second rendering as the cell's value."""

    def __init__(self, report: Report):
        self.__dict__.update(report.__dict__)

    def __repr__(self) -> str:
        return f"<attention-kata report: {self.score:g}/{self.max_score:g}>"

    def _repr_html_(self) -> str:
        return ""

    def _ipython_display_(self) -> None:
        """check() has shown the table already: `check(...)` as a cell's last line adds no second output."""
