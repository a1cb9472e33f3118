"""`check()` inside a notebook: grade the functions this kernel has defined, show the result per step."""

from __future__ import annotations

import html
import sys
from typing import Any

from grader import i18n
from grader.grading.report import Report
from grader.i18n import _
from grader.registry import get_step

_COLOURS = {"passed": "#1a7f37", "partial": "#9a6700", "failed": "#cf222e", "not_started": "#6e7781",
            "error": "#8250df"}


def _in_jupyter() -> bool:
    try:
        from IPython import get_ipython

        ip = get_ipython()
    except ImportError:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def to_html(report: Report, lang: str = "en") -> str:
    with i18n.using(lang):
        return _to_html(report)


def _to_html(report: Report) -> str:
    rows = []
    for s in report.steps:
        status = i18n.status(s.status)
        detail = ""
        if s.status == "error" and s.message:
            detail = html.escape(s.message)
        elif s.status not in ("passed", "not_started"):
            detail = "<br>".join(f"✗ <b>{html.escape(c.name)}</b>: {html.escape(c.message)}"
                                 for c in s.checks if not c.passed)
        rows.append(f"<tr><td>{get_step(s.id).number}</td><td><code>{s.id}</code><br><small>"
                    f"{html.escape(s.title)}</small></td><td style='color:{_COLOURS.get(s.status, '')}'>"
                    f"<b>{html.escape(status)}</b></td><td>{s.score:g}/{s.max_score:g}</td>"
                    f"<td style='text-align:left'>{detail}</td></tr>")
    head = ("#", _("step"), _("status"), _("score"), _("details"))
    return (f"<table class='attn-kata'><caption style='text-align:left'><b>attention-kata: {report.score:g} / "
            f"{report.max_score:g}</b></caption><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) +
            "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def to_text(report: Report, lang: str = "en") -> str:
    with i18n.using(lang):
        return _to_text(report)


def _to_text(report: Report) -> str:
    lines = [f"attention-kata: {report.score:g} / {report.max_score:g}"]
    for s in report.steps:
        status = i18n.status(s.status)
        lines.append(f"{get_step(s.id).number:>2}. {s.id:<20} {status:<12} {s.score:g}/{s.max_score:g}")
        if s.status == "error" and s.message:
            lines.append(f"      ! {s.message}")
        elif s.status not in ("passed", "not_started"):
            lines += [f"      ✗ {c.name}: {c.message}" for c in s.checks if not c.passed]
    return "\n".join(lines)


def check_report(*steps: str, secret: str | None = None, lang: str = "en",
                 namespace: dict[str, Any] | None = None) -> Report:
    """Grade the code this kernel has run (or the running script, outside IPython)."""
    from grader.learner.kernel import grade_sources, kernel_sources

    ids = [get_step(s).id for s in steps] or None
    sources = kernel_sources(namespace)
    if sources is None:  # a plain script: grade the file that is running
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        if not main_file:
            raise RuntimeError("check() needs a notebook, IPython or a script file to grade")
        with open(main_file, encoding="utf-8") as fh:
            sources = [fh.read()]
    return grade_sources(sources, ids, secret=secret, lang=lang)


def check(*steps: str, secret: str | None = None, lang: str | None = None) -> Report:
    """Grade the functions defined so far in this notebook; shows an HTML table in Jupyter, text elsewhere."""
    from grader.learner.api import default_lang

    lang = lang or default_lang()
    report = check_report(*steps, secret=secret, lang=lang)
    if _in_jupyter():
        from IPython.display import HTML, display

        display(HTML(to_html(report, lang)))
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
