"""Cheap seeded initialisation for modules the size of GPT-2's (step 14's cases ask for it).

PyTorch's `nn.Linear` draws its initial weights with `Tensor.uniform_`, one generator call per element: a
768 × 768 layer costs ~4 ms, a GPT-2-size MultiHeadAttention ~20 ms, two builds per submission most of
what a batch's worker spends on it. Under `fast_uniform()`, `uniform_` copies a window of a fixed table of
2**20 uniform values instead (or of the same values moved to [-1, 1), for symmetric bounds: one pass), scaled
to the same bounds, at a position drawn from the seeded default generator. The grader's reference is built
under the same context (the same probe runs on both sides), so a module built like the reference gets the
reference's values, and one that draws a different sequence (another shape, an extra bias, another order) gets
others, exactly as with the real generator. The table comes from a fixed seed (nothing of the secret, nothing of
the reference); the zygote builds it once (grader.pool.preload), so a worker inherits it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch

POOL_SIZE = 1 << 20
_pool: torch.Tensor | None = None
_signed: torch.Tensor | None = None  # the same values moved to [-1, 1): 2 * u - 1
_ORIGINAL = torch.Tensor.uniform_


def pool() -> torch.Tensor:
    """The table of uniform values in [0, 1): the same in every process (seed 0, its own generator)."""
    global _pool, _signed
    if _pool is None:
        _pool = torch.rand(POOL_SIZE, generator=torch.Generator().manual_seed(0))
        _signed = _pool * 2 - 1
    return _pool


@contextlib.contextmanager
def fast_uniform() -> Iterator[None]:
    """`Tensor.uniform_` from the table while the block runs, in this thread only."""
    table, me = pool(), threading.get_ident()
    signed = _signed

    def uniform_(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        a = args[0] if args else kwargs.get("from", 0.0)
        b = args[1] if len(args) > 1 else kwargs.get("to", 1.0)
        n = self.numel()
        if (threading.get_ident() != me or kwargs.get("generator") is not None or not self.is_floating_point()
                or self.is_complex() or n > POOL_SIZE or n == 0):
            return _ORIGINAL(self, *args, **kwargs)
        start = int(torch.randint(POOL_SIZE - n + 1, ()))  # from the seeded default generator
        with torch.no_grad():
            if a == -b and self.dtype == signed.dtype and self.is_contiguous():
                # symmetric bounds (nn.Linear's): one pass over the weights instead of three
                torch.mul(signed.narrow(0, start, n).view(self.shape), b, out=self)
            else:
                self.copy_(table.narrow(0, start, n).view(self.shape)).mul_(b - a).add_(a)
        return self

    shadowed = "uniform_" in vars(torch.Tensor)
    torch.Tensor.uniform_ = uniform_  # type: ignore[method-assign]
    try:
        yield
    finally:
        if shadowed:
            torch.Tensor.uniform_ = _ORIGINAL  # type: ignore[method-assign]
        else:
            del torch.Tensor.uniform_
