"""What grading with a secret needs of a worker, and the worker of this machine's backend (grader.pool.linux's
LinuxWorker, or grader.pool.portable's PortableWorker: the same interface)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

from grader.pool.errors import InfrastructureError, WeakSandbox, WorkerLost, layers_of  # noqa: F401 - this API too
from grader.settings import backend

# What instructor grading (a secret given) needs of every worker, as the worker observed itself after
# confinement (grader.sandbox.confine.LAYERS; `attn-kata doctor` proves each by an attack): alternatives per need.
REQUIRED_LAYERS: dict[str, tuple[str, ...]] = {
    "kata files and /proc unreadable (Landlock)": ("landlock_filesystem",),
    "no capabilities": ("no_capabilities", "unprivileged_user"),
    # another uid is not enough: a grader that is not root gives its workers its own uid, and before Linux 6.12
    # Landlock cannot scope signals (red team 15: `os.kill(-1, SIGKILL)` ended the grade and a classmate's worker)
    "cannot signal other processes": ("pid_namespace", "landlock_signal_scope", "seccomp_no_signals_out"),
    "no new sockets (seccomp)": ("seccomp_no_sockets",),
    "disk use capped (private tmpfs, or no file writes)": ("private_tmpfs", "landlock_no_file_writes"),
    # where a grader is not root there is no IPC namespace: seccomp refuses every System V and POSIX IPC call
    "nothing shared between workers (IPC namespace)": ("ipc_namespace", "seccomp_no_ipc"),
    # chmod, chown and utime need no capability of a file's owner, and Landlock does not cover them: a worker
    # must own nothing outside its work dir (a root grader's runs as nobody), or be denied them by seccomp (a
    # grader that is not root: its workers keep its uid, nothing else is possible)
    "runs as a uid that owns nothing outside its work dir": ("owns_nothing_outside", "seccomp_no_file_changes"),
    "never root (a root grader's worker runs as nobody)": ("unprivileged_user",),
    # what no uid stops: a lock, taken or read, on any file it may read (POSIX record locks on /etc/passwd carried
    # a reference to a classmate graded at the same time); and, whatever its uid, no metadata change by an owner
    "no chmod, chown, xattr, utime or locks (seccomp)": ("seccomp_no_file_changes",),
    # a process of the same uid may lower another's limits (RLIMIT_CPU 1: a classmate's worker killed), renice it
    # or pin it to one CPU (a classmate's time-out), and Landlock scopes none of it: it must name no other process,
    # or be refused (a grader that is not root has no PID namespace)
    "cannot change other processes' limits or scheduling": ("pid_namespace", "seccomp_no_process_changes"),
}


# Where grading happens decides what it needs: a shared class host ("host": `batch`, `grade`, nbgrader on a
# JupyterHub) runs many students' workers side by side on one machine; a container per submission ("container":
# Gradescope, PrairieLearn) holds one student's upload and is thrown away, so what one worker could leave for the
# next (IPC objects) or take from it (the disk) reaches no classmate there.
CONTEXTS = ("host", "container")
NOT_NEEDED_IN: dict[str, set[str]] = {
    "host": set(),
    "container": {"disk use capped (private tmpfs, or no file writes)",
                  "nothing shared between workers (IPC namespace)"},
}
# what to do about each need, for the refusal
FIXES: dict[str, str] = {
    "kata files and /proc unreadable (Landlock)": "Linux 5.13+ with Landlock enabled (lsm=landlock); in Docker, "
    "version 23 or later (older seccomp profiles block Landlock's calls)",
    "no new sockets (seccomp)": "a kernel with seccomp filters (CONFIG_SECCOMP_FILTER)",
    "disk use capped (private tmpfs, or no file writes)": "run the batch as root (each worker gets a tmpfs of its "
    "own), or Landlock (Linux 5.13+; its workers then write no file), or grade each submission in a container",
    "nothing shared between workers (IPC namespace)": "run the batch as root, or a kernel with seccomp filters "
    "(CONFIG_SECCOMP_FILTER), or grade each submission in a container of its own",
    "no chmod, chown, xattr, utime or locks (seccomp)": "a kernel with seccomp filters (CONFIG_SECCOMP_FILTER)",
    "cannot signal other processes": "run the batch as root (each worker gets a PID namespace), or a kernel with "
    "seccomp filters (CONFIG_SECCOMP_FILTER), or Linux 6.12+ (Landlock scopes signals)",
    "cannot change other processes' limits or scheduling": "run the batch as root, or a kernel with seccomp "
    "filters (CONFIG_SECCOMP_FILTER)",
    "runs as a uid that owns nothing outside its work dir": "run the batch as root (its workers then run as "
    "nobody), or a kernel with seccomp filters (which then deny chmod, chown, utime and extended attributes)",
    "never root (a root grader's worker runs as nobody)": "a Python that others can read (a venv of "
    "/usr/bin/python3), or a mount namespace for each worker (CAP_SYS_ADMIN; in Docker --cap-add SYS_ADMIN) to "
    "open the way to a Python under a folder only root can read",
}


def required_layers(context: str = "host") -> dict[str, tuple[str, ...]]:
    """The needs of grading with a secret in `context` ("host" or "container"), each with its alternatives."""
    skip = NOT_NEEDED_IN.get(context, set())
    return {need: any_of for need, any_of in REQUIRED_LAYERS.items() if need not in skip}


def missing_layers(layers: Any, context: str = "host") -> list[str]:
    """The needs of `required_layers(context)` that a worker's observed layers do not show."""
    layers = layers if isinstance(layers, dict) else {}
    return [need for need, any_of in required_layers(context).items()
            if not any(layers.get(k) is True for k in any_of)]


def refusal(missing: list[str]) -> str:
    """One line per missing need, with what to do about it."""
    return "; ".join(f"{need} (needs {FIXES[need]})" if need in FIXES else need for need in missing)


class WorkerHandle(Protocol):
    """What the trusted side holds of one submission's worker, on either backend."""

    backend: str
    pid: int
    alive: bool

    def send_all(self, requests: list[bytes]) -> None: ...
    def receive(self, timeout: float) -> tuple[dict[str, torch.Tensor], Any]: ...
    def confined(self, timeout: float) -> dict[str, bool]: ...
    def hello(self, timeout: float) -> Any: ...
    def ask(self, request: bytes, timeout: float) -> tuple[dict[str, torch.Tensor], Any]: ...
    def kill(self) -> None: ...
    def close(self) -> None: ...


def Worker(units: list[tuple[str, str, str]], config: dict[str, Any]) -> WorkerHandle:
    """One submission's worker, on the backend this machine grades with (grader.settings.backend)."""
    if sys.platform == "linux" and backend() == "linux":
        from grader.pool.linux import LinuxWorker  # the Linux backend only: never imported elsewhere

        return LinuxWorker(units, config)
    from grader.pool.portable import PortableWorker

    return PortableWorker(units, config)
