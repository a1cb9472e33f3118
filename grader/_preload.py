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


_warm()
gc.collect()
gc.freeze()
