"""`attn-kata doctor`: which confinement layers are active here, each claimed by the worker *and*
verified by an attack the doctor runs inside a real worker. A layer is reported active only if both."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

import torch

from .checks import Case
from .engine import _request
from .registry import BY_ID
from .session import Worker

ROOT = Path(__file__).resolve().parent.parent

PROBE = '''
import os, resource, socket, torch

def attention_scores(inputs, query):
    def blocked(fn):
        try:
            fn()
            return 0.0
        except OSError:
            return 1.0
    def fork_many():
        pids = []
        try:
            for _ in range(64):
                pid = os.fork()
                if pid == 0:
                    import time
                    time.sleep(2)
                    os._exit(0)
                pids.append(pid)
        finally:
            for pid in pids:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
    return torch.tensor([
        blocked(lambda: socket.create_connection(("127.0.0.1", {port}), timeout=1).close()),
        blocked(lambda: open({secret_file!r}).read()),
        blocked(lambda: open({outside!r}, "w").write("x")),
        blocked(lambda: os.kill({grader_pid}, 0)),
        blocked(fork_many),
        float(resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY),
        float(resource.getrlimit(resource.RLIMIT_CORE)[0] == 0),
        float(os.getuid() != 0),
    ])
'''

CHECKS = (  # (name, claimed by, what the attack tried)
    ("no TCP (network namespace or Landlock)", ("network_namespace", "landlock_no_tcp"),
     "connect to a port the grader listens on"),
    ("kata files unreadable (Landlock)", ("landlock_filesystem",), "read solutions/ from disk"),
    ("writes only in its own folder (Landlock)", ("landlock_filesystem",), "write a file outside its folder"),
    ("cannot signal the grader (Landlock scope or other user)", ("landlock_signal_scope", "unprivileged_user"),
     "send a signal to the grader process"),
    ("process count capped (pids cgroup or RLIMIT_NPROC)", ("pids_cgroup", "unprivileged_user"),
     "fork 64 processes"),
    ("memory limit (RLIMIT_AS)", ("rlimits",), "read its address-space limit"),
    ("no core dumps", ("rlimits",), "read its core-size limit"),
    ("not running as root", ("unprivileged_user",), "read its uid"),
)


def diagnose() -> list[tuple[str, bool, bool, str]]:
    """Rows of (layer, claimed, verified, attack)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    outside_dir = tempfile.mkdtemp(prefix="attn-kata-doctor-")
    os.chmod(outside_dir, 0o777)
    outside = os.path.join(outside_dir, "escaped.txt")
    src = PROBE.format(port=listener.getsockname()[1], secret_file=str(ROOT / "solutions" / "dot_scores.py"),
                       outside=outside, grader_pid=os.getpid())
    worker = Worker([("doctor", "doctor.py", src)], {})
    try:
        layers = worker.hello(60).get("layers") or {}
        case = Case("call", {"inputs": torch.zeros(1, 1), "query": torch.zeros(1)},
                    {"fn": "attention_scores", "args": ["inputs", "query"], "consts": [], "grad": False,
                     "repeat": 1})
        tensors, _ = worker.ask(_request(BY_ID["dot_scores"], {"probe": case}), 60)
        flags = tensors.get("probe/out", torch.zeros(len(CHECKS))).tolist()
    finally:
        worker.close()
        listener.close()
    escaped = os.path.exists(outside)
    shutil.rmtree(outside_dir, ignore_errors=True)
    rows = []
    for (name, claimed_by, attack), flag in zip(CHECKS, flags, strict=False):
        verified = bool(flag) and not (escaped and "writes" in name)
        rows.append((name, any(layers.get(k) for k in claimed_by), verified, attack))
    for key in ("session", "private_dir", "clean_env"):
        rows.append((key.replace("_", " "), bool(layers.get(key)), bool(layers.get(key)), "set up before any code"))
    return rows
