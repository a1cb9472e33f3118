"""Imported once in the zygote: torch and the worker code, before any learner code.

The zygote never imports the reference (solutions/) or the grader's checks, and never learns the
secret: every worker is a fork of it and could read whatever it held. So it warms torch's lazy
first-call paths with the chapter's *operations* one by one (matmul, softmax, masked_fill, triu/tril,
dropout, Linear forward and backward, einsum, views and transposes), never with a composed
implementation of a step, and runs the probe machinery on torch's own modules. No result is kept.
Then it freezes the garbage collector: a worker's collections never walk (and so never copy,
page by page) the objects it inherited.
"""

import sys

assert sys.platform == "linux", "the Linux backend's own module"  # the type checker skips it elsewhere


import gc
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.sandbox import channel, landlock
from grader.sandbox import confine as sandbox
from grader.worker import probes
from grader.worker import serve as worker


def _ops() -> None:
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(2, 6, 4, generator=g, dtype=dtype, requires_grad=True)
        w = nn.Parameter(torch.randn(4, 4, generator=g, dtype=dtype))
        lin = nn.Linear(4, 4, bias=True).to(dtype)
        a = lin(x) @ w  # (2, 6, 4)
        s = a @ x.transpose(1, 2) / 4**0.5  # (2, 6, 6)
        s = s + torch.einsum("bik,bjk->bij", x, x) + torch.bmm(x, x.transpose(1, 2))
        up = torch.triu(torch.ones(6, 6, dtype=dtype), diagonal=1).bool()
        low = torch.tril(torch.ones(6, 6, dtype=dtype)) == 0
        s = s.masked_fill(up, -torch.inf).masked_fill(low, float("-inf"))
        s = torch.where(up, torch.full_like(s, -torch.inf), s)
        p = torch.softmax(s, dim=-1) + F.softmax(s, dim=1).nan_to_num() + s.softmax(-1)
        p = p + torch.exp(s - s.max(dim=-1, keepdim=True).values).nan_to_num() / 3
        p = nn.Dropout(0.5).train()(p) + F.dropout(p, 0.25, training=True) + torch.dropout(p, 0.1, True)
        keep = torch.rand(p.shape, dtype=dtype) >= 0.5
        p = p * keep / 0.5 + torch.bernoulli(torch.full_like(p, 0.5)) * p
        z = (p @ x).view(2, 6, 2, 2).transpose(1, 2).contiguous().transpose(1, 2).reshape(2, 6, 4)
        z = torch.cat([z, z.flatten(2)], dim=-1) + torch.stack([z, z], dim=0).sum(0).repeat(1, 1, 2)
        (z.sum() + z.mean() + z.norm() + (z ** 2).sum(dim=-1).sqrt().sum()).backward()
        torch.isclose(z, z).all()
        torch.allclose(z, z)
        torch.equal(z, z)
        z.detach().clone().numpy()


def _probes() -> None:
    """The probe machinery, on torch's own functions and modules (nothing of a step)."""
    ns = {"fn": torch.exp, "Mod": nn.Linear}
    x = torch.randn(3, 4)
    cases = [("call", {"fn": "fn", "args": ["x"], "consts": [], "grad": True, "repeat": 2}, {"x": x}),
             ("module", {"cls": "Mod", "ctor": {"in_features": 4, "out_features": 4}, "grad": True,
                         "structure": True}, {"x": x, "w.weight": torch.randn(4, 4), "grad_out": torch.ones(3, 4)}),
             ("construct", {"cls": "Mod", "ctor": {"in_features": 4, "out_features": 2}}, {}),
             # builds its table of initial values (grader/worker/fast_init.py): every worker inherits it
             ("module", {"cls": "Mod", "ctor": {"in_features": 4, "out_features": 4}, "fast_init": True}, {"x": x}),
             # step 4's counting of work (grader/worker/counting.py): its modes' and tracer's first use
             ("loops", {"fn": "fn", "args": ["x"], "sizes": [3, 4]}, {"3.x": x[:3], "4.x": x})]
    for probe, params, inputs in cases:
        worker.run_case(ns, {"name": "warm", "probe": probe, "params": params, "seed": 0}, inputs, set())


def _warm() -> None:
    _ops()
    _probes()
    channel.decode(channel.encode({"warm": torch.ones(2)}, {}))  # safetensors' lazy numpy imports
    probes.make_windows(1024, (1, 2))  # step 14's `moved` case (window 1 or 2): made once for every worker
    torch.manual_seed(0)
    sandbox.readable_paths()  # cached: each worker's Landlock rules reuse it
    sandbox.prepare_view()  # kept: the folders a worker of a root grader opens for nobody, ready to mount


HUGE = 1 << 21


def _huge_ranges() -> list[int]:
    """The 2 MiB-aligned blocks of anonymous memory and heap that MADV_COLLAPSE may back in a huge page."""
    try:
        with open("/proc/self/maps") as f:
            maps = f.read().splitlines()
    except OSError:
        return []
    blocks: list[int] = []
    for line in maps:
        fields = line.split()
        if len(fields) < 2 or not fields[1].startswith("rw") or (len(fields) > 5 and fields[5] != "[heap]"):
            continue
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        blocks += range((lo + HUGE - 1) & ~(HUGE - 1), hi & ~(HUGE - 1), HUGE)
    return blocks


class _Collapse:
    """Back the anonymous memory in transparent huge pages where the kernel can (Linux >= 6.1, MADV_COLLAPSE):
    every fork then copies a few hundred page-table entries instead of tens of thousands, and every worker's
    exit unmaps as few (fork + exit: ~11 -> ~4 ms here). It costs 0.05-1.4 s (compaction), so it is not done
    before the zygote serves: the zygote's loop calls `step` whenever no request is waiting, one block at a
    time, and a fork meanwhile simply copies what is not collapsed yet. Best effort: a failure changes nothing."""

    def __init__(self) -> None:
        import ctypes

        from grader.sandbox.landlock import libc

        self.blocks: list[int] = []
        try:
            self.madvise = libc.madvise
            self.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        except AttributeError:
            return
        self.blocks = _huge_ranges()[::-1]  # popped from the end: in address order

    def step(self, seconds: float = 0.005) -> bool:
        """Collapse blocks for about `seconds`; whether any is left."""
        end = time.monotonic() + seconds
        while self.blocks and time.monotonic() < end:
            self.madvise(self.blocks.pop(), HUGE, 25)  # MADV_COLLAPSE
        return bool(self.blocks)


_warm()
gc.collect()
gc.freeze()
landlock.release_free_memory()  # what the warming freed: ~2 MB less here and in every fork
collapse = _Collapse()
