"""Comparisons that explain themselves in the learner's terms (named dimensions, first difference)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from . import Failed

ATOL = 1e-5
RTOL = 1e-4


def fmt_shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(int(d)) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def named(shape: Sequence[int], dims: Sequence[str] | None) -> str:
    s = fmt_shape(shape)
    return f"{s} = ({', '.join(dims)})" if dims and len(dims) == len(shape) else s


def tensor(got: Any, what: str) -> torch.Tensor:
    if not isinstance(got, torch.Tensor):
        raise Failed(f"{what}: got {type(got).__name__}, expected a torch.Tensor")
    return got


def shape(got: torch.Tensor, expected: Sequence[int], what: str, dims: Sequence[str] | None = None) -> None:
    if tuple(got.shape) != tuple(expected):
        raise Failed(f"{what}: shape {fmt_shape(got.shape)}, expected {named(expected, dims)}")


def finite(got: torch.Tensor, what: str) -> None:
    if got.is_floating_point() and not torch.isfinite(got).all():
        n_nan = int(torch.isnan(got).sum())
        n_inf = int(torch.isinf(got).sum())
        raise Failed(f"{what}: contains {n_nan} NaN and {n_inf} Inf values")


def close(got: Any, want: torch.Tensor, what: str, dims: Sequence[str] | None = None,
          atol: float = ATOL, rtol: float = RTOL) -> None:
    """Same shape, finite where the reference is, and equal within tolerance."""
    got = tensor(got, what)
    shape(got, want.shape, what, dims)
    if not (got.is_floating_point() or got.dtype == want.dtype):
        raise Failed(f"{what}: dtype {got.dtype}, expected a floating-point tensor like {want.dtype}")
    g = got.to(torch.float64)
    w = want.to(torch.float64)
    bad = ~torch.isclose(g, w, atol=atol, rtol=rtol, equal_nan=True)
    if bad.any():
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        extra = ""
        if torch.isnan(g).any() or torch.isinf(g).any():
            extra = f"; your output has {int(torch.isnan(g).sum())} NaN and {int(torch.isinf(g).sum())} Inf"
        diff = (g - w).abs().nan_to_num(nan=float("inf"))
        raise Failed(
            f"{what}: values differ at index {list(idx)}: got {g[idx].item():.6g}, expected {w[idx].item():.6g} "
            f"({int(bad.sum())} of {bad.numel()} entries differ, max abs diff {diff.max().item():.3g}){extra}"
        )


def true(cond: bool, message: str) -> None:
    if not cond:
        raise Failed(message)
