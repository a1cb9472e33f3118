"""One client's command, run in the daemon as the client would run it: its environment, its working directory and
its stdin, stdout and stderr (received as fds), then everything put back for the next client. The command line it
runs (`app`) is handed in by the daemon's entry point (grader.daemon_main): the daemon never imports the CLI."""

from __future__ import annotations

import contextlib
import io
import os
import select
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

assert sys.platform != "win32", "POSIX only: on Windows every command grades in its own process"  # typed so

import click

from grader.daemon.client import BYPASS_ENV, SECRET_ENV, SERVED


def refusal(doc: dict[str, Any], fds: list[int]) -> str:
    """Why a `run` request is not ours to serve ('' when it is): anything but check/list/grade, a secret."""
    argv, env = doc.get("argv"), doc.get("env")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(env, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
            and isinstance(doc.get("prog"), str) and len(fds) == 4):
        return "malformed request"
    if SECRET_ENV in env:
        return "a secret in the environment"
    own = argv[:argv.index("--")] if "--" in argv else argv
    if any(a == "--secret" or a.startswith("--secret=") for a in own):
        return "a secret"
    i = 0
    while i < len(own) and own[i].startswith("-"):  # the group's options: --lang X, --lang=X, --no-daemon
        i += 2 if own[i] == "--lang" else 1
    if i >= len(own) or own[i] not in SERVED:
        return "not a command the daemon serves"
    return ""


def _wrap(fd: int, writing: bool, how: dict[str, Any] | None = None) -> io.TextIOWrapper:
    """A text stream on fd 0/1/2 like the one Python gives a process (never closing the fd)."""
    how = how if isinstance(how, dict) else {}
    raw = io.FileIO(fd, "w" if writing else "r", closefd=False)
    buffered = io.BufferedWriter(raw) if writing else io.BufferedReader(raw)
    return io.TextIOWrapper(buffered, encoding=str(how.get("encoding") or "utf-8"),
                            errors=str(how.get("errors") or "strict"), line_buffering=writing and os.isatty(fd))


class HangUp(threading.Thread):
    """While a command runs: the client sends nothing after its request, so a readable connection means it went
    away (Ctrl-C, killed). Then nobody waits for this command: the daemon stops, and its zygote with it."""

    def __init__(self, conn: socket.socket, on_hangup: Callable[[], None]):
        super().__init__(daemon=True)
        self.fd, self.on_hangup, self.done = conn.fileno(), on_hangup, threading.Event()

    def run(self) -> None:
        poll = select.poll()
        poll.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while not self.done.is_set():
            if poll.poll(100) and not self.done.is_set():
                self.on_hangup()


def run(app: click.Command, conn: socket.socket, doc: dict[str, Any], fds: list[int],
        on_hangup: Callable[[], None]) -> int:
    """`attn-kata ARGV` (the command line `app`) as the client would run it: its environment (ATTN_KATA_NO_DAEMON
    set, so it grades here), its working directory, its stdio; then everything put back."""
    saved_env, saved_std = dict(os.environ), (sys.stdin, sys.stdout, sys.stderr)
    saved_fds = [os.dup(fd) for fd in (0, 1, 2)]
    watcher = HangUp(conn, on_hangup)
    try:
        os.environ.clear()
        os.environ.update(doc["env"])
        os.environ[BYPASS_ENV] = "1"
        os.fchdir(fds[3])
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        sys.stdin, sys.stdout, sys.stderr = (_wrap(0, False), _wrap(1, True, doc.get("stdout")),
                                             _wrap(2, True, doc.get("stderr")))
        watcher.start()
        return invoke(app, doc["argv"], doc["prog"])
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        watcher.done.set()
        sys.stdin, sys.stdout, sys.stderr = saved_std
        for target, fd in enumerate(saved_fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir("/")
        os.environ.clear()
        os.environ.update(saved_env)


def invoke(app: click.Command, argv: list[str], prog: str) -> int:
    try:
        app.main(args=argv, prog_name=prog, standalone_mode=True)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)  # what Python itself does with sys.exit("message")
        return 1
    except BaseException:  # what Python itself would print before exiting 1
        traceback.print_exc()
        return 1
    return 0
