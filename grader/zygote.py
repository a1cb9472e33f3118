"""The zygote: a process that imported torch and the reference once and never runs learner code.

It forks one worker per request (~ms, instead of ~1.3 s for a fresh interpreter). It is a child
subreaper, so daemons a submission leaves behind are re-parented here and reaped; it exits when
the grader that started it goes away.

Protocol on its Unix socket, one connection per grading process: the client sends
`spawn <json config>\n` with the worker's socket attached (SCM_RIGHTS); the zygote answers
`<pid>\n`. `status <pid>\n` answers the exit status once the worker has been reaped.
"""

from __future__ import annotations

import ctypes
import json
import os
import selectors
import signal
import socket
import sys
from typing import Any

PR_SET_CHILD_SUBREAPER = 36


def _subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _recv_line(conn: socket.socket) -> tuple[bytes, list[int]]:
    data = b""
    fds: list[int] = []
    while not data.endswith(b"\n"):
        msg, got, _, _ = socket.recv_fds(conn, 65536, 4)
        if not msg:
            raise EOFError
        data += msg
        fds += got
    return data, fds


def serve(listener: socket.socket, alive_fd: int) -> None:
    from . import _preload  # noqa: F401 - torch, worker code and the reference, once
    from . import worker

    _subreaper()
    statuses: dict[int, int] = {}
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "listen")
    sel.register(alive_fd, selectors.EVENT_READ, "alive")
    while True:
        for key, _ in sel.select(timeout=0.2):
            if key.data == "alive":  # the grader exited: so do we
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
            if verb == "spawn" and len(fds) == 1:
                config = json.loads(arg)
                pid = os.fork()
                if pid == 0:  # the worker
                    try:
                        sel.close()
                        listener.close()
                        os.close(alive_fd)
                        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                        worker.entry(fds[0])
                    finally:
                        os._exit(0)
                os.close(fds[0])
                conn.sendall(f"{pid}\n".encode())  # type: ignore[union-attr]
            elif verb == "status":
                pid = int(arg)
                conn.sendall(f"{statuses.get(pid, 'none')}\n".encode())  # type: ignore[union-attr]
            else:
                for fd in fds:
                    os.close(fd)
                conn.sendall(b"error\n")  # type: ignore[union-attr]
        while True:  # reap workers and whatever they left behind
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            statuses[pid] = status
            if len(statuses) > 10000:
                statuses.pop(next(iter(statuses)))


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    listen_fd, alive_fd = int(args[0]), int(args[1])
    listener = socket.socket(fileno=listen_fd)
    serve(listener, alive_fd)


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


if __name__ == "__main__":
    main()
