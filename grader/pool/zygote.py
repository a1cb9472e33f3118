"""The zygote: a process that imported torch (never the reference, never the secret) and runs no learner code.

It forks one worker per request (~ms, instead of ~1.3 s for a fresh interpreter). It is a child
subreaper, so anything a grading process leaves behind is re-parented here and reaped; it exits when
the grader that started it goes away (its control socket reaches end-of-file).

Control: there is no socket with a name. The grader that starts the zygote hands it one end of a
socketpair (its *primary* connection); a trusted grading process the zygote forks for a batch gets a
connection of its own, made by the zygote at the fork. A worker inherits none of them (every fd but
its own channel is closed at the fork), so no process that runs learner code can send the zygote a
command. Lines, one per request:
- `spawn` with the worker's socket attached (SCM_RIGHTS) -> `<pid>`: fork a worker, in a PID namespace
  of its own where the kernel offers one;
- `grader MODULE:FUNCTION` (primary connection only) with a socket attached -> `<pid>`: fork a trusted grading
  process (a batch's, grader.instructor.batch, or one submission's, grader.grading.forked), which learns the
  secret only afterwards, over that socket;
- `become MODULE:FUNCTION` (primary connection only, to a zygote that has forked nothing yet) with a socket
  attached -> its own pid: fork one worker, then *become* the trusted grading process of one submission (`grade`,
  a Gradescope run: grader.grading.forked) and run `MODULE:FUNCTION` on that socket. It learns the secret and
  imports the reference only after the worker's fork, as a forked grading process would; it never forks again
  (a second worker, after a step killed the first, comes from a fresh zygote: `_Judged`). One process with torch
  fewer than a grading process of its own: ~200 MB less summed RSS, one fork and its copy-on-write faults less;
- `status <pid>` -> the exit status once that child has been reaped, else `none`.
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "the Linux backend's own module"  # the type checker skips it elsewhere

import contextlib
import ctypes
import importlib
import os
import re
import selectors
import signal
import socket
import subprocess
import threading
import time
from typing import Any

from grader import limits
from grader.sandbox import landlock  # its libc handle: loaded once, here, rather than again in every worker
from grader.settings import IMPORT_ROOT

PR_SET_CHILD_SUBREAPER = 36
PR_SET_NAME = 15
CLONE_NEWPID = 0x20000000
ORPHAN_SCAN_INTERVAL = limits.ORPHAN_SCAN_INTERVAL  # seconds
# the huge-page collapse (preload._Collapse: 0.05-1.4 s of compaction, ~7 ms saved per fork) starts with the
# second worker: a zygote that serves one submission (a cold `grade`, a Gradescope run) forks one, and would pay
# for the collapse (CPU beside its grading process and worker) without ever being paid back. It waits, too, for a
# pause of COLLAPSE_IDLE seconds without a request: a batch asks every few tens of ms and would pay 1.6 s of
# compaction beside its workers to save ~2.3 ms a fork (both measured alone, in one process), a loss below ~700
# submissions; a daemon waits for the learner's next save and collapses meanwhile
COLLAPSE_AFTER = 2
COLLAPSE_IDLE = 1.0
ENTRY = re.compile(r"grader(\.\w+)+:\w+")  # a grading process's entry point, module:function
MAX_LINE = limits.ZYGOTE_REQUEST_CHARS
ROOT = IMPORT_ROOT  # where `import grader` comes from (a checkout or site-packages), never grader/kata


def _subreaper() -> bool:
    try:
        return landlock.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def set_name(name: str) -> None:
    """The process's name in ps, top and perf (15 bytes): attn-zygote, attn-worker, attn-grade."""
    with contextlib.suppress(OSError, AttributeError):
        landlock.libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def _own_pid_namespace() -> int:
    """An fd on our own PID namespace, to return to after each worker's fork; -1 where there is none."""
    try:
        return os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1


def _close_all_but(keep: set[int]) -> None:
    """In a freshly forked child: close every fd it inherited except `keep` (and stdio)."""
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 20)


