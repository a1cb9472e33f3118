"""The daemon: a warm, trusted `attn-kata` of the learner's own user that runs `check`, `list` and `grade` for them.

It runs the very CLI command the client sent (the command line its entry point hands it, grader.daemon_main: the CLI's
own group, in-process mode) on the client's stdin, stdout,
stderr and working directory, received as file descriptors, under the client's environment: the output and the
exit code are what grading in the client would give, by construction. It holds no secret (a request that has
one is refused, and the client never sends one), never serves `batch`, and its workers come from its zygote,
confined as always. It stops after ATTN_KATA_DAEMON_IDLE seconds without a request (600), when its
fingerprint no longer matches the files on disk, when the client that it serves hangs up, or on `stop`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import socket
import sys
import time
from typing import Any

assert sys.platform != "win32", "POSIX only: on Windows every command grades in its own process"  # typed so

import click

from grader import limits
from grader.daemon import command, paths, protocol
from grader.daemon.fingerprint import fingerprint
from grader.settings import backend

IDLE_ENV = "ATTN_KATA_DAEMON_IDLE"
IDLE_DEFAULT = limits.DAEMON_IDLE  # seconds
TICK = limits.DAEMON_TICK  # seconds between checks of the files on disk while idle
LOCK_PATIENCE = limits.DAEMON_LOCK_PATIENCE  # seconds to wait for a daemon that is stopping to let go of the lock


def idle_limit() -> float:
    try:
        return max(0.1, float(os.environ.get(IDLE_ENV, IDLE_DEFAULT)))
    except ValueError:
        return IDLE_DEFAULT


class Daemon:
    def __init__(self, app: click.Command, ready: int):
        self.app = app  # the command line it serves (grader.cli.main, handed in by grader.daemon_main)
        self.ready = ready
        self.where = paths.for_this_kata()
        self.fp = fingerprint()
        self.idle = idle_limit()
        self.started = time.time()
        self.served = 0
        self.log_fd = os.dup(2)  # fd 2 becomes each client's stderr in turn; our own messages go to the log
        self.lock_fd = self._lock()
        self.listener: socket.socket | None = None
        self.inode = 0

    def log(self, message: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self.log_fd, f"{time.strftime('%H:%M:%S')} [{os.getpid()}] {message}\n".encode())

    def tell(self, word: str) -> None:
        """Answer the client that started us (once)."""
        if self.ready >= 0:
            with contextlib.suppress(OSError):
                os.write(self.ready, word.encode() + b"\n")
            os.close(self.ready)
            self.ready = -1

    def _lock(self) -> int | None:
        """The lock that makes us the one daemon of this kata; None if another daemon keeps it."""
        fd = os.open(self.where.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + LOCK_PATIENCE
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    return None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd

    def listen(self) -> None:
        """Bind the socket, 0600 from its first moment. Whatever was at that path is stale: we hold the lock, so no
        daemon answers there."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.where.socket)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(self.where.socket))
        finally:
            os.umask(old)
        os.chmod(self.where.socket, 0o600)
        sock.listen(16)
        self.listener, self.inode = sock, os.stat(self.where.socket).st_ino

    def release(self) -> None:
        """Stop being the daemon: the socket goes (only if it is still ours), then the lock, so that a new daemon
        can start at once."""
        if self.listener is not None:
            with contextlib.suppress(OSError):
                if os.stat(self.where.socket).st_ino == self.inode:
                    os.unlink(self.where.socket)
            self.listener.close()
            self.listener = None
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None

    def exit(self, why: str) -> None:
        self.release()
        self.log(f"stopping: {why}")
        if sys.platform == "linux" and backend() == "linux":
            from grader.pool import zygote

            zygote.stop()  # it kills and reaps whatever it forked
        else:
            from grader.pool import portable

            portable.stop_spare()
        os._exit(0)

    def abandon(self) -> None:
        """The client hung up mid-command: silence what is left of its output, then stop at once."""
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        self.release()
        self.log("the client hung up mid-command")
        os._exit(0)  # our zygote sees its connection close and kills the workers

    def warm_up(self) -> None:
        """Start and compute once what every command needs. On Linux the daemon never imports torch: its zygote
        does (once), and a grading process forked from it (grader.grading.forked.keep_resident) imports the reference
        and keeps its results for every check. Elsewhere (the portable backend) the engine runs here, warm, and a
        spare worker waits for the next check."""
        from grader.pool import warm

        warm.warm_up()
        from grader.learner import api  # noqa: F401
        from grader.render import heatmap, reporters  # noqa: F401

        if sys.platform == "linux" and backend() == "linux":
            from grader.grading import forked
            from grader.pool import zygote

            zygote.set_name("attn-daemon")
            forked.keep_resident()
        else:
            os.environ["ATTN_KATA_KEEP_WARM"] = "1"  # a spare worker always ready for the next check
            from grader.grading import engine

            engine.prepared_requests("")  # no secret, ever

    def run(self) -> None:
        if self.lock_fd is None:
            self.tell("busy")
            return
        self.listen()
        self.tell("ready")
        signal.signal(signal.SIGTERM, lambda *_: self.exit("SIGTERM"))
        self.log(f"listening on {self.where.socket}")
        self.warm_up()
        self.log("warm")
        deadline = time.monotonic() + self.idle
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.exit(f"idle for {self.idle:g} s")
            listener = self.listener
            if listener is None:  # closed: exit() has run
                return
            if select.select([listener], [], [], min(TICK, left))[0]:
                conn, _addr = listener.accept()
                with conn:
                    self.handle(conn)
                deadline = time.monotonic() + self.idle
            elif fingerprint() != self.fp:
                self.exit("the grader or the kata changed")

    def handle(self, conn: socket.socket) -> None:
        pid, uid = protocol.peer_uid(conn)
        if uid != os.getuid():  # the folder is 0700; should another user reach the socket anyway, no answer
            self.log(f"refused a connection of uid {uid} (pid {pid})")
            return
        conn.settimeout(10)
        try:
            doc, fds = protocol.receive(conn)
        except (protocol.Garbled, OSError) as exc:
            self.log(f"bad request from pid {pid}: {exc}")
            return
        if doc is None:
            return
        conn.settimeout(None)
        try:
            self.answer(conn, doc, fds)
        finally:
            for fd in fds:
                os.close(fd)

    def answer(self, conn: socket.socket, doc: dict[str, Any], fds: list[int]) -> None:
        op = doc.get("op")
        if fingerprint() != self.fp or (op == "run" and doc.get("fingerprint") != self.fp):
            self.release()  # before answering: the client starts the next daemon as soon as it reads this
            self.reply(conn, {"stale": True})
            self.exit("out of date")
        if op == "status":
            self.reply(conn, {"pid": os.getpid(), "started": self.started, "served": self.served,
                              "idle_limit": self.idle, "socket": str(self.where.socket)})
        elif op == "stop":
            self.release()
            self.reply(conn, {"stopped": os.getpid()})
            self.exit("asked to stop")
        elif op == "run":
            why = command.refusal(doc, fds)
            if why:
                self.log(f"refused: {why}")
                self.reply(conn, {"refused": why})
                return
            self.served += 1
            self.reply(conn, {"exit": command.run(self.app, conn, doc, fds, on_hangup=self.abandon)})
        else:
            self.reply(conn, {"refused": "unknown request"})

    def reply(self, conn: socket.socket, doc: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            protocol.send(conn, doc)


def main(app: click.Command, argv: list[str] | None = None) -> None:
    """Be the daemon serving `app`; argv[0], when given, is the pipe to say "ready" or "busy" on."""
    args = argv if argv is not None else sys.argv[1:]
    ready = int(args[0]) if args else -1
    try:
        daemon = Daemon(app, ready)
    except (paths.Unavailable, OSError) as exc:
        print(f"attn-kata daemon: {exc}", file=sys.stderr)
        return  # the client reads end-of-file on the ready pipe and grades in-process
    daemon.run()
