"""The daemon: a warm, trusted `attn-kata` of the learner's own user that runs `check`, `list` and `grade` for them.

It runs the very CLI command the client sent (grader.cli.main, in-process mode) on the client's stdin, stdout,
stderr and working directory, received as file descriptors, under the client's environment: the output and the
exit code are what grading in the client would give, by construction. It holds no secret (a request that has
one is refused, and the client never sends one), never serves `batch`, and its workers come from its zygote,
confined as always. It stops after ATTN_KATA_DAEMON_IDLE seconds without a request (600), when its
fingerprint no longer matches the files on disk, when the client that it serves hangs up, or on `stop`.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any

from grader.daemon import paths, protocol
from grader.daemon.client import BYPASS_ENV, SECRET_ENV, SERVED
from grader.daemon.fingerprint import fingerprint

IDLE_ENV = "ATTN_KATA_DAEMON_IDLE"
IDLE_DEFAULT = 600.0  # seconds
TICK = 2.0  # seconds between checks of the files on disk while idle
LOCK_PATIENCE = 3.0  # seconds to wait for a daemon that is stopping to let go of the lock
GROUP_OPTIONS = {"--no-daemon"}


def idle_limit() -> float:
    try:
        return max(0.1, float(os.environ.get(IDLE_ENV, IDLE_DEFAULT)))
    except ValueError:
        return IDLE_DEFAULT


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

    def __init__(self, conn: socket.socket, daemon: Daemon):
        super().__init__(daemon=True)
        self.fd, self.owner, self.done = conn.fileno(), daemon, threading.Event()

    def run(self) -> None:
        poll = select.poll()
        poll.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while not self.done.is_set():
            if poll.poll(100) and not self.done.is_set():
                self.owner.abandon()


class Daemon:
    def __init__(self, ready: int):
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
        from grader.pool import zygote

        self.release()
        self.log(f"stopping: {why}")
        zygote.stop()  # it kills and reaps whatever it forked
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
        """Import and compute once what every command needs: the CLI, torch and the engine with the reference's
        results, the reporters; the zygote starts importing torch meanwhile."""
        from grader.pool import zygote

        zygote.warm_up()
        zygote.set_name("attn-daemon")
        import grader.cli  # noqa: F401
        from grader.grading import engine
        from grader.learner import api  # noqa: F401
        from grader.render import heatmap, reporters  # noqa: F401

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
            if select.select([self.listener], [], [], min(TICK, left))[0]:
                conn, _addr = self.listener.accept()  # type: ignore[union-attr]
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
            why = refusal(doc, fds)
            if why:
                self.log(f"refused: {why}")
                self.reply(conn, {"refused": why})
                return
            self.served += 1
            self.reply(conn, {"exit": self.run_command(conn, doc, fds)})
        else:
            self.reply(conn, {"refused": "unknown request"})

    def reply(self, conn: socket.socket, doc: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            protocol.send(conn, doc)

    def run_command(self, conn: socket.socket, doc: dict[str, Any], fds: list[int]) -> int:
        """`attn-kata ARGV` as the client would run it: its environment (ATTN_KATA_NO_DAEMON set, so it grades here),
        its working directory, its stdio; then everything put back."""
        saved_env, saved_std = dict(os.environ), (sys.stdin, sys.stdout, sys.stderr)
        saved_fds = [os.dup(fd) for fd in (0, 1, 2)]
        watcher = HangUp(conn, self)
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
            return self.invoke(doc["argv"], doc["prog"])
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

    @staticmethod
    def invoke(argv: list[str], prog: str) -> int:
        from grader.cli import main as cli

        try:
            cli.main(args=argv, prog_name=prog, standalone_mode=True)
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                return exc.code or 0
            print(exc.code, file=sys.stderr)  # what Python itself does with sys.exit("message")
            return 1
        except BaseException:  # what Python itself would print before exiting 1
            traceback.print_exc()
            return 1
        return 0


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    ready = int(args[0]) if args else -1
    try:
        daemon = Daemon(ready)
    except (paths.Unavailable, OSError) as exc:
        print(f"attn-kata daemon: {exc}", file=sys.stderr)
        return  # the client reads end-of-file on the ready pipe and grades in-process
    daemon.run()
