"""The trusted side of a worker: get it from the zygote, talk to it, time it out, kill it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import tempfile
import threading
import time
from typing import Any

import torch

from grader.files import remove_tree
from grader.pool.errors import InfrastructureError, WeakSandbox, WorkerLost, layers_of  # noqa: F401 - this API too
from grader.sandbox import channel
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


WORKDIR_PREFIX = "attn-kata-worker-"
_swept = False


def _workdir() -> str:
    """A worker's private directory, named after this grading process: once per process, the directories of
    grading processes that are gone (killed mid-batch, a daemon stopped mid-check) are removed, so the temp
    dir does not collect them. A pid reused by a live process only keeps its directory a while longer."""
    global _swept
    if not _swept:
        _swept = True
        tmp = tempfile.gettempdir()
        with contextlib.suppress(OSError):
            for entry in os.scandir(tmp):
                owner = entry.name[len(WORKDIR_PREFIX):].split("-", 1)[0]
                if not (entry.name.startswith(WORKDIR_PREFIX) and owner.isdigit()) or int(owner) == os.getpid():
                    continue
                try:
                    if not entry.is_dir(follow_symlinks=False) or entry.stat().st_uid != os.getuid():
                        continue
                    os.kill(int(owner), 0)  # the grading process is alive: keep it
                except (ProcessLookupError, PermissionError):  # gone (its pid free, or now another user's)
                    remove_tree(entry.path)
                except OSError:
                    pass
    return tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")


def Worker(units: list[tuple[str, str, str]], config: dict[str, Any]) -> Any:
    """One submission's worker, on the backend this machine grades with (grader.settings.backend)."""
    if backend() == "portable":
        from grader.pool.portable import PortableWorker

        return PortableWorker(units, config)
    return LinuxWorker(units, config)


def zygote(fresh: bool = False) -> Any:
    from grader.pool.zygote import zygote as linux  # the Linux backend only: never imported elsewhere

    return linux(fresh=fresh)


def _ended(pid: int) -> None:
    """A worker was killed: a grading process that forked it itself (a zygote that became one: zygote.become)
    reaps it now; a zygote's loop does that on its own."""
    from grader.pool.zygote import current

    z = current()
    if z is not None:
        z.ended(pid)


def exit_status(raw: Any) -> str:
    from grader.pool.zygote import exit_status as linux

    return linux(raw)


class LinuxWorker:
    backend = "linux"

    def __init__(self, units: list[tuple[str, str, str]], config: dict[str, Any]):
        # a zygote that became this grading process forked our worker before it learnt anything (zygote.become)
        ready = zygote().take()
        if ready is not None:
            self.sock, self.pid = ready
        else:
            self.sock, self.pid = self._spawn()
        # a handle on this very process: a signal through it can never reach another process that was given
        # the same pid after the zygote reaped ours (the worker waits for its set-up, so it is alive here)
        try:
            self.pidfd: int | None = os.pidfd_open(self.pid)
        except (OSError, AttributeError):
            self.pidfd = None
        self.alive = True
        self.workdir = _workdir()
        setup = {"units": units, "config": {**config, "workdir": self.workdir, "pid": self.pid}}
        channel.send_msg(self.sock, channel.encode({}, setup))

    @staticmethod
    def _spawn() -> tuple[socket.socket, int]:
        ours, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                return ours, zygote().spawn(child.fileno())
            except (OSError, ValueError):  # an infrastructure hiccup: retry once with a fresh zygote
                try:
                    return ours, zygote(fresh=True).spawn(child.fileno())
                except (OSError, ValueError) as exc:
                    ours.close()
                    raise InfrastructureError(f"could not start a worker: {exc}") from None
        finally:
            child.close()

    def _receive(self, timeout: float) -> tuple[dict[str, torch.Tensor], Any]:
        try:
            data = channel.recv_msg(self.sock, timeout)
            return channel.decode(data)
        except TimeoutError:
            self.kill()
            raise WorkerLost("timeout", f"no answer within {timeout:g} s") from None
        except (EOFError, OSError):
            self.kill()
            raise WorkerLost("crashed", self._exit()) from None
        except channel.ChannelError as exc:
            self.kill()
            raise WorkerLost("unreadable", str(exc)) from None

    def _exit(self) -> str:
        for _ in range(20):
            raw = zygote().status(self.pid)
            if raw != "none":
                return exit_status(raw)
            time.sleep(0.05)
        return "exited"

    def send_all(self, requests: list[bytes]) -> None:
        """Queue every request at once from a thread, so the worker never waits for us between steps
        (and neither side can block the other on full socket buffers)."""

        def pump() -> None:
            with contextlib.suppress(OSError):
                for r in requests:
                    channel.send_msg(self.sock, r)

        threading.Thread(target=pump, daemon=True).start()

    def receive(self, timeout: float) -> tuple[dict[str, torch.Tensor], Any]:
        return self._receive(timeout)

    def confined(self, timeout: float) -> dict[str, bool]:
        """The worker's first message: its layers, read back after confinement and before any learner code
        ran (so no submission can forge them). Malformed: no layer at all."""
        return layers_of(self._receive(timeout)[1])

    def hello(self, timeout: float) -> Any:
        return self._receive(timeout)[1]

    def ask(self, request: bytes, timeout: float) -> tuple[dict[str, torch.Tensor], Any]:
        try:
            channel.send_msg(self.sock, request)
        except OSError:
            self.kill()
            raise WorkerLost("crashed", self._exit()) from None
        return self._receive(timeout)

    def kill(self) -> None:
        """SIGKILL the worker through its pidfd. It is PID 1 of its own PID namespace, so everything it started
        dies with it; where there are no PID namespaces, its pids cgroup and the zygote (a subreaper) kill
        what is left. Never by a bare pid, which the zygote may have reaped and the system given away."""
        self.alive = False
        if self.pidfd is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            os.close(self.pidfd)
            self.pidfd = None
            _ended(self.pid)
        self.sock.close()
        remove_tree(self.workdir)

    def close(self) -> None:
        self.kill()
