"""The zygote: a process that imported torch and the reference once and never runs learner code.

It forks one worker per request (~ms, instead of ~1.3 s for a fresh interpreter). It is a child
subreaper, so daemons a submission leaves behind are re-parented here and reaped; it exits when
the grader that started it goes away.

Protocol on its Unix socket, one connection per grading process: the client sends
`spawn\n` with the worker's socket attached (SCM_RIGHTS); the zygote answers
`<pid>\n`. `grader\n` (a socket attached too) forks a trusted grading process for a batch instead
(grader/batch.py: it learns the secret only afterwards, over that socket). `status <pid>\n` answers
the exit status once the worker has been reaped.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import landlock  # its libc handle: loaded once, here, rather than again in every worker

PR_SET_CHILD_SUBREAPER = 36
PR_SET_NAME = 15
ORPHAN_SCAN_INTERVAL = 0.5  # seconds: a worker's pids cgroup already caps (and on removal kills) what it left
ROOT = Path(__file__).resolve().parent.parent


def _subreaper() -> bool:
    try:
        return landlock._libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def set_name(name: str) -> None:
    """The process's name in ps, top and perf (15 bytes): attn-zygote, attn-worker, attn-grade."""
    with contextlib.suppress(OSError, AttributeError):
        landlock._libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def _recv_line(conn: socket.socket) -> tuple[bytes, list[int]]:
    data = b""
    fds: list[int] = []
    while not data.endswith(b"\n"):
        msg, got, _, _ = socket.recv_fds(conn, 256, 4)  # a small buffer: each fresh page is a copy-on-write fault
        if not msg:
            raise EOFError
        data += msg
        fds += got
    return data, fds


def serve(listener: socket.socket, alive_fd: int) -> None:
    from . import (
        _preload,  # noqa: F401 - torch, worker code and the reference, once
        sandbox,
        worker,
    )

    _subreaper()
    set_name("attn-zygote")
    statuses: dict[int, int] = {}
    workers: set[int] = set()
    graders: set[int] = set()  # trusted grading processes forked for a batch (grader/batch.py)
    stale_groups: set[int] = set()  # pids cgroups of finished workers, to empty and remove
    last_scan = 0.0
    me, path = os.getpid(), listener.getsockname()
    sandbox.remove_stale_cgroups()
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "listen")
    sel.register(alive_fd, selectors.EVENT_READ, "alive")
    while True:
        events = sel.select(timeout=0.2)
        for key, _ in events:
            if key.data == "alive":  # the grader exited: so do we, and so does everything we forked
                for pid in workers | stale_groups:
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)
                    sandbox.remove_cgroup(pid)
                _reap_all(graders)
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)  # also when the grader was killed
                os._exit(0)
            if key.data == "listen":
                conn, _ = listener.accept()
                sel.register(conn, selectors.EVENT_READ, "client")
                continue
            conn = key.fileobj
            try:
                line, fds = _recv_line(conn)  # type: ignore[arg-type]
            except (EOFError, OSError):
                sel.unregister(conn)
                conn.close()  # type: ignore[union-attr]
                continue
            verb, _, arg = line.decode().strip().partition(" ")
            if verb in ("spawn", "grader") and len(fds) == 1:
                pid = os.fork()
                if pid == 0:  # the worker, or a trusted grading process
                    try:
                        for other in list(sel.get_map().values()):  # no zygote socket reaches the learner
                            if other.data == "client":
                                other.fileobj.close()  # type: ignore[union-attr]
                        sel.close()
                        listener.close()
                        os.close(alive_fd)
                        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                        if verb == "spawn":
                            set_name("attn-worker")
                            worker.entry(fds[0])
                        else:  # forked before it knows the secret; it asks us for its workers like anyone else
                            set_name("attn-grade")
                            from . import batch

                            attach(path, me)
                            batch.grading_process(fds[0])
                    finally:
                        os._exit(0)
                os.close(fds[0])
                (workers if verb == "spawn" else graders).add(pid)
                conn.sendall(f"{pid}\n".encode())  # type: ignore[union-attr]
            elif verb == "status":
                pid = int(arg)
                conn.sendall(f"{statuses.get(pid, 'none')}\n".encode())  # type: ignore[union-attr]
            else:
                for fd in fds:
                    os.close(fd)
                conn.sendall(b"error\n")  # type: ignore[union-attr]
        reaped = False
        while True:  # reap workers and whatever they left behind
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            statuses[pid] = status
            reaped = True
            if pid in workers:
                workers.discard(pid)
                stale_groups.add(pid)
            graders.discard(pid)
            if len(statuses) > 10000:
                statuses.pop(next(iter(statuses)))
        now = time.monotonic()
        if (reaped or not events) and now - last_scan > ORPHAN_SCAN_INTERVAL:
            # orphans appear when a worker ends (and its pids cgroup, where there is one, already caps
            # them); one /proc scan per interval serves a whole burst of workers ending
            _kill_orphans(workers | graders)
            last_scan = now
        for pid in list(stale_groups):
            if sandbox.remove_cgroup(pid):
                stale_groups.discard(pid)


