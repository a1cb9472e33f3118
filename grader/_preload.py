"""Imported once in the zygote: torch, the worker code and the reference, before any learner code.

It also runs every probe once on throwaway inputs (a random secret), so that torch's lazy
first-call set-up happens here once instead of in every forked worker. No result is kept.
Then it freezes the garbage collector: a worker's collections never walk (and so never copy,
page by page) the objects it inherited.
"""

import gc
import os

import torch

from . import channel, checks, reference, sandbox, worker


def _warm() -> None:
    ns = reference.namespace()
    for cases in checks.plans(os.urandom(16).hex()).values():
        for name, case in cases.items():
            worker.run_case(ns, {"name": name, "probe": case.probe, "params": case.params, "seed": case.seed},
                            case.inputs, set())
    channel.decode(channel.encode({"warm": torch.ones(2)}, {}))  # safetensors' lazy numpy imports
    torch.manual_seed(0)
    sandbox._readable_paths()  # cached: each worker's Landlock rules reuse it


def _collapse() -> None:
    """Back the anonymous memory in transparent huge pages where the kernel can (Linux >= 6.1,
    MADV_COLLAPSE): every fork then copies a few hundred page-table entries instead of tens of
    thousands, and every worker's exit unmaps as few. Best effort: any failure changes nothing."""
    import ctypes

    from .landlock import _libc as libc

    try:
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/maps") as f:
            maps = f.read().splitlines()
    except (OSError, AttributeError):
        return
    huge = 1 << 21
    for line in maps:
        fields = line.split()
        if len(fields) < 2 or not fields[1].startswith("rw") or (len(fields) > 5 and fields[5] != "[heap]"):
            continue
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        lo, hi = (lo + huge - 1) & ~(huge - 1), hi & ~(huge - 1)
        if hi > lo:
            libc.madvise(lo, hi - lo, 25)  # MADV_COLLAPSE


_warm()
gc.collect()
gc.freeze()
_collapse()
