"""The trusted side of a worker: get it from the zygote, talk to it, time it out, kill it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from . import channel
from .zygote import exit_status

ROOT = Path(__file__).resolve().parent.parent


class WorkerLost(Exception):
    """The worker did not answer: `reason` is timeout, crashed, or unreadable."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class Zygote:
    """Starts the zygote process; each grading process (forked ones too) gets its own connection."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="attn-kata-")
        self.path = os.path.join(self.dir, "zygote.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(64)
        alive_r, self.alive_w = os.pipe()
        code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from grader.zygote import main; main()"
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", code, str(listener.fileno()), str(alive_r)],
            pass_fds=(listener.fileno(), alive_r), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, env=_zygote_env())
        listener.close()
        os.close(alive_r)
        self._conn: socket.socket | None = None
        self._owner = -1

    def _client(self) -> socket.socket:
        if self._conn is None or self._owner != os.getpid():
            self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._conn.connect(self.path)
            self._owner = os.getpid()
        return self._conn

    def _ask(self, line: str, fds: list[int] | None = None) -> str:
        conn = self._client()
        conn.settimeout(60)  # the first answer waits for the zygote to import torch
        socket.send_fds(conn, [line.encode() + b"\n"], fds or [])
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(256)
            if not chunk:
                raise OSError("zygote closed the connection")
            data += chunk
        return data.decode().strip()

    def spawn(self, fd: int) -> int:
        return int(self._ask("spawn {}", [fd]))

    def status(self, pid: int) -> str:
        return self._ask(f"status {pid}")


def _zygote_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
            "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


_ZYGOTE: Zygote | None = None


def zygote() -> Zygote:
    global _ZYGOTE
    if _ZYGOTE is None or _ZYGOTE.proc.poll() is not None:
        _ZYGOTE = Zygote()
    return _ZYGOTE


def warm_up() -> None:
    """Start the zygote now: it imports torch while this process does the same."""
    zygote()


class Worker:
    def __init__(self, units: list[tuple[str, str, str]], config: dict[str, Any]):
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.pid = zygote().spawn(child.fileno())
        finally:
            child.close()
        self.alive = True
        channel.send_msg(self.sock, channel.encode({}, {"units": units, "config": config}))

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
        """SIGKILL the worker's whole process group (it called setsid), then the worker itself."""
        self.alive = False
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass
        self.sock.close()

    def close(self) -> None:
        if self.alive:
            self.kill()
