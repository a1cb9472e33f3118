"""The Linux backend's handle on a worker: get it from the zygote, talk to it, time it out, kill it."""

from __future__ import annotations

import sys

assert sys.platform == "linux", "the Linux backend's own module"  # the type checker skips it elsewhere

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
from grader.pool.errors import InfrastructureError, WorkerLost, layers_of
from grader.sandbox import channel

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