class _Conn:
    """One control connection: what it has sent so far (a trusted client never sends more than a line)."""

    def __init__(self, sock: socket.socket, primary: bool):
        self.sock, self.primary = sock, primary
        self.buf = b""
        self.fds: list[int] = []

    def read(self) -> list[tuple[str, list[int]]] | None:
        """The complete lines received so far, each with the fds that came with it; None at end-of-file."""
        try:
            msg, fds, _, _ = socket.recv_fds(self.sock, MAX_LINE, 4, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return []
        except OSError:
            return None
        if not msg:
            for fd in fds:
                os.close(fd)
            return None
        self.buf += msg
        self.fds += fds
        lines = []
        while b"\n" in self.buf:
            line, _, self.buf = self.buf.partition(b"\n")
            lines.append((line.decode(errors="replace").strip(), self.fds))
            self.fds = []
        if len(self.buf) > MAX_LINE:  # not a client of ours
            return None
        return lines


def serve(primary: socket.socket) -> None:
    from grader.pool import preload  # noqa: F401 - torch and the worker code, warmed with plain torch operations

    _subreaper()
    set_name("attn-zygote")
    server = _Server(primary)
    entry, fd = server.run()  # returns only when asked to `become` a grading process
    server.become(entry, fd)


class _Server:
    """The zygote's loop, in named parts: read requests, fork, reap, tidy up after workers."""

    def __init__(self, primary: socket.socket):
        from grader.sandbox import confine
        from grader.worker import serve as worker

        self.sandbox, self.worker = confine, worker
        # fault injection for the tests only (tests/test_hostile.py proves its leftover detector with it)
        self.faults = set(os.environ.get("ATTN_KATA_TEST_FAULTS", "").split(","))
        self.pidns = -1 if "no_pidns" in self.faults else _own_pid_namespace()
        self.statuses: dict[int, int] = {}
        self.workers: set[int] = set()
        self.graders: set[int] = set()  # trusted grading processes forked for a batch
        self.spawned = 0  # workers forked so far
        self.stale_groups: set[int] = set()  # cgroups of finished workers, to empty and remove
        self.last_scan = 0.0
        self.sel = selectors.DefaultSelector()
        self.conns: dict[int, _Conn] = {}
        self.becoming: tuple[str, int] | None = None  # (entry, socket) of a `become` request
        confine.remove_stale_cgroups()
        self.add(primary, True)

    def add(self, sock: socket.socket, is_primary: bool) -> None:
        self.conns[sock.fileno()] = _Conn(sock, is_primary)
        self.sel.register(sock, selectors.EVENT_READ)

    def drop(self, c: _Conn) -> None:
        self.sel.unregister(c.sock)
        del self.conns[c.sock.fileno()]
        c.sock.close()

    def run(self) -> tuple[str, int]:
        """Serve until asked to `become` a grading process (else until the grader goes away: shut_down exits)."""
        from grader.pool.preload import collapse

        more = True  # huge pages still to make (preload._Collapse): done only while no request waits
        last = time.monotonic()  # of the last request
        while True:
            collapsing = more and self.spawned >= COLLAPSE_AFTER and time.monotonic() - last >= COLLAPSE_IDLE
            events = self.sel.select(timeout=0 if collapsing else 0.2)
            if events:
                last = time.monotonic()
            for key, _ in events:
                self.handle(self.conns[key.fd])
            if self.becoming is not None:
                return self.becoming
            reaped = self.reap()
            self.tidy(reaped, idle=not events)
            if collapsing and not events:
                more = collapse.step()

    def handle(self, c: _Conn) -> None:
        lines = c.read()
        if lines is None:
            if c.primary:  # the grader exited: so do we, and so does everything we forked
                self.reap()  # a worker it killed on its way out: its group first (reap() kills it before reaping)
                self.shut_down()
            self.drop(c)
            return
        for line, fds in lines:
            with contextlib.suppress(OSError):
                c.sock.sendall(self.answer(c, line, fds).encode())

    def answer(self, c: _Conn, line: str, fds: list[int]) -> str:
        verb, _, arg = line.partition(" ")
        grading = verb == "grader" and c.primary and ENTRY.fullmatch(arg) is not None
        if (verb == "spawn" or grading) and len(fds) == 1:
            pid, control = self.fork(verb, fds[0], arg)
            os.close(fds[0])
            (self.workers if verb == "spawn" else self.graders).add(pid)
            self.spawned += verb == "spawn"
            if control is not None:
                self.add(control, False)
            return f"{pid}\n"
        if (verb == "become" and c.primary and ENTRY.fullmatch(arg) is not None and len(fds) == 1
                and self.pristine() and self.becoming is None):
            self.becoming = (arg, fds[0])
            return f"{os.getpid()}\n"
        for fd in fds:
            os.close(fd)
        if verb == "status" and arg.isdigit() and not fds:
            return f"{self.statuses.get(int(arg), 'none')}\n"
        return "error\n"

    def pristine(self) -> bool:
        """Nothing forked yet and no connection but the primary: this process may still become a grading process."""
        return not self.spawned and not self.graders and not self.workers and len(self.conns) == 1

    def become(self, entry: str, fd: int) -> None:
        """Fork this submission's worker, then turn into its trusted grading process: run `entry` on `fd`, tidy up,
        exit. The worker is forked first, while this process still holds nothing but torch and the worker code; the
        grading process learns its settings and the secret over `fd` afterwards (grader.grading.forked.enter)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid, _ = self.fork("spawn", theirs.fileno())
        theirs.close()
        self.workers.add(pid)
        self.spawned += 1
        for conn in list(self.conns.values()):
            self.sel.unregister(conn.sock)
        self.sel.close()
        judged = _Judged(self, ours, pid)
        global _ZYGOTE
        _ZYGOTE = judged  # grader.pool.session's workers: the one forked above, then fresh zygotes' (`_Judged`)
        set_name("attn-grade")
        try:
            module, _, function = entry.partition(":")
            getattr(importlib.import_module(module), function)(fd)
        finally:
            judged.shut_down()

    def fork(self, kind: str, channel_fd: int, entry: str = "") -> tuple[int, socket.socket | None]:
        control = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) if kind == "grader" else None
        new_ns = kind == "spawn" and self.pidns >= 0 and landlock.libc.unshare(CLONE_NEWPID) == 0
        pid = os.fork()
        if pid == 0:  # the worker (PID 1 of its own namespace), or a trusted grading process
            try:
                keep = {channel_fd} | ({control[1].fileno()} if control else set())
                _close_all_but(keep)  # no control connection, no pidns fd, nothing else reaches the child
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                if kind == "spawn":
                    set_name("attn-worker")
                    self.worker.entry(channel_fd)
                else:  # forked before it knows the secret; it asks us for its workers over its own connection
                    set_name("attn-grade")
                    attach(control[1])  # type: ignore[index]
                    # the entry point the primary connection named (grader.instructor.batch:grading_process);
                    # the pool itself knows nothing of batches
                    module, _, function = entry.partition(":")
                    getattr(importlib.import_module(module), function)(channel_fd)
            finally:
                os._exit(0)
        if new_ns and landlock.libc.setns(self.pidns, CLONE_NEWPID) != 0:
            # every later child would land in that worker's namespace: start over instead
            os.kill(pid, signal.SIGKILL)  # our child, not reaped: still ours
            self.shut_down()
        if control is not None:
            control[1].close()
        return pid, control[0] if control else None

    def reap(self) -> bool:
        """Reap finished children (workers, grading processes, whatever they left behind); did any end?"""
        reaped = False
        while True:
            try:  # look before reaping: a worker's pid stays its own (and its group's) until it is reaped
                ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            if ended is None:
                break
            if ended.si_pid in self.workers and "no_reaping" not in self.faults:  # (the leftover detector's test)
                _kill_group(ended.si_pid)
            pid, status = os.waitpid(ended.si_pid, 0)
            self.statuses[pid] = status
            reaped = True
            if pid in self.workers:
                self.workers.discard(pid)
                self.stale_groups.add(pid)
            self.graders.discard(pid)
            if len(self.statuses) > 10000:
                self.statuses.pop(next(iter(self.statuses)))
        return reaped

    def tidy(self, reaped: bool, idle: bool) -> None:
        """Kill what finished workers left behind and remove their cgroups."""
        if "no_reaping" in self.faults:
            self.stale_groups.clear()
            return
        now = time.monotonic()
        if (reaped or idle) and now - self.last_scan > ORPHAN_SCAN_INTERVAL:
            # a worker is PID 1 of its own namespace, so what it leaves dies with it; this catches what a
            # grading process (or a worker where there are no PID namespaces) left re-parented here
            _kill_orphans(self.workers | self.graders)
            self.last_scan = now
        for pid in list(self.stale_groups):
            if self.sandbox.remove_cgroup(pid):
                self.stale_groups.discard(pid)

    def shut_down(self) -> None:
        for pid in self.workers:  # not reaped yet, so these pids (and their groups) are still theirs
            _kill_group(pid)  # everything the worker started: where there is no PID namespace, nothing else would
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in self.workers | self.stale_groups:  # by cgroup membership, never by a pid that may be reused
            self.sandbox.remove_cgroup(pid)
        _reap_all(self.graders)
        os._exit(0)


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
        if not pid:  # children remain: whatever a grading process left is re-parented here, before init adopts it
            _kill_orphans(set())
            time.sleep(0.005)


def _kill_group(pid: int) -> None:
    """Everything a worker started, at once: it made itself a session leader (its process group is its pid) and
    its seccomp filter refuses setsid and setpgid, so no descendant can leave the group. A group's kill is atomic
    against fork. Where there is no PID namespace (a grader that is not root) this is what ends a fork bomb."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:  # only a group of its own: one that died before its setsid is in ours
            os.killpg(pid, signal.SIGKILL)


def _kill_orphans(workers: set[int]) -> None:
    """Whatever a child left behind is re-parented here (subreaper): kill it."""
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
    serve(socket.socket(fileno=int(args[0])))


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
    """A zygote and this process's control connection to it. Without `conn`, starts one (a fresh
    `python -I` with a filtered environment: it inherits nothing of ours but that connection); with
    `conn`, uses the zygote that forked this process (a batch's grading process)."""

    def __init__(self, conn: socket.socket | None = None) -> None:
        self.owner = os.getpid()
        self.proc: subprocess.Popen | None = None
        self.env: dict[str, str] | None = None  # the environment it was started with (None: not ours to start)
        self.used = False  # asked to fork something: it may no longer `become` a grading process
        self.spent = False  # it became a grading process: no longer a zygote
        if conn is not None:
            self.conn, self.pid = conn, os.getppid()
            return
        self.env = _zygote_env()
        self.conn, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from grader.pool.zygote import main; main()"
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", code, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=None if os.environ.get("ATTN_KATA_DEBUG") else subprocess.DEVNULL, start_new_session=True,
                env=self.env)
        finally:
            theirs.close()
        self.pid = self.proc.pid

    def alive(self) -> bool:
        if os.getpid() != self.owner or self.spent:  # a plain fork of our process must not share our connection
            return False
        if self.proc is not None:
            return self.proc.poll() is None
        return running(self.pid)

    def stop(self, wait: float = 5.0) -> None:
        """Close our connection (the zygote then exits, reaping all it forked) and wait for it, so that its
        CPU time and its children's are accounted to this process."""
        with contextlib.suppress(OSError):
            self.conn.close()
        if self.proc is not None and os.getpid() == self.owner:
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _ask(self, line: str, fds: list[int] | None = None) -> str:
        self.conn.settimeout(60)  # the first answer waits for the zygote to import torch
        socket.send_fds(self.conn, [line.encode() + b"\n"], fds or [])
        data = b""
        while not data.endswith(b"\n"):
            chunk = self.conn.recv(256)
            if not chunk:
                raise OSError("zygote closed the connection")
            data += chunk
            if len(data) > 64:
                raise OSError("garbled answer from the zygote")
        try:
            return data.decode().strip()
        except UnicodeDecodeError:
            raise OSError("garbled answer from the zygote") from None

    def spawn(self, fd: int) -> int:
        self.used = True
        return int(self._ask("spawn", [fd]))

    def grader(self, fd: int, entry: str) -> int:
        """Fork a trusted grading process that runs `entry` ("module:function") on `fd` (grader.grading.forked);
        only the connection that started the zygote may ask."""
        self.used = True
        return int(self._ask(f"grader {entry}", [fd]))

    def can_become(self) -> bool:
        """Started by this process and never asked to fork: it may `become` a grading process."""
        return self.proc is not None and not self.used and self.alive()

    def become(self, fd: int, entry: str) -> int:
        """Have the zygote fork one worker and then become the grading process that runs `entry` on `fd` (see
        the module's `become`); its pid. It is no longer a zygote: the next `zygote()` starts another."""
        self.used = True
        answer = self._ask(f"become {entry}", [fd])
        self.spent = answer != "error"
        return int(answer)

    def take(self) -> tuple[socket.socket, int] | None:
        """A worker forked in advance (only a zygote that became a grading process has one: `_Judged`)."""
        return None

    def ended(self, pid: int) -> None:
        """A worker was killed: the zygote's loop reaps it and tidies up after it."""

    def status(self, pid: int) -> str:
        return self._ask(f"status {pid}")


