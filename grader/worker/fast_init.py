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

A GPT-2-size weight (768 × 768, nn.Linear's bound 1/√768 · √3 · √(1/3)) is not even copied: the zygote also makes
the table already scaled to that bound (`SCALED`), and such a weight becomes a view of its window (`Tensor.set_`):
the same values bit for bit (the same float32 multiplication, done once), no fresh memory to fault in and fill,
twice per side and per submission. Its storage is the table's: code that writes into such a weight in place
writes into the process's copy of the table (a worker's own, copy-on-write: never the zygote's), as it would into
any tensor it shares; the builds the grader asks for (the stand-ins', the reference's) never do.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from typing import Any

import torch

POOL_SIZE = 1 << 20
_pool: torch.Tensor | None = None
_signed: torch.Tensor | None = None  # the same values moved to [-1, 1): 2 * u - 1 (`signed`)
_ORIGINAL = torch.Tensor.uniform_
# nn.Linear(768, 768)'s bound (torch.nn.init.kaiming_uniform_ with a = √5, as nn.Linear.reset_parameters calls it)
GPT2_BOUND = math.sqrt(3.0) * (torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5)) / math.sqrt(768))
SCALED: dict[float, torch.Tensor] = {}  # bound -> the signed table times that bound (made with the table)
VIEW_MIN = 1 << 16  # a smaller weight is copied: a view saves nothing worth a table


def _unit() -> torch.Tensor:
    return torch.rand(POOL_SIZE, generator=torch.Generator().manual_seed(0))


def signed() -> torch.Tensor:
    """The table moved to [-1, 1) (what nn.Linear's symmetric bounds use), and the GPT-2-size one, made once."""
    global _signed
    if _signed is None:
        _signed = _unit() * 2 - 1
        SCALED[GPT2_BOUND] = torch.mul(_signed, GPT2_BOUND)  # as uniform_ below multiplies a window of it
    return _signed


def pool() -> torch.Tensor:
    """The table of uniform values in [0, 1): the same in every process (seed 0, its own generator). Made when
    first asked (asymmetric bounds, which no step's module uses), not in the zygote: 4 MB less in every process."""
    global _pool
    if _pool is None:
        _pool = _unit()
    return _pool


@contextlib.contextmanager
def fast_uniform() -> Iterator[None]:
    """`Tensor.uniform_` from the table while the block runs, in this thread only."""
    table, me = signed(), threading.get_ident()

    def uniform_(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        a = args[0] if args else kwargs.get("from", 0.0)
        b = args[1] if len(args) > 1 else kwargs.get("to", 1.0)
        n = self.numel()
        if (threading.get_ident() != me or kwargs.get("generator") is not None or not self.is_floating_point()
                or self.is_complex() or n > POOL_SIZE or n == 0):
            return _ORIGINAL(self, *args, **kwargs)
        start = int(torch.randint(POOL_SIZE - n + 1, ()))  # from the seeded default generator
        with torch.no_grad():
            scaled = SCALED.get(b) if a == -b and n >= VIEW_MIN else None
            if scaled is not None and self.dtype == scaled.dtype and self.is_contiguous():
                # the window of the table made at this bound, as a view: its fresh memory is never touched
                return self.set_(scaled.untyped_storage(), start, self.shape, self.stride())
            if a == -b and self.dtype == table.dtype and self.is_contiguous():
                # symmetric bounds (nn.Linear's): one pass over the weights instead of three
                torch.mul(table.narrow(0, start, n).view(self.shape), b, out=self)
            else:
                self.copy_(pool().narrow(0, start, n).view(self.shape)).mul_(b - a).add_(a)
        return self

    shadowed = "uniform_" in vars(torch.Tensor)
    torch.Tensor.uniform_ = uniform_  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        if shadowed:
            torch.Tensor.uniform_ = _ORIGINAL  # type: ignore[method-assign]
        else:
            del torch.Tensor.uniform_
