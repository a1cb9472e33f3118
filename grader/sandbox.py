"""Confinement of a worker process (runs inside the worker, before any learner code)."""

from __future__ import annotations

import os
import resource
import sys
import tempfile
from typing import Any

import torch

DEFAULT_LIMITS: dict[str, Any] = {
    "cpu_seconds": 60,  # a backstop; the per-step wall-clock limit is enforced from outside
    "memory_bytes": 1024**3,  # address space above what torch already maps
    "file_bytes": 16 * 1024**2,
    "open_files": 256,
    "processes": 32,  # a fork bomb stops here (enforced once the worker is not root)
}
NOBODY = 65534


def _limit(which: int, value: int) -> None:
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def confine(config: dict[str, Any]) -> None:
    limits = {**DEFAULT_LIMITS, **config.get("limits", {})}
    os.setsid()  # own process group: the grader kills the whole group on timeout
    workdir = tempfile.mkdtemp(prefix="attn-kata-worker-")
    os.chdir(workdir)
    # nothing the learner prints reaches the grader's stdout (and so never a --format json stream)
    log = os.open(os.path.join(workdir, "output.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.environ.clear()
    os.environ.update({"HOME": workdir, "TMPDIR": workdir, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                       "OMP_NUM_THREADS": "1", "ATTN_KATA_WORKER": "1"})
    nproc = int(limits["processes"])
    if os.geteuid() == 0:  # never run learner code as root: become nobody (so RLIMIT_NPROC applies)
        os.chown(workdir, NOBODY, NOBODY)
        os.chown(os.path.join(workdir, "output.log"), NOBODY, NOBODY)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        nproc += _processes_of(NOBODY)
    else:
        nproc += _processes_of(os.getuid())
    _limit(resource.RLIMIT_NPROC, nproc)
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_CPU, int(limits["cpu_seconds"]))
    _limit(resource.RLIMIT_FSIZE, int(limits["file_bytes"]))
    _limit(resource.RLIMIT_NOFILE, int(limits["open_files"]))
    _limit(resource.RLIMIT_AS, _address_space() + int(limits["memory_bytes"]))
    torch.set_num_threads(1)


def reset_torch_state(seed: int) -> None:
    """Undo what learner code may have changed in torch's global defaults, then seed its RNG."""
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)
    torch.manual_seed(seed)


def hard_exit(code: int = 0) -> None:
    os._exit(code)
