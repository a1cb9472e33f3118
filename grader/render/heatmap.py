"""Attention-weight matrices as pictures: the learner's next to the reference's.

The matrices come with the report: `engine.grade(..., pictures=True)` attaches to each step those of the cases
its module declares as pictures (grader.grading.pictures); this module draws them in the terminal (rich, one
background colour per cell), grader/render/html_report.py in HTML. Nothing here grades.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from grader import i18n
from grader.i18n import N_
from grader.report import Report

if TYPE_CHECKING:  # drawn alike: a pictures.Matrix (torch) or a grading process's forked.PlainMatrix (no torch)
    import torch

    from grader.grading.pictures import Matrix


def __getattr__(name: str) -> Any:
    """`heatmap.Matrix`, grader.grading.pictures's, imported only when asked for (it needs torch)."""
    if name == "Matrix":
        from grader.grading.pictures import Matrix

        return Matrix
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def of_report(report: Report) -> dict[str, list[Matrix]]:
    """The matrices a report carries (engine.grade(..., pictures=True)): step id -> [Matrix], steps with some."""
    return {s.id: list(s.pictures) for s in report.steps if s.pictures}


# --- colours ---------------------------------------------------------------------------------------

# viridis, sampled: dark violet (0) -> yellow (1)
_STOPS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
BAD = (255, 0, 255)  # NaN / inf
LEAK = (230, 25, 25)


def colour(value: float, vmax: float) -> tuple[int, int, int]:
    if not math.isfinite(value):
        return BAD
    x = min(max(value / vmax, 0.0), 1.0) * (len(_STOPS) - 1)
    i = min(int(x), len(_STOPS) - 2)
    f = x - i
    a, b = _STOPS[i], _STOPS[i + 1]
    return (round(a[0] + (b[0] - a[0]) * f), round(a[1] + (b[1] - a[1]) * f), round(a[2] + (b[2] - a[2]) * f))


def hex_colour(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def ink(rgb: tuple[int, int, int]) -> str:
    """Black or white, whichever reads better on this background."""
    lum = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    return "#000000" if lum > 140 else "#ffffff"


# --- terminal ----------------------------------------------------------------------------------------

TEXT: dict[str, str] = {  # msgids: the Chinese is in the message catalogue (grader/i18n.py)
    "yours": N_("yours"),
    "expected": N_("expected"),
    "legend": N_("• differs from expected   dark = 0, yellow = {vmax:.3g}"),
    "legend_leak": N_("✗ future position with non-zero weight (must be 0)   "),
    "leaks": N_("{n} future position(s) leak attention"),
}


def _t(key: str, lang: str, **kw: Any) -> str:
    return i18n.text(TEXT, key, lang, **kw)


def _terminal_grid(m: torch.Tensor, vmax: float, leaked: torch.Tensor | None, differs: torch.Tensor | None):
    from rich.style import Style
    from rich.text import Text

    text = Text()
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            v = float(m[i, j])
            rgb = colour(v, vmax)
            mark = "  "
            if leaked is not None and bool(leaked[i, j]):
                mark = "✗ "
            elif differs is not None and bool(differs[i, j]):
                mark = "• "
            if not math.isfinite(v):
                mark = "!!"
            leak_ink = "bold " + ("#c00000" if ink(rgb) == "#000000" else "#ff6060")
            fg = leak_ink if mark == "✗ " else ink(rgb)
            text.append(mark, style=Style.parse(f"{fg} on {hex_colour(rgb)}"))
        if i < m.shape[0] - 1:
            text.append("\n")
    return text


def terminal(mat: Matrix, lang: str = "en"):
    """A rich renderable: the learner's matrix next to the expected one, with a legend."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    vmax = mat.vmax
    grid = Table.grid(padding=(0, 3))
    grid.add_column()
    grid.add_column()
    head_yours = Text(_t("yours", lang), style="bold")
    head_want = Text(_t("expected", lang), style="bold")
    if mat.got is not None:
        grid.add_row(head_yours, head_want)
        grid.add_row(_terminal_grid(mat.got, vmax, mat.leaked, mat.differs), _terminal_grid(mat.want, vmax, None, None))
    else:
        grid.add_row(head_want)
        grid.add_row(_terminal_grid(mat.want, vmax, None, None))
    parts: list[Any] = [Text(mat.label, style="cyan"), grid]  # what the learner's code computed, no case tag
    if mat.note:
        parts.append(Text(mat.note, style="yellow"))
    if mat.leak_count:
        parts.append(Text(_t("leaks", lang, n=mat.leak_count), style="bold red"))
    legend = (_t("legend_leak", lang) if mat.leak_count else "") + _t("legend", lang, vmax=vmax)
    parts.append(Text(legend, style="dim"))
    return Group(*parts)


def print_failing(report: Report, mats: dict[str, list[Matrix]], console: Any, lang: str = "en") -> None:
    """Under the table: heatmaps for each failing step whose output is a weight matrix."""
    for s in report.steps:
        if s.status not in ("failed", "partial"):
            continue
        for mat in mats.get(s.id, []):
            if mat.got is None:
                continue
            console.print(f"[bold]{s.id}[/bold]")
            console.print(terminal(mat, lang))
