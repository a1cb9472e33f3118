"""The client side: hand `check`, `list` or `grade` (never with a secret) to the warm daemon, starting it if needed.

Kept light on purpose (os, socket, json; no torch, no rich): it is all a repeated check imports. Any trouble
(no safe folder, a daemon that cannot start, one that dies mid-command) returns None, and the CLI grades
in-process as if there were no daemon.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import time
from pathlib import Path

assert sys.platform != "win32", "POSIX only: on Windows every command grades in its own process"  # typed so

from grader import limits
from grader.daemon import paths, protocol
from grader.daemon.fingerprint import fingerprint

BYPASS_ENV = "ATTN_KATA_NO_DAEMON"
SECRET_ENV = "ATTN_KATA_SECRET"
SERVED = ("check", "list", "grade")  # never batch, never a secret: those always run in-process
# served by a daemon already running, never the reason to start one: each answers in ~0.1 s without torch
# (`list`, and `hint`, `solution`, `init`, which no daemon serves), where a start costs seconds
NEVER_STARTS = ("list",)
START_TIMEOUT = limits.DAEMON_START_TIMEOUT  # seconds for a new daemon to say it listens
BUSY_PATIENCE = limits.DAEMON_BUSY_PATIENCE  # seconds to wait for another starting daemon's socket
SERVER = "import sys; sys.path.insert(0, {root!r}); from grader.daemon_main import main; main()"


def bypassed(no_daemon: bool = False) -> bool:
    """--no-daemon, ATTN_KATA_NO_DAEMON=1, or a secret in the environment (a daemon never holds one)."""
    return no_daemon or os.environ.get(BYPASS_ENV, "") not in ("", "0") or SECRET_ENV in os.environ


def wanted(command: str | None, args: list[str], no_daemon: bool = False) -> bool:
    """Is this command line one the daemon may answer? `args` are the subcommand's own arguments."""
    if command not in SERVED or bypassed(no_daemon) or not protocol.supported():
        return False  # unsupported (Windows): the command grades in this process
    own = args[:args.index("--")] if "--" in args else args
    return not any(a in ("--secret", "-h", "--help") or a.startswith("--secret=") for a in own)


def argv_for(argv: list[str], lang: str) -> list[str]:
    """The command line the daemon runs: the group's options (in front: grader.cli.lang_first) replaced by the
    learner's language, said explicitly (the daemon's own locale may differ from this terminal's)."""
    i = 0
    while i < len(argv) and (argv[i] in ("--lang", "--no-daemon") or argv[i].startswith("--lang=")):
        i += 2 if argv[i] == "--lang" else 1
    return ["--lang", lang, *argv[i:]]


def start_in_background() -> None:
    """Start a daemon unless one answers; do not wait for it (`watch` grades in its own warm process)."""
    if not protocol.supported():
        return
    try:
        where = paths.for_this_kata()
        _connect(where).close()
    except (FileNotFoundError, ConnectionRefusedError):
        spawn(where, wait=False)
    except (paths.Unavailable, OSError):
        pass


def run(argv: list[str], prog: str, start: bool = True) -> int | None:
    """Run `attn-kata ARGV` in the daemon on our stdio and working directory; its exit code, or None when the
    daemon could not answer (then nothing was decided: grade in-process). `start`: start one if none runs."""
    stdio: list[int] = []
    try:
        for fd in (0, 1, 2):  # fails if one is closed, or the working directory is gone: in-process handles those
            stdio.append(os.dup(fd))
        cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        for fd in stdio:
            os.close(fd)
        return None
    try:
        for attempt in range(2):  # a daemon out of date stops and says so: start a fresh one, once
            answer = _ask({"op": "run", "argv": argv, "prog": prog, "env": dict(os.environ),
                           "stdout": _stream(sys.stdout), "stderr": _stream(sys.stderr)}, [*stdio, cwd],
                          start=start)
            if answer is None:
                return None
            if answer.get("stale") and attempt == 0:
                continue
            code = answer.get("exit")
            return code if isinstance(code, int) else None
        return None
    finally:
        for fd in (*stdio, cwd):
            os.close(fd)


