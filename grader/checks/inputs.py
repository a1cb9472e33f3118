"""Input generation: each step's cases drawn from the course secret, and which of them can be known without it.

`Gen` is a step's private generator, seeded by HMAC(secret, step id); `plans(secret)` runs every step's `@cases`
function with it, and marks `Case.public` the cases that drew nothing from it (the book's printed example), which
prove no work (grader.checks.vouching). Trusted side: the secret never leaves the grading process.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
from collections.abc import Callable
from typing import Any

import torch

from grader.checks.model import Case
from grader.checks.registration import CASES, load_all
from grader.registry import STEPS


class Gen:
    """Private generator for one step: seeded by HMAC(secret, step id), never torch's global RNG. (Below its
    method `int`, the class body's `int` is that method: the type is written `builtins.int` there.)"""

    def __init__(self, secret: str, step: str):
        digest = hmac.new(secret.encode(), f"attn-kata/{step}".encode(), hashlib.sha256).digest()
        self.g = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))

    def rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=self.g)

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=self.g) * scale

    def int(self, low: int, high: int) -> int:
        """Uniform integer in [low, high]."""
        return int(torch.randint(low, high + 1, (1,), generator=self.g))

    def distinct(self, draw: Callable[[], tuple[builtins.int, ...]], *fixed: builtins.int
                 ) -> tuple[builtins.int, ...]:
        """`draw()` again until its sizes are pairwise distinct and distinct from `fixed` (sizes the case sets):
        d_in, d_out, num_tokens, context_length, num_heads and head_dim then never coincide, so a bug that
        swaps two of them loses its points under every secret. Deterministic: only this generator is drawn."""
        for _attempt in range(10_000):
            sizes = draw()
            if len({*sizes, *fixed}) == len(sizes) + len(fixed):
                return sizes
        raise ValueError("no pairwise distinct sizes in these ranges")

    def seed(self) -> builtins.int:
        return int(torch.randint(0, 2**31 - 1, (1,), generator=self.g))

    def weights(self, shapes: dict[str, tuple[builtins.int, ...]]) -> dict[str, torch.Tensor]:
        """Weights for a module, named `w.<parameter>` as the probes expect."""
        return {f"w.{n}": self.randn(*s, scale=0.5) for n, s in shapes.items()}


def book_inputs() -> torch.Tensor:
    """The chapter's `inputs`: torch.manual_seed(123); torch.rand(6, 3) (drawn privately)."""
    return torch.rand(6, 3, generator=torch.Generator().manual_seed(123))


# "Your journey starts with one step": the embeddings printed in book §3.3.1
JOURNEY = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                        [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])



class _Drawn(int):
    """An integer drawn from the secret's generator; what is computed from it stays marked (its arithmetic,
    below)."""


def _drawn_op(name: str) -> Callable[..., Any]:
    """int's operator `name`, an integer result marked _Drawn."""
    def op(self: int, *other: Any) -> Any:
        v = getattr(int, name)(self, *other)
        return _Drawn(v) if type(v) is int else v
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__", "__rfloordiv__",
              "__mod__", "__rmod__", "__pow__", "__neg__", "__abs__"):
    setattr(_Drawn, _name, _drawn_op(_name))
del _name


class _Moved(Gen):
    """The same draws in the same order (so every choice the plan makes from them is the same), each value
    marked: tensors moved to other values, integers wrapped as _Drawn. A case that comes out equal and unmarked
    drew nothing from the secret."""

    def rand(self, *shape: int) -> torch.Tensor:
        return (super().rand(*shape) + 0.5) % 1.0

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return super().randn(*shape, scale=scale) + scale

    def int(self, low: int, high: int) -> int:
        return _Drawn(super().int(low, high))


def _marked(v: Any) -> bool:
    if isinstance(v, _Drawn):
        return True
    if isinstance(v, dict):
        return any(_marked(x) for x in v.values())
    return isinstance(v, list | tuple) and any(_marked(x) for x in v)


def _same(a: Case, b: Case) -> bool:
    """The same probe, parameters and inputs, no parameter drawn (the seed aside: a case that differs only there
    is counted public, so it vouches for nothing, the safe side)."""
    if a.probe != b.probe or a.params != b.params or _marked(b.params) or a.inputs.keys() != b.inputs.keys():
        return False
    return all(x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
               for x, y in ((a.inputs[k], b.inputs[k]) for k in a.inputs))


def plans(secret: str) -> dict[str, dict[str, Case]]:
    """Each step's cases under `secret`, those its answer can be known without it (Case.public) marked."""
    load_all()
    out = {}
    for s in STEPS:
        cases = CASES[s.id](Gen(secret, s.id))
        moved = CASES[s.id](_Moved(secret, s.id))
        for name, case in cases.items():
            case.public = name in moved and _same(case, moved[name])
        out[s.id] = cases
    return out
