"""The trusted side of the portable worker backend: spawn a worker (`python -I`), talk to it over its pipes,
time it out, kill it. The same interface as the Linux backend's `session.LinuxWorker`, so the engine never
knows which one runs (grader.settings.backend decides, once).

Spawning costs a Python start and a torch import (~1.3 s here), so one spare worker is kept started while this
process grades more than once (the daemon, a batch, `watch`): a repeated check then waits for no import. A spare
holds nothing but torch and the worker code until it is handed a submission; it is one submission's alone.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from typing import TYPE_CHECKING, Any

from grader.files import remove_tree
from grader.sandbox import framing  # torch-free: `warm_up` starts a spare without importing torch here
from grader.settings import IMPORT_ROOT

if TYPE_CHECKING:
    import torch

WORKDIR_PREFIX = "attn-kata-pworker-"
_CHILD = ("import sys; sys.path.insert(0, {root!r}); from grader.worker.portable import main; main()")
_spare: subprocess.Popen | None = None
_taken = 0  # workers this process has used: from the second on, a spare is kept ready
_lock = threading.Lock()


def _env() -> dict[str, str]:
    keep = ("PATH", "SYSTEMROOT", "SystemRoot", "TEMP", "TMP", "TMPDIR", "HOME", "USERPROFILE", "LANG", "LC_ALL",
            "OMP_NUM_THREADS", "ATTN_KATA_SIMULATE", "ATTN_KATA_SIMULATE_OS", "ATTN_KATA_DEBUG")
    return {k: os.environ[k] for k in keep if k in os.environ} | {"OMP_NUM_THREADS": "1"}


def _command() -> list[str]:
    code = _CHILD.format(root=str(IMPORT_ROOT))
    sim = os.environ.get("ATTN_KATA_SIMULATE")  # tests/platform_sim.py: the child takes the same platform's shape
    if sim:
        code = f"import runpy; runpy.run_path({sim!r}, run_name='attn_kata_simulation'); " + code
    return [sys.executable, "-I", "-c", code]


def _start() -> subprocess.Popen:
    # its own session (POSIX) or process group (Windows: the learner's Ctrl-C does not reach it): `_kill` ends
    # what it started with it
    kwargs: dict[str, Any]
    if sys.platform == "win32":
        kwargs = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    else:
        kwargs = {"start_new_session": True}
    stderr = None if os.environ.get("ATTN_KATA_DEBUG") else subprocess.DEVNULL
    return subprocess.Popen(_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=_env(),
                            **kwargs)


def _take() -> subprocess.Popen:
    """A started child: the spare if it is alive, else a new one; keeps a spare from the second worker on."""
    global _spare, _taken
    with _lock:
        proc, _spare = _spare, None
        if proc is None or proc.poll() is not None:
            proc = _start()
        _taken += 1
        if _taken >= 2 or os.environ.get("ATTN_KATA_KEEP_WARM") == "1":
            _spare = _start()
    return proc


def keep_warm() -> None:
    """Start a spare now (the daemon, `watch`): the next check finds its worker already imported."""
    global _spare
    with _lock:
        if _spare is None or _spare.poll() is not None:
            _spare = _start()


@atexit.register
def stop_spare() -> None:
    """Kill the spare (this process is ending)."""
    global _spare
    if _spare is not None:
        _kill(_spare)
        _spare = None


def _kill(proc: subprocess.Popen) -> None:
    """The worker and everything it started: its session's process group on POSIX; on Windows, which has no
    process groups to signal, its process tree as psutil finds it (children first listed, then all killed: a
    child whose parent died is no longer found by its parent's id)."""
    if sys.platform == "win32":
        import psutil

        try:
            tree = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            tree = []
        for p in tree:
            with contextlib.suppress(psutil.Error):
                p.kill()
        with contextlib.suppress(OSError):
            proc.kill()
    else:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout):
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()


class PortableWorker:
    """One submission's worker process on the portable backend."""

    backend = "portable"

    def __init__(self, units: list[tuple[str, str, str]], config: dict[str, Any]):
        from grader.pool.errors import InfrastructureError

        self.workdir = tempfile.mkdtemp(prefix=WORKDIR_PREFIX)
        try:
            self.proc = _take()
        except OSError as exc:
            remove_tree(self.workdir)
            raise InfrastructureError(f"could not start a worker: {exc}") from None
        self.pid = self.proc.pid
        self.alive = True
        self._inbox: queue.Queue[bytes | BaseException] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        from grader.sandbox import channel

        setup = {"units": units, "config": {**config, "workdir": self.workdir, "pid": self.pid}}
        self._send(channel.encode({}, setup))

    def _read(self) -> None:
        """Whole messages from the worker's stdout into the inbox (a thread: pipes cannot be waited on with a
        time-out on every platform); EOFError or ChannelError at the end."""
        stream = self.proc.stdout
        try:
            if stream is None:
                raise EOFError
            while True:
                head = stream.read(framing.HEADER.size)
                if len(head) < framing.HEADER.size:
                    raise EOFError
                (n,) = framing.HEADER.unpack(head)
                if n > framing.MAX_MESSAGE_BYTES:
                    raise framing.ChannelError(f"a message of {n} bytes exceeds the cap")
                body = stream.read(n)
                if len(body) < n:
                    raise EOFError
                self._inbox.put(body)
        except (OSError, ValueError, EOFError, framing.ChannelError) as exc:
            self._inbox.put(exc if isinstance(exc, framing.ChannelError) else EOFError())

    def _send(self, payload: bytes) -> None:
        stdin = self.proc.stdin
        if stdin is None:
            raise OSError("no pipe")
        stdin.write(framing.HEADER.pack(len(payload)) + payload)
        stdin.flush()

    def _receive(self, timeout: float) -> tuple[dict[str, torch.Tensor], Any]:
        from grader.pool.errors import WorkerLost
        from grader.sandbox import channel

        try:
            item = self._inbox.get(timeout=max(timeout, 0.001))
        except queue.Empty:
            self.kill()
            raise WorkerLost("timeout", f"no answer within {timeout:g} s") from None
        if isinstance(item, framing.ChannelError):
            self.kill()
            raise WorkerLost("unreadable", str(item))
        if isinstance(item, BaseException):
            code = self.proc.poll()
            self.kill()
            raise WorkerLost("crashed", "exited" if code is None else f"exited with status {code}")
        try:
            return channel.decode(item)
        except channel.ChannelError as exc:
            self.kill()
            raise WorkerLost("unreadable", str(exc)) from None

    def send_all(self, requests: list[bytes]) -> None:
        """Queue every request at once from a thread, so the worker never waits for us between steps."""
        def pump() -> None:
            with contextlib.suppress(OSError, ValueError):
                for r in requests:
                    self._send(r)

        threading.Thread(target=pump, daemon=True).start()

    def receive(self, timeout: float) -> tuple[dict[str, torch.Tensor], Any]:
        return self._receive(timeout)

    def confined(self, timeout: float) -> dict[str, bool]:
        from grader.pool.errors import layers_of

        return layers_of(self._receive(timeout)[1])

    def hello(self, timeout: float) -> Any:
        return self._receive(timeout)[1]

    def ask(self, request: bytes, timeout: float) -> tuple[dict[str, torch.Tensor], Any]:
        from grader.pool.errors import WorkerLost

        try:
            self._send(request)
        except (OSError, ValueError):
            self.kill()
            raise WorkerLost("crashed", "its pipe closed") from None
        return self._receive(timeout)

    def kill(self) -> None:
        self.alive = False
        _kill(self.proc)
        remove_tree(self.workdir)

    def close(self) -> None:
        self.kill()