def _stream(stream: object) -> dict[str, str]:
    return {"encoding": getattr(stream, "encoding", None) or "utf-8", "errors": getattr(stream, "errors", None)
            or "strict"}


def _ask(doc: dict, fds: list[int], start: bool = True) -> dict | None:
    try:
        with connect(start=start) as conn:
            protocol.send(conn, {**doc, "fingerprint": fingerprint()}, fds)
            answer, extra = protocol.receive(conn)  # as long as the command takes; EOF if the daemon died
    except (paths.Unavailable, protocol.Garbled, OSError):
        return None
    for fd in extra:
        os.close(fd)
    return answer


def request(doc: dict) -> dict | None:
    """A management request (status, stop) to a running daemon; None when none answers."""
    try:
        with connect(start=False) as conn:
            protocol.send(conn, {**doc, "fingerprint": fingerprint()})
            answer, extra = protocol.receive(conn)
    except (paths.Unavailable, protocol.Garbled, OSError):
        return None
    for fd in extra:
        os.close(fd)
    return answer


def connect(start: bool) -> socket.socket:
    """A connection to this user's daemon for this kata; with `start`, one is started if none answers (a
    socket left by a dead daemon refuses connections: the new daemon replaces it)."""
    where = paths.for_this_kata()
    try:
        return _connect(where)
    except (FileNotFoundError, ConnectionRefusedError):
        if not start:
            raise
    said = spawn(where)
    if said == "ready":
        return _connect(where)
    if said != "busy":
        raise paths.Unavailable("the daemon did not start")
    deadline = time.monotonic() + BUSY_PATIENCE  # another client's daemon is starting (or one is stopping)
    while True:
        try:
            return _connect(where)
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _connect(where: paths.Paths) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(where.socket))
        if protocol.peer_uid(conn)[1] != os.getuid():  # the folder is ours alone; this is belt and braces
            raise paths.Unavailable("the daemon's socket belongs to another user")
    except BaseException:
        conn.close()
        raise
    return conn


def spawn(where: paths.Paths, wait: bool = True) -> str:
    """Start a daemon, detached (its own session, reparented to init: it outlives this command). Returns what
    it said: 'ready' (it listens), 'busy' (another daemon holds the lock), '' (it failed to start)."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the first child: a new session, then a grandchild that becomes the daemon
        try:
            os.setsid()
            if os.fork() == 0:
                _exec_server(where, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(child, 0)
    try:
        if not wait:
            return ""
        said = b""
        deadline = time.monotonic() + START_TIMEOUT
        while not said.endswith(b"\n") and time.monotonic() < deadline:
            if not select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))[0]:
                break
            chunk = os.read(read_end, 64)
            if not chunk:
                break
            said += chunk
        return said.decode(errors="replace").strip()
    finally:
        os.close(read_end)


def _exec_server(where: paths.Paths, ready: int) -> None:
    """In the grandchild: stdio to /dev/null and the log, nothing else inherited but the ready pipe, then exec.
    The environment is ours, less the secret (which `wanted` already made sure is absent)."""
    null = os.open(os.devnull, os.O_RDWR)
    log = os.open(where.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(log, 2)
    os.set_inheritable(ready, True)
    os.closerange(3, ready)
    os.closerange(ready + 1, 1 << 16)
    os.chdir("/")
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    root = str(Path(__file__).resolve().parent.parent.parent)
    code = SERVER.format(root=root)
    sim = env.get("ATTN_KATA_SIMULATE")  # tests/platform/sim.py: the daemon takes the simulated platform's shape
    if sim:
        code = f"import runpy; runpy.run_path({sim!r}, run_name='attn_kata_simulation'); " + code
    os.execve(sys.executable, [sys.executable, "-c", code, str(ready)], env)
