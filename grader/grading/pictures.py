"""The pictures a report carries: for each case a step declares a picture (grader.checks.registration.pictures),
the attention weights the learner's code and the reference produced, as 2-D matrices (`Matrix`).

The engine attaches them to a report's steps when asked (`engine.grade(..., pictures=True)`: StepResult.pictures,
never written to the JSON report); grader/render draws them, and never grades. Trusted side: grading process only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from grader import checks, i18n, limits
from grader.checks import CaseResult
from grader.registry import Step

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
    note: str = ""  # why `got` is missing, or that its shape differs (a grader.i18n.Text, worded by `worded`)

    def worded(self, lang: str | None) -> Matrix:
        return replace(self, note=i18n.word(self.note, lang))

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


def of_step(step: Step, learner: dict[str, CaseResult] | None, settled: Any,
            ref: dict[str, CaseResult]) -> list[Matrix]:
    """The matrices of `step`'s picture cases: the learner's results (None when the step was settled without
    them, `settled` its StepResult then, or None), the reference's; notes unworded (Matrix.worded)."""
    out = []
    with i18n.deferred():
        _ = i18n._
        for case, label in checks.PICTURES.get(step.id, {}).items():
            ref_case = ref.get(case)
            want = _matrix(ref_case.tensors.get("out")) if ref_case is not None else None
            if want is None:
                continue
            mine = (learner or {}).get(case)
            got, note = None, ""
            if mine is None:
                note = i18n.status(settled.status) if settled is not None else _("no result")
            elif mine.status != "ok":
                note = mine.text() or mine.status
            else:
                raw = mine.tensors.get("out")
                got = _matrix(raw)
                if got is None:
                    note = (_("not a matrix: shape {shape}").format(shape=tuple(raw.shape))
                            if isinstance(raw, torch.Tensor) else _("no tensor returned"))
                elif got.shape != want.shape:
                    note = _("shape {shape}, expected {want}").format(shape=tuple(got.shape), want=tuple(want.shape))
            out.append(Matrix(step.id, case, label, want, got, note))
    return out
