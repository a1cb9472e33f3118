"""Comparisons that explain themselves in the learner's terms (named dimensions, first difference)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from grader.checks.model import Failed
from grader.i18n import _

ATOL = 1e-5
RTOL = 1e-4


def fmt_shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(int(d)) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def named(shape: Sequence[int], dims: Sequence[str] | None) -> str:
    s = fmt_shape(shape)
    return f"{s} = ({', '.join(dims)})" if dims and len(dims) == len(shape) else s


def tensor(got: Any, what: str) -> torch.Tensor:
    if not isinstance(got, torch.Tensor):
        raise Failed(_("{what}: got {type}, expected a torch.Tensor").format(what=what, type=type(got).__name__))
    return got


def shape(got: torch.Tensor, expected: Sequence[int], what: str, dims: Sequence[str] | None = None) -> None:
    if tuple(got.shape) != tuple(expected):
        raise Failed(_("{what}: shape {shape}, expected {expected}").format(
            what=what, shape=fmt_shape(got.shape), expected=named(expected, dims)))


def finite(got: torch.Tensor, what: str) -> None:
    if got.is_floating_point() and not torch.isfinite(got).all():
        n_nan = int(torch.isnan(got).sum())
        n_inf = int(torch.isinf(got).sum())
        raise Failed(_("{what}: contains {n_nan} NaN and {n_inf} Inf values").format(what=what, n_nan=n_nan,
                                                                                    n_inf=n_inf))


def close(got: Any, want: torch.Tensor, what: str, dims: Sequence[str] | None = None,
          atol: float = ATOL, rtol: float = RTOL) -> None:
    """Same shape, finite where the reference is, and equal within tolerance."""
    got = tensor(got, what)
    shape(got, want.shape, what, dims)
    if not (got.is_floating_point() or got.dtype == want.dtype):
        raise Failed(_("{what}: dtype {dtype}, expected a floating-point tensor like {want}").format(
            what=what, dtype=got.dtype, want=want.dtype))
    if got.dtype == want.dtype and torch.equal(got, want):  # equal is close, and ~20x cheaper (NaN is never equal)
        return
    # float64 for the comparison, unless both are float32: then float32 is exact enough for these
    # tolerances (|got - want| of two nearby float32s is exact) and the conversions cost most of the check
    both32 = got.dtype == torch.float32 and want.dtype == torch.float32
    g = got if both32 else got.to(torch.float64)
    w = want if both32 else want.to(torch.float64)
    bad = ~torch.isclose(g, w, atol=atol, rtol=rtol, equal_nan=True)
    if bad.any():
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        extra = ""
        if torch.isnan(g).any() or torch.isinf(g).any():
            extra = _("; your output has {n_nan} NaN and {n_inf} Inf").format(
                n_nan=int(torch.isnan(g).sum()), n_inf=int(torch.isinf(g).sum()))
        diff = (g - w).abs().nan_to_num(nan=float("inf"))
        raise Failed(_(
            "{what}: values differ at index {index}: got {got:.6g}, expected {want:.6g} "
            "({n_bad} of {n} entries differ, max abs diff {diff:.3g}){extra}"
        ).format(what=what, index=list(idx), got=g[idx].item(), want=w[idx].item(), n_bad=int(bad.sum()),
                 n=bad.numel(), diff=diff.max().item(), extra=extra))


def numbers(values: torch.Tensor, n: int = 3) -> str:
    """The first `n` values, formatted as every message formats a number (6 significant digits)."""
    return "[" + ", ".join(f"{v:.6g}" for v in values.flatten()[:n].tolist()) + "]"


def true(cond: bool, message: str) -> None:
    if not cond:
        raise Failed(message)