def _reap_all(graders: set[int], patience: float = 2.0) -> None:
    """Before the zygote exits: stop the grading processes still running (the batch ends them itself when
    it finishes; these are left only when it was killed) and reap every child, so that all the CPU they
    used is accounted to whoever started us."""
    for pid in graders:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            time.sleep(0.005)


def _kill_orphans(workers: set[int]) -> None:
    """Whatever a worker left behind is re-parented here (subreaper): kill it."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in workers:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = f.read().rsplit(b")", 1)[1].split()[1].decode()
        except (OSError, IndexError):
            continue
        if ppid == me:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    listen_fd, alive_fd = int(args[0]), int(args[1])
    listener = socket.socket(fileno=listen_fd)
    serve(listener, alive_fd)


def running(pid: int) -> bool:
    """Does process `pid` exist (a zombie not yet reaped counts)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exit_status(raw: Any) -> str:
    """Describe a waitpid status for a learner."""
    try:
        status = int(raw)
    except (TypeError, ValueError):
        return "exited"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    return f"exited with status {os.WEXITSTATUS(status)}"


class Zygote:
    """Starts the zygote process; each grading process (forked ones too) gets its own connection.
    With `path` and `pid`, only connects to a zygote already running (from a grading process it forked)."""

    def __init__(self, path: str | None = None, pid: int = -1) -> None:
        self._conn: socket.socket | None = None
        self._owner = -1
        self.creator = os.getpid()
        self.proc: subprocess.Popen | None = None
        if path is not None:
            self.path, self.pid, self.alive_w = path, pid, -1
            return
        self.dir = tempfile.mkdtemp(prefix="attn-kata-")
        atexit.register(self.remove_dir)
        self.path = os.path.join(self.dir, "zygote.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(64)
        alive_r, self.alive_w = os.pipe()
        code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from grader.zygote import main; main()"
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", code, str(listener.fileno()), str(alive_r)],
            pass_fds=(listener.fileno(), alive_r), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=None if os.environ.get("ATTN_KATA_DEBUG") else subprocess.DEVNULL, start_new_session=True,
            env=_zygote_env())
        listener.close()
        os.close(alive_r)
        self.pid = self.proc.pid

    def remove_dir(self) -> None:
        """The socket's folder, once we are done with it (only by the process that made it)."""
        if self.proc is not None and os.getpid() == self.creator:
            shutil.rmtree(self.dir, ignore_errors=True)

    def alive(self) -> bool:
        """Popen.poll() only works in the process that started it: a forked grading child that polls
        gets ECHILD, which Popen reads as "exited" (and would start a zygote of its own)."""
        if self.proc is not None and os.getpid() == self.creator:
            return self.proc.poll() is None
        return running(self.pid)

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
            if len(data) > 64:
                break
        try:
            return data.decode().strip()
        except UnicodeDecodeError:
            self._conn = None
            raise OSError("garbled answer from the zygote") from None

    def spawn(self, fd: int) -> int:
        return int(self._ask("spawn", [fd]))

    def grader(self, fd: int) -> int:
        """Fork a trusted grading process that talks to us over `fd` (grader/batch.py)."""
        return int(self._ask("grader", [fd]))

    def status(self, pid: int) -> str:
        return self._ask(f"status {pid}")


def _zygote_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
            "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.setdefault("OMP_NUM_THREADS", "1")
    # malloc's heap in transparent huge pages: the ~80 MB that importing torch leaves there is then a few
    # dozen page-table entries instead of ~20k, which roughly halves what each fork and each worker's exit
    # cost (benchmarks/bench_grade.py). glibc < 2.35 ignores the tunable.
    env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
    return env


_ZYGOTE: Zygote | None = None


def zygote(fresh: bool = False) -> Zygote:
    """This process tree's zygote; `fresh` replaces one that stopped answering."""
    global _ZYGOTE
    if fresh and _ZYGOTE is not None:
        if _ZYGOTE.proc is not None:
            with contextlib.suppress(OSError):
                _ZYGOTE.proc.kill()
            _ZYGOTE.remove_dir()
        _ZYGOTE = None
    if _ZYGOTE is None or not _ZYGOTE.alive():
        _ZYGOTE = Zygote()
    return _ZYGOTE


def attach(path: str, pid: int) -> None:
    """In a grading process the zygote forked: use that zygote (over a connection of our own)."""
    global _ZYGOTE
    _ZYGOTE = Zygote(path, pid)


def warm_up() -> None:
    """Start the zygote now: it imports torch while this process goes on."""
    zygote()


if __name__ == "__main__":
    main()