class _Judged:
    """`zygote()` in a zygote that became one submission's grading process (`_Server.become`). Its first worker
    is the one forked before this process learnt anything (`take`); a later one (a step killed the first) comes
    from a fresh zygote, started as any grader starts one (exec'd, a filtered environment: nothing of this
    process's memory reaches it). It never forks a worker itself. It reaps its worker, kills the worker's group
    and removes its cgroups as the zygote's loop would, and ends everything when the grader goes away."""

    env = None
    proc = None

    def __init__(self, server: _Server, channel: socket.socket, pid: int) -> None:
        self.server, self.owner, self.pid = server, os.getpid(), os.getpid()
        self.ready: tuple[socket.socket, int] | None = (channel, pid)
        self.fallback: Zygote | None = None
        self.theirs: set[int] = set()  # workers of the fresh zygote
        self.lock = threading.Lock()
        # the grader's end closing (it exited, was killed) ends this process too, as it ends a zygote
        primary = next(c.sock for c in server.conns.values() if c.primary)
        threading.Thread(target=self._watch, args=(primary,), daemon=True).start()

    def _watch(self, primary: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while primary.recv(256):
                pass
        self.shut_down()

    def alive(self) -> bool:
        return True

    def take(self) -> tuple[socket.socket, int] | None:
        ready, self.ready = self.ready, None
        return ready

    def spawn(self, fd: int) -> int:
        if self.fallback is None or not self.fallback.alive():
            self.fallback = Zygote()
        pid = self.fallback.spawn(fd)
        self.theirs.add(pid)  # a pid our first worker had, given again: still theirs (`status`)
        return pid

    def fresh(self) -> _Judged:
        if self.fallback is not None:
            self.fallback.stop(wait=0.5)
            self.fallback = None
        return self

    def ended(self, pid: int) -> None:
        """Our worker `pid` was killed: kill its group (it is our child, not reaped: the group is still its own),
        reap it, remove its cgroups."""
        if pid not in self.server.workers:
            return
        _kill_group(pid)
        deadline = time.monotonic() + 2.0
        while True:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # reaped already
                break
            if done:
                self.server.statuses[pid] = status
                break
            if time.monotonic() >= deadline:
                return  # still dying: shut_down kills and reaps it
            time.sleep(0.002)
        self.server.workers.discard(pid)
        if not self.server.sandbox.remove_cgroup(pid):
            self.server.stale_groups.add(pid)

    def status(self, pid: int) -> str:
        if pid not in self.theirs and (pid in self.server.workers or pid in self.server.statuses):
            self.ended(pid)
            return str(self.server.statuses.get(pid, "none"))
        return self.fallback.status(pid) if self.fallback is not None else "none"

    def stop(self, wait: float = 5.0) -> None:
        self.fresh()

    def shut_down(self) -> None:
        """Stop the fresh zygote, if one was started, then end as the zygote ends: kill our worker's group, remove
        its cgroups, reap every child (what the worker left behind is re-parented here), exit."""
        self.lock.acquire()  # once: the watcher and the grading process's end may both come here
        with contextlib.suppress(Exception):
            self.fresh()
        self.server.shut_down()


def _zygote_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
            "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "ATTN_KATA_TEST_FAULTS")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.setdefault("OMP_NUM_THREADS", "1")
    # a reference kept outside the kata (ATTN_KATA_SOLUTIONS): the folder that holds it is hidden from workers
    # too, should it lie under something they may read (a path, not the variable: the zygote never reads it)
    override = os.environ.get("ATTN_KATA_SOLUTIONS")
    if override:
        env["ATTN_KATA_HIDE"] = os.path.dirname(os.path.realpath(override))
    # malloc's heap in transparent huge pages: the ~80 MB that importing torch leaves there is then a few
    # dozen page-table entries instead of ~20k, which roughly halves what each fork and each worker's exit
    # cost (benchmarks/bench_grade.py). glibc < 2.35 ignores the tunable.
    env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
    return env


_ZYGOTE: Zygote | _Judged | None = None


def zygote(fresh: bool = False) -> Zygote:
    """This process's zygote; `fresh` replaces one that stopped answering. One that hides another folder from its
    workers than ATTN_KATA_SOLUTIONS now asks for (ATTN_KATA_HIDE, fixed at its start) is replaced too: a zygote
    started early (a notebook kernel's import of the grader, grader/__init__.py) before the variable named a
    reference under a path workers may read let them read it (red team 15)."""
    global _ZYGOTE
    if isinstance(_ZYGOTE, _Judged):  # this process is a zygote that became a grading process
        return _ZYGOTE.fresh() if fresh else _ZYGOTE  # type: ignore[return-value]
    if _ZYGOTE is not None and _ZYGOTE.spent and os.getpid() == _ZYGOTE.owner:
        stop()  # it became a grading process, which has answered by now: reap it
    if (_ZYGOTE is not None and _ZYGOTE.env is not None and os.getpid() == _ZYGOTE.owner
            and _ZYGOTE.env.get("ATTN_KATA_HIDE") != _zygote_env().get("ATTN_KATA_HIDE")):
        stop()  # closes our end: it kills its workers and exits
    if fresh and _ZYGOTE is not None:
        if _ZYGOTE.proc is not None and os.getpid() == _ZYGOTE.owner:
            with contextlib.suppress(OSError):
                _ZYGOTE.proc.kill()
        with contextlib.suppress(OSError):
            _ZYGOTE.conn.close()
        _ZYGOTE = None
    if _ZYGOTE is None or not _ZYGOTE.alive():
        _ZYGOTE = Zygote()
    return _ZYGOTE


def current() -> Zygote | _Judged | None:
    """This process's zygote if it has one now (never starts one)."""
    return _ZYGOTE


def attach(conn: socket.socket) -> None:
    """In a grading process the zygote forked: use that zygote, over the connection it made for us."""
    global _ZYGOTE
    _ZYGOTE = Zygote(conn)


def stop() -> None:
    """Stop this process's zygote, if it started one, and reap it."""
    global _ZYGOTE
    if _ZYGOTE is not None:
        _ZYGOTE.stop()
        if not isinstance(_ZYGOTE, _Judged):  # a grading process's own handle stays: its worker is still its child
            _ZYGOTE = None


def warm_up() -> None:
    """Start the zygote now: it imports torch while this process goes on."""
    zygote()


if __name__ == "__main__":
    main()
