"""Attention-weight matrices as pictures: the learner's next to the reference's.

The engine's `grade()` returns only the report; to draw the matrices we call `engine.collect()`
and `engine.judge()` ourselves (`grade_with_matrices`) and read the tensors both sides produced
for the cases whose output is a weight matrix. This module also draws them in the terminal
(rich, one background colour per cell); grader/render/html_report.py draws them in HTML.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from grader import i18n, limits
from grader.i18n import N_
from grader.report import Report

# step id -> cases whose output ("out") is a matrix of attention weights, with what produced it
WEIGHT_CASES: dict[str, tuple[tuple[str, str], ...]] = {
    "softmax": (("w2d", "attention_weights(scores)"),),
    "all_tokens": (("weights", "all_attention_weights(attn_scores)"),),
    "causal_mask": (("w2d", "masked_attention_weights(attn_scores, d_k)"),),
    "dropout": (("eval", "dropout_attention(attn_weights, p, training=False)"),),
}
MAX_SIDE = limits.HEATMAP_MAX_SIDE  # larger matrices are not drawn


def _matrix(value: Any) -> torch.Tensor | None:
    """A 2-D float tensor, or None when the value cannot be drawn as one."""
    if not isinstance(value, torch.Tensor) or value.is_complex():
        return None
    t = value.detach().to("cpu")
    while t.dim() > 2 and t.shape[0] == 1:
        t = t[0]
    if t.dim() != 2 or t.numel() == 0 or max(t.shape) > MAX_SIDE:
        return None
    return t.to(torch.float64)


@dataclass
class Matrix:
    """One case's weights: the reference's (`want`) and the learner's (`got`, None if unusable)."""

    step: str
    case: str
    label: str
    want: torch.Tensor
    got: torch.Tensor | None
    note: str = ""  # why `got` is missing, or that its shape differs

    @property
    def comparable(self) -> bool:
        return self.got is not None and self.got.shape == self.want.shape

    @property
    def leaked(self) -> torch.Tensor | None:
        """Future cells (above the diagonal) where the reference is 0 and the learner's weight is not."""
        if not self.comparable:
            return None
        assert self.got is not None
        upper = torch.triu(torch.ones_like(self.want, dtype=torch.bool), diagonal=1)
        return upper & (self.want == 0) & (self.got != 0) & torch.isfinite(self.got)  # NaN is drawn as NaN

    @property
    def differs(self) -> torch.Tensor | None:
        if not self.comparable:
            return None
        assert self.got is not None
        return ~torch.isclose(self.got, self.want, rtol=1e-4, atol=1e-5)

    @property
    def leak_count(self) -> int:
        leaked = self.leaked
        return int(leaked.sum()) if leaked is not None else 0

    @property
    def vmax(self) -> float:
        vals = [float(self.want.abs().max())]
        if self.got is not None:
            finite = self.got[torch.isfinite(self.got)]
            if finite.numel():
                vals.append(float(finite.abs().max()))
        return max(max(vals), 1e-12)


def matrices(collected: Any, secret: str | None = None) -> dict[str, list[Matrix]]:
    """The weight matrices of every collected step that has some: step id -> [Matrix]."""
    from grader.grading import engine

    _plans, ref = engine.prepared(engine.resolve_secret(secret))
    with i18n.using(collected.lang):  # the notes are in the report's language
        return _matrices(collected, ref)


def _matrices(collected: Any, ref: dict[str, Any]) -> dict[str, list[Matrix]]:
    _ = i18n._
    out: dict[str, list[Matrix]] = {}
    for step in collected.step_list:
        for case, label in WEIGHT_CASES.get(step.id, ()):
            ref_case = ref.get(step.id, {}).get(case)
            want = _matrix(ref_case.tensors.get("out")) if ref_case is not None else None
            if want is None:
                continue
            learner = collected.learner.get(step.id, {}).get(case)
            got, note = None, ""
            if learner is None:
                settled = collected.results.get(step.id)
                note = i18n.status(settled.status) if settled is not None else _("no result")
            elif learner.status != "ok":
                note = learner.text() or learner.status
            else:
                raw = learner.tensors.get("out")
                got = _matrix(raw)
                if got is None:
                    note = (_("not a matrix: shape {shape}").format(shape=tuple(raw.shape))
                            if isinstance(raw, torch.Tensor) else _("no tensor returned"))
                elif got.shape != want.shape:
                    note = _("shape {shape}, expected {want}").format(shape=tuple(got.shape), want=tuple(want.shape))
            out.setdefault(step.id, []).append(Matrix(step.id, case, label, want, got, note))
    return out


def grade_with_matrices(path: str | Path, **kwargs: Any) -> tuple[Report, dict[str, list[Matrix]]]:
    """Like `engine.grade`, and also the weight matrices both sides produced (same keyword arguments)."""
    from grader.grading import engine

    col = engine.collect(path, **kwargs)
    report = engine.judge([col], secret=kwargs.get("secret"))[0]
    return report, matrices(col, kwargs.get("secret"))


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
