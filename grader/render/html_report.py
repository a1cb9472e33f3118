"""A self-contained HTML report: the steps and checks, and heatmaps of the attention weights.

One file, inline CSS, heatmaps as plain <table>s with inline background colours: no script, no
fonts, no network. Every text that may come from the submission is escaped.

For each step whose output is a matrix of attention weights (its module's `pictures`) the
expected weights are drawn next to the learner's; future cells that leak attention (non-zero above
the diagonal where the reference is 0) get `class="cell leak"` and a red outline.
"""

from __future__ import annotations

import html
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader import i18n
from grader.files import write_atomic
from grader.i18n import N_
from grader.registry import BY_ID
from grader.render.heatmap import colour, hex_colour, ink
from grader.report import Report

if TYPE_CHECKING:
    from grader.grading.pictures import Matrix

STATUS_COLOUR = {"passed": "#1a7f37", "partial": "#9a6700", "failed": "#cf222e", "not_started": "#6e7781",
                 "error": "#8250df"}

TEXT: dict[str, str] = {  # msgids: the Chinese is in the message catalogue (grader/i18n.py)
    "title": N_("attention-kata report"),
    "score": N_("score"),
    "step": N_("step"),
    "status": N_("status"),
    "checks": N_("checks"),
    "weights": N_("Attention weights"),
    "yours": N_("yours"),
    "expected": N_("expected"),
    "no_matrix": N_("no matrix from your code: {note}"),
    "leaks": N_("{n} future position(s) leak attention: they must get exactly 0 weight (fill the scores "
               "with -inf before the softmax)"),
    "legend": N_("colour: dark = 0, yellow = {vmax:.3g}; red outline ✗ = future position with non-zero "
                "weight; dashed outline = differs from expected; rows = queries, columns = keys"),
    "generated": N_("generated {when} by attn-kata {version}"),
    "notes": N_("notes"),
}


def _t(key: str, lang: str, **kw: Any) -> str:
    return i18n.text(TEXT, key, lang, **kw)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC", sans-serif;
       margin: 24px; color: #1f2328; background: #ffffff; }
h1 { font-size: 22px; margin: 0 0 4px 0; }
h2 { font-size: 17px; margin: 28px 0 8px 0; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 14px 0 6px 0; font-family: ui-monospace, monospace; }
.sub { color: #57606a; font-size: 13px; }
table.steps { border-collapse: collapse; margin-top: 12px; font-size: 14px; }
table.steps th, table.steps td { border: 1px solid #d0d7de; padding: 4px 10px; text-align: left;
                                 vertical-align: top; }
table.steps th { background: #f6f8fa; }
.status { font-weight: 600; white-space: nowrap; }
ul.checks { margin: 4px 0; padding-left: 18px; }
ul.checks li { margin: 2px 0; }
li.fail::marker { content: "✗ "; color: #cf222e; }
li.pass::marker { content: "✓ "; color: #1a7f37; }
li.wait::marker { content: "○ "; color: #9a6700; }
li.diag { list-style: none; color: #0969da; }
.msg { color: #57606a; font-size: 12px; display: block; }
.pair { display: flex; gap: 32px; align-items: flex-start; flex-wrap: wrap; }
.panel h4 { margin: 4px 0; font-size: 13px; }
table.hm { border-collapse: separate; border-spacing: 2px; }
table.hm td.cell { min-width: 46px; height: 26px; text-align: center; font-size: 10px; white-space: nowrap;
                   padding: 0 2px;
                   font-family: ui-monospace, monospace; border-radius: 2px; }
table.hm td.cell.leak { outline: 3px solid #ff1010; outline-offset: -3px; font-weight: 700; }
table.hm td.cell.diff { outline: 2px dashed #ff9900; outline-offset: -2px; }
table.hm th { font-size: 10px; color: #57606a; font-weight: normal; }
.leaks { color: #cf222e; font-weight: 600; margin: 6px 0; }
.note { color: #9a6700; }
.legend { color: #57606a; font-size: 12px; margin-top: 6px; }
.bar { display: inline-block; width: 160px; height: 10px; vertical-align: middle;
       background: linear-gradient(to right, #440154, #3b528b, #21918c, #5ec962, #fde725); }
"""


def _heatmap(m: Any, vmax: float, leaked: Any = None, differs: Any = None, who: str = "") -> str:
    rows = ['<table class="hm" data-who="' + _e(who) + '">',
            "<tr><th></th>" + "".join(f"<th>{j}</th>" for j in range(m.shape[1])) + "</tr>"]
    for i in range(m.shape[0]):
        cells = [f"<th>{i}</th>"]
        for j in range(m.shape[1]):
            v = float(m[i, j])
            rgb = colour(v, vmax)
            cls = "cell"
            label = f"{v:.2f}" if math.isfinite(v) else _e(str(v))
            title = f"({i}, {j}) = {v:.6g}"
            if leaked is not None and bool(leaked[i, j]):
                cls += " leak"
                label = "✗ " + label
                title += " — future position"
            elif differs is not None and bool(differs[i, j]):
                cls += " diff"
            cells.append(f'<td class="{cls}" title="{_e(title)}" style="background:{hex_colour(rgb)};'
                         f'color:{ink(rgb)}">{label}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _status_text(status: str, lang: str) -> str:
    with i18n.using(lang):
        return i18n.status(status)


def _matrix_section(mat: Matrix, lang: str) -> str:
    vmax = mat.vmax
    note = mat.note
    parts = [f'<div class="matrix" data-step="{_e(mat.step)}" data-case="{_e(mat.case)}" '
             f'data-leaks="{mat.leak_count}">', f"<h3>{_e(mat.label)}</h3>",
             '<div class="pair">']
    if mat.got is not None:
        parts.append(f'<div class="panel"><h4>{_e(_t("yours", lang))}</h4>'
                     f"{_heatmap(mat.got, vmax, mat.leaked, mat.differs, 'learner')}</div>")
    parts.append(f'<div class="panel"><h4>{_e(_t("expected", lang))}</h4>'
                 f"{_heatmap(mat.want, vmax, who='reference')}</div>")
    parts.append("</div>")
    if mat.got is None:
        parts.append(f'<p class="note">{_e(_t("no_matrix", lang, note=note))}</p>')
    elif note:
        parts.append(f'<p class="note">{_e(note)}</p>')
    if mat.leak_count:
        parts.append(f'<p class="leaks">{_e(_t("leaks", lang, n=mat.leak_count))}</p>')
    parts.append(f'<p class="legend"><span class="bar"></span> {_e(_t("legend", lang, vmax=vmax))}</p>')
    parts.append("</div>")
    return "\n".join(parts)


# the heatmaps' own rules, every one under `.attn-kata-hm`: for a page that is not ours (a notebook's output cell)
HEATMAP_CSS = "\n".join(
    ".attn-kata-hm " + rule.strip() + " }" for rule in CSS.split("}") if rule.strip().startswith(
        ("table.hm", ".pair", ".panel", ".leaks", ".note", ".legend", ".bar", "h3")))


def matrix_section(mat: Matrix, lang: str = "en") -> str:
    """One weight matrix as HTML: the learner's next to the expected one, the leaks, the legend (as `render` shows
    it; with HEATMAP_CSS, inside an element of class `attn-kata-hm`, elsewhere too)."""
    return _matrix_section(mat, lang)


def render(report: Report, mats: dict[str, list[Matrix]] | None = None, lang: str = "en") -> str:
    """The whole report as one HTML document (a string)."""
    mats = mats or {}
    def status_text(status: str) -> str:
        return _status_text(status, lang)

    out = ["<!DOCTYPE html>", f'<html lang="{"zh" if lang == "zh" else "en"}">', "<head>",
           '<meta charset="utf-8">', '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(_t('title', lang))}: {_e(report.submission)}</title>",
           f"<style>{CSS}</style>", "</head>", "<body>",
           f"<h1>{_e(report.submission)}: {report.score:g} / {report.max_score:g}</h1>",
           f'<p class="sub">{_e(_t("title", lang))} · '
           + _e(_t("generated", lang, when=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                   version=report.grader_version or "?")) + "</p>",
           '<table class="steps">',
           f"<tr><th>#</th><th>{_e(_t('step', lang))}</th><th>{_e(_t('status', lang))}</th>"
           f"<th>{_e(_t('score', lang))}</th><th>{_e(_t('checks', lang))}</th></tr>"]
    for s in report.steps:
        step = BY_ID.get(s.id)
        checks = []
        if s.status == "error" and s.message:
            checks.append(f'<li class="fail">{_e(s.message)}</li>')
        elif s.status not in ("not_started",):
            for c in s.checks:
                msg = f'<span class="msg">{_e(c.message)}</span>' if not c.passed and c.message else ""
                kind = "pass" if c.passed else "wait" if c.waiting else "fail"
                checks.append(f'<li class="{kind}">{_e(c.name)}{msg}</li>')
            # the classic mistake the outputs show (grader/grading/diagnose.py), as the terminal says it
            label = i18n.translate(lang, N_("diagnosis: "))
            checks += [f'<li class="diag">⚑ {_e(label + d.get("message", ""))}</li>' for d in s.diagnoses]
        link = f'<a href="#step-{_e(s.id)}">{_e(s.id)}</a>' if s.id in mats else _e(s.id)
        out.append(f'<tr data-step="{_e(s.id)}" data-status="{_e(s.status)}"><td>{step.number if step else ""}</td>'
                   f'<td>{link}<br><span class="sub">{_e(s.title)}</span></td>'
                   f'<td class="status" style="color:{STATUS_COLOUR.get(s.status, "#000")}">'
                   f"{_e(status_text(s.status))}</td><td>{s.score:g}/{s.max_score:g}</td>"
                   f'<td><ul class="checks">{"".join(checks)}</ul></td></tr>')
    out.append("</table>")
    if report.notes:
        out.append(f"<h2>{_e(_t('notes', lang))}</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in report.notes)
                   + "</ul>")
    for s in report.steps:
        if s.id not in mats:
            continue
        step = BY_ID.get(s.id)
        out.append(f'<section id="step-{_e(s.id)}"><h2>{_e(_t("weights", lang))} · '
                   f"{step.number if step else ''}. {_e(s.id)} — "
                   f'<span style="color:{STATUS_COLOUR.get(s.status, "#000")}">{_e(status_text(s.status))}</span>'
                   "</h2>")
        out.extend(_matrix_section(m, lang) for m in mats[s.id])
        out.append("</section>")
    out.extend(["</body>", "</html>"])
    return "\n".join(out) + "\n"


def write(path: str | Path, report: Report, mats: dict[str, list[Matrix]] | None = None, lang: str = "en") -> Path:
    p = Path(path)
    write_atomic(p, render(report, mats, lang))
    return p
