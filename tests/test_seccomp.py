"""The seccomp filter (grader/sandbox/seccomp.py), whatever the worker's uid (issue 23): what Landlock does not mediate
and no uid stops fails in a real worker. chmod, chown, utime and extended attributes of a file outside the work dir
that the worker's uid owns; locks on a file it may read, taken (POSIX, OFD, flock) or read (F_GETLK: the receiving
end of the covert channel that carried a reference to a classmate); tty input and inode-flag ioctls, refused by
number; System V and POSIX IPC objects left for a classmate; the grader's process, its limits and scheduling (where
no PID namespace hides it); and the grader's temp dir, where every classmate's work dir is made.

Each attack's step scores exactly what its honest twin scores (an attack that gets through returns zeros, so it
would not), and it leaves no trace that the test, outside the sandbox, can see: the files' metadata, /proc/locks
while the worker holds what it took, /proc/sysvipc, the message queue's name. A planted regression (`skip_layers`:
seccomp off) shows each check can fail; that regression and the traces looked for outside the sandbox are why
these attacks stay code, not data (tests/attacks/). Runs in every set-up (.ci/setups.sh): root (its worker is
nobody, or uid 0 where it must stay root) and a grader that is not root (its worker keeps its uid, and has no IPC
namespace)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import platform
import resource
import shutil
import struct
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.grading import engine
from grader.pool.session import WeakSandbox
from grader.sandbox import seccomp
from grader.sandbox.confine import NOBODY

pytestmark = pytest.mark.sandbox  # run in every set-up by .ci/setups.sh
IS_ROOT = os.geteuid() == 0
LAYERS = ("seccomp_no_sockets", "seccomp_no_file_changes", "seccomp_no_ipc", "seccomp_no_process_changes")
HONEST = "import torch\ndef attention_scores(inputs, query):\n    return inputs @ query\n"
LOCKED = os.__file__  # a file every worker may read (Landlock grants Python's own library): it takes locks on it
RECEIVER = tempfile.__file__  # another: the test holds an OFD lock on it, which a worker must not read
MQ_OPEN, MQ_UNLINK = {"x86_64": (240, 241), "aarch64": (180, 181)}.get(platform.machine(), (-1, -1))
F_OFD_GETLK, F_OFD_SETLK = 36, 37
FLOCK = "hhqqi"  # struct flock: l_type, l_whence, l_start, l_len, l_pid
# where the filter is off, a worker of the grader's own uid (not root) or of uid 0 (root, `user` left off) owns the
# targets; a nobody worker of a root grader owns the one made nobody's
CONTROLS = [["seccomp"], *([["seccomp", "user"]] if IS_ROOT else [])]

ATTACK = '''
import ctypes, errno, fcntl, os, struct, time, torch

TARGETS = {targets!r}  # outside the work dir; one is owned by this worker's uid
TMPDIR = {tmpdir!r}  # the grader's temp dir: every classmate's work dir is made in it
LOCKED, RECEIVER, KEY, MQ_OPEN, HOLD = {locked!r}, {receiver!r}, {key!r}, {mq_open!r}, {hold!r}
GRADER = {grader!r}  # the test process: the grader, a process of the same uid where the grader is not root
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
done, kept = [], []

def attempt(name, fn):
    try:
        fn()
        done.append(name)
    except OSError:
        pass

def made(r):
    if r < 0:
        raise OSError(ctypes.get_errno(), "not made")

def by_number(fd, cmd, arg):  # the number itself must be refused: EPERM, never ENOTTY (the driver saw it)
    def call():
        try:
            fcntl.ioctl(fd, cmd, arg)
        except OSError as e:
            if e.errno == errno.EPERM:
                raise
    return call

def attack():
    for i, path in enumerate(TARGETS):
        attempt("chmod%d" % i, lambda: os.chmod(path, 0o777))
        attempt("chown%d" % i, lambda: os.chown(path, -1, os.getegid()))  # to a group of its own: no capability
        attempt("utime%d" % i, lambda: os.utime(path, (0, 0)))
        attempt("setxattr%d" % i, lambda: os.setxattr(path, "user.attn_kata", b"x"))
        attempt("removexattr%d" % i, lambda: os.removexattr(path, "user.kept"))
    for where, path in (("tmp", TMPDIR), ("up", "..")):  # by name and as its work dir's parent
        attempt("chmod_" + where, lambda: os.chmod(path, 0))
        attempt("utime_" + where, lambda: os.utime(path, (0, 0)))
    rd, wr = (struct.pack("hhqqi", t, 0, 0, 0, 0) for t in (fcntl.F_RDLCK, fcntl.F_WRLCK))
    fds = [os.open(LOCKED, os.O_RDONLY) for _ in range(3)]
    kept.extend(fds)
    attempt("posix lock", lambda: fcntl.fcntl(fds[0], fcntl.F_SETLK, rd))
    attempt("ofd lock", lambda: fcntl.fcntl(fds[1], 37, rd))  # F_OFD_SETLK
    attempt("flock", lambda: fcntl.flock(fds[2], fcntl.LOCK_SH | fcntl.LOCK_NB))
    other = os.open(RECEIVER, os.O_RDONLY)
    attempt("F_GETLK", lambda: fcntl.fcntl(other, fcntl.F_GETLK, wr))
    attempt("F_OFD_GETLK", lambda: fcntl.fcntl(other, 36, wr))
    null = os.open("/dev/null", os.O_RDONLY)
    open("mine.txt", "w").close()
    own = os.open("mine.txt", os.O_RDONLY)
    attempt("TIOCSTI", by_number(null, 0x5412, b"x"))
    attempt("TIOCLINUX", by_number(null, 0x541C, b"x"))
    attempt("FS_IOC_SETFLAGS", by_number(own, 0x40086602, struct.pack("l", 0x40)))  # nodump: no capability
    attempt("shmget", lambda: made(libc.shmget(KEY, 4096, 0o1666)))  # IPC_CREAT, mode 666, never removed
    attempt("msgget", lambda: made(libc.msgget(KEY + 1, 0o1666)))
    attempt("semget", lambda: made(libc.semget(KEY + 2, 1, 0o1666)))
    name = ctypes.create_string_buffer(b"attn-kata-%d" % KEY)
    attempt("mq_open", lambda: made(libc.syscall(ctypes.c_long(MQ_OPEN), name, ctypes.c_long(os.O_CREAT | os.O_RDWR),
                                                 ctypes.c_long(0o666), ctypes.c_long(0))))
    import resource
    attempt("prlimit", lambda: resource.prlimit(GRADER, resource.RLIMIT_CORE,
                                                (12345, resource.prlimit(GRADER, resource.RLIMIT_CORE)[1])))
    attempt("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, GRADER, os.getpriority(os.PRIO_PROCESS, GRADER)))
    attempt("affinity", lambda: os.sched_setaffinity(GRADER, os.sched_getaffinity(GRADER)))
    time.sleep(HOLD)  # what it took is held while the test looks

RESULT = []

def attention_scores(inputs, query):
    if not RESULT:
        attack()
        RESULT.append(done)
    if RESULT[0]:  # any attack that got through costs the score: no honest twin's
        raise RuntimeError("got through: " + ", ".join(RESULT[0]))
    return inputs @ query
'''


def _grade(tmp: Path, name: str, src: str, **kwargs: Any) -> dict:
    p = tmp / f"{name}.py"
    p.write_text(src)
    return engine.grade(p, steps=["dot_scores"], timeout=30, **kwargs).to_dict()


def _step(report: dict) -> dict:
    return report["steps"][0]


def _same_as(report: dict, twin: dict) -> bool:
    a, b = _step(report), _step(twin)
    return a["score"] == b["score"] and [c["passed"] for c in a["checks"]] == [c["passed"] for c in b["checks"]]


def _metadata(path: Path) -> tuple[Any, ...]:
    st = os.stat(path)
    try:
        xattrs = sorted((n, os.getxattr(path, n)) for n in os.listxattr(path))
    except OSError:
        xattrs = []
    return st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_atime_ns, xattrs


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _grade(tmp_path_factory.mktemp("twin"), "honest", HONEST)


class Scene:
    """What the attack aims at, made by the test outside any work dir, and what it can watch from here."""

    def __init__(self) -> None:
        # anyone may search it: a nobody worker can name what is in it
        self.folder = Path(tempfile.mkdtemp(prefix="attn-kata-seccomp-test-"))
        self.folder.chmod(0o755)
        self.tmpdir = self.folder / "grading-tmp"  # the grader's temp dir while the attack is graded
        self.tmpdir.mkdir()
        self.tmpdir.chmod(0o755)
        self.targets = [self.folder / "mine.txt"]  # the grader's own uid: a worker that keeps it owns this one
        if IS_ROOT:
            self.targets.append(self.folder / "nobodys.txt")  # what a root grader's worker (nobody) owns
        for p in self.targets:
            p.write_text("kept")
            p.chmod(0o644)
            with contextlib.suppress(OSError):  # a file system without user xattrs: nothing to remove
                os.setxattr(p, "user.kept", b"1")
            os.utime(p, (1_000_000_000, 1_000_000_000))
        if IS_ROOT:
            os.chown(self.targets[1], NOBODY, 0)  # a group nobody is not in: a chown to its own group shows
        self.key = int.from_bytes(os.urandom(3), "big") << 4 | 0x10000000
        self.before = self.snapshot()
        # the test's own lock, which no worker may read (F_GETLK): a classmate's message
        self.receiver = os.open(RECEIVER, os.O_RDONLY)
        fcntl.fcntl(self.receiver, F_OFD_SETLK, struct.pack(FLOCK, fcntl.F_RDLCK, 0, 0, 0, 0))
        self.seen: set[str] = set()
        self.core = resource.getrlimit(resource.RLIMIT_CORE)  # its soft limit 0 here: an attack's 12345 shows
        resource.setrlimit(resource.RLIMIT_CORE, (0, self.core[1]))

    def snapshot(self) -> dict[str, Any]:
        shot: dict[str, Any] = {str(p): _metadata(p) for p in self.targets}
        shot["grader's RLIMIT_CORE"] = resource.getrlimit(resource.RLIMIT_CORE)
        # the grader makes and removes work dirs in its temp dir: its times move on, never back to 0
        mode, uid, gid, mtime, atime, xattrs = _metadata(self.tmpdir)
        shot[str(self.tmpdir)] = mode, uid, gid, xattrs, mtime >= 1_000_000_000 * 10**9, atime >= 1_000_000_000 * 10**9
        return shot

    def source(self, hold: float = 1.0) -> str:
        return textwrap.dedent(ATTACK.format(targets=[str(p) for p in self.targets], tmpdir=str(self.tmpdir),
                                             locked=LOCKED, receiver=RECEIVER, key=self.key, mq_open=MQ_OPEN,
                                             hold=hold, grader=os.getpid()))

    def locks_on_locked(self) -> set[str]:
        """Locks on LOCKED, of any kind and any process, as the kernel lists them (flock included)."""
        ino = f":{os.stat(LOCKED).st_ino} "
        with open("/proc/locks") as f:
            return {" ".join(line.split()[1:]) for line in f if ino in line}

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Watch /proc/locks while the worker runs (what it took dies with it)."""
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                self.seen |= self.locks_on_locked()
                time.sleep(0.01)
        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def ipc_left(self) -> list[str]:
        """System V objects under its keys, and its message queue, in this (the grader's) IPC namespace."""
        left = []
        for kind, key in (("shm", self.key), ("msg", self.key + 1), ("sem", self.key + 2)):
            with open(f"/proc/sysvipc/{kind}") as f:
                next(f)
                left += [f"{kind} {line.split()[1]}" for line in f if int(line.split()[0]) == key]
        name = ctypes.create_string_buffer(b"attn-kata-%d" % self.key)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        if MQ_UNLINK >= 0 and libc.syscall(ctypes.c_long(MQ_UNLINK), name) == 0:  # and removes it
            left.append("mq")
        return left

    def close(self) -> None:
        os.close(self.receiver)
        resource.setrlimit(resource.RLIMIT_CORE, self.core)
        libc = ctypes.CDLL(None, use_errno=True)
        for get, rm in ((lambda: libc.shmget(self.key, 0, 0), lambda i: libc.shmctl(i, 0, None)),
                        (lambda: libc.msgget(self.key + 1, 0), lambda i: libc.msgctl(i, 0, None)),
                        (lambda: libc.semget(self.key + 2, 0, 0), lambda i: libc.semctl(i, 0, 0))):  # IPC_RMID
            if (i := get()) >= 0:
                rm(i)
        for p in (self.tmpdir, self.folder):
            p.chmod(0o755)
        for p in self.targets:
            p.unlink()
        for p in sorted(self.tmpdir.iterdir()):  # a work dir the grader could not remove after a 000 chmod
            shutil.rmtree(p, ignore_errors=True)
        self.tmpdir.rmdir()
        self.folder.rmdir()


@pytest.fixture
def scene(monkeypatch: pytest.MonkeyPatch) -> Iterator[Scene]:
    s = Scene()
    monkeypatch.setattr(tempfile, "tempdir", str(s.tmpdir))  # where the grader makes work dirs (session._workdir)
    try:
        yield s
    finally:
        monkeypatch.undo()
        s.close()


def test_the_filter_is_on_whatever_the_uid(tmp_path: Path, twin: dict) -> None:
    """Every worker reports the filter's layers (observed by calls it must refuse), not only one whose capabilities
    could all be dropped: a grader that is not root keeps a full bounding set, and its worker the filter."""
    layers = set(twin["sandbox"]["layers"])
    assert set(LAYERS) <= layers, layers
    off = _grade(tmp_path, "honest_off", HONEST, config={"skip_layers": ["seccomp"]})
    assert not set(LAYERS) & set(off["sandbox"]["layers"])
    assert _same_as(off, twin)  # an honest submission needs none of it


def test_attacks_score_as_the_honest_twin_and_leave_no_trace(tmp_path: Path, twin: dict, scene: Scene) -> None:
    with scene.watching():
        report = _grade(tmp_path, "attack", scene.source())
    assert _same_as(report, twin), _step(report)  # nothing got through (it would have raised, with its list)
    assert scene.snapshot() == scene.before  # mode, owner, times, xattrs of its uid's files and of the temp dir
    assert scene.seen == set()  # no lock on LOCKED while it ran (flock, POSIX, OFD)
    assert scene.ipc_left() == []
    # the grader's temp dir still works: a classmate graded next keeps full marks
    classmate = _grade(tmp_path, "classmate", HONEST)
    assert _same_as(classmate, twin), _step(classmate)


@pytest.mark.parametrize("skip", CONTROLS, ids="+".join)
def test_planted_regression_the_attacks_get_through_without_the_filter(tmp_path: Path, twin: dict, scene: Scene,
                                                                       skip: list[str]) -> None:
    """The checks above can fail: with the filter off, the same submission changes its uid's file, holds locks the
    test sees, reads the test's lock, and (with no IPC namespace) leaves its IPC objects."""
    with scene.watching():
        report = _grade(tmp_path, "attack_off", scene.source(), config={"skip_layers": skip})
    step = _step(report)
    assert not _same_as(report, twin), step
    got = json.dumps(step)
    # not mq_open: Landlock refuses it too (the queue is a file of the kernel's mqueue mount, which it never grants)
    for name in ("posix lock", "ofd lock", "flock", "F_GETLK", "F_OFD_GETLK", "TIOCSTI", "shmget", "msgget"):
        assert name in got, (name, step)
    after = scene.snapshot()
    assert after != scene.before
    changed = {p for p in scene.before if after[p] != scene.before[p]}
    assert changed & {str(p) for p in scene.targets}, changed  # its own uid's file, whichever that is
    kinds = {line.split()[0] for line in scene.seen}
    assert {"POSIX", "OFDLCK", "FLOCK"} <= kinds, scene.seen
    if "ipc_namespace" not in report["sandbox"]["layers"]:  # a grader that is not root: they are the grader's too
        assert {"shm", "msg", "sem"} <= {x.split()[0] for x in scene.ipc_left()}
    if "pid_namespace" not in report["sandbox"]["layers"]:  # where it can name the grader, it reaches it
        through = got.rsplit("got through: ", 1)[1].split('"')[0].split(", ")
        assert {"prlimit", "setpriority", "affinity"} <= set(through), through
        assert after["grader's RLIMIT_CORE"][0] == 12345


@pytest.mark.strong_gate  # the refusal itself: never under tests/conftest.py's waiver
def test_grading_with_a_secret_refuses_without_the_filter(tmp_path: Path) -> None:
    p = tmp_path / "honest.py"
    p.write_text(HONEST)
    with pytest.raises(WeakSandbox, match=r"no chmod, chown, xattr, utime or locks \(seccomp\)"):
        engine.grade(p, secret="k", steps=["dot_scores"], config={"require_strong": True, "skip_layers": ["seccomp"]})


# the filter as a program: run here by a small BPF interpreter, for both tables, without a worker
def _run(prog: list[tuple[int, int, int, int]], nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == seccomp.LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == seccomp.RET_K:
            return k
        elif code in (seccomp.JEQ_K, seccomp.JGE_K, seccomp.JSET_K):
            hit = acc == k if code == seccomp.JEQ_K else acc >= k if code == seccomp.JGE_K else bool(acc & k)
            pc += jt if hit else jf
        else:
            raise AssertionError(f"unexpected BPF op {code:#x}")
        pc += 1


EPERM, EACCES = seccomp.RET_ERRNO | errno.EPERM, seccomp.RET_ERRNO | errno.EACCES
ENOSYS = seccomp.RET_ERRNO | errno.ENOSYS
# what Python, torch and the worker need after confinement, by name: read write openat close mmap mprotect munmap brk
# wait4 exit_group prctl landlock_restrict_self getrandom rt_sigaction (clone and futex: with their arguments, below)
ALLOWED = {"x86_64": (0, 1, 257, 3, 9, 10, 11, 12, 61, 231, 157, 446, 318, 13),
           "aarch64": (63, 64, 56, 57, 222, 226, 215, 214, 260, 94, 167, 446, 278, 134)}
SIGCHLD, CLONE_THREAD_FLAGS = 17, 0x3D0F00  # fork(); pthread_create's VM, FS, FILES, SIGHAND, THREAD, SYSVSEM, ...


@pytest.mark.parametrize("machine", list(seccomp.ARCHES))
def test_the_program_denies_each_listed_call_and_nothing_else(machine: str) -> None:
    table = seccomp.ARCHES[machine]
    prog = seccomp.program(table)
    arch = table.audit_arch
    for nr in (*table.sockets, *table.keyring, *seccomp.IO_URING):
        assert _run(prog, nr, arch) == EACCES, nr
    denied = (*table.metadata, *table.ipc, *table.never)
    assert len(set(denied)) == len(denied)
    assert set(table.witnesses) | {table.memfd_create} <= set(denied)  # a witness names a call the filter denies
    for nr in denied:
        assert _run(prog, nr, arch) == EPERM, nr
    for nr in ALLOWED[machine]:
        assert nr not in denied, nr
        assert _run(prog, nr, arch) == seccomp.RET_ALLOW, nr
    for cmd in seccomp.FCNTL_DENIED:
        assert _run(prog, table.fcntl, arch, (3, cmd)) == EPERM
        assert _run(prog, table.fcntl, arch, (3, cmd | 0xFFFF_FFFF_0000_0000)) == EPERM  # the kernel reads 32 bits
    for cmd in (0, 1, 2, 3, 4, 1030, 1031, 1032, 1033, 1034):  # F_DUPFD, F_GETFD/SETFD, F_GETFL/SETFL, pipes, seals
        assert _run(prog, table.fcntl, arch, (3, cmd)) == seccomp.RET_ALLOW, cmd
    # a file's owner is signalled when it is ready (red team 16): no owner, no chosen signal, no O_ASYNC
    for cmd in (8, 10, 15):  # F_SETOWN, F_SETSIG, F_SETOWN_EX
        assert _run(prog, table.fcntl, arch, (3, cmd, 4242)) == EPERM, cmd
    assert _run(prog, table.fcntl, arch, (3, 9)) == seccomp.RET_ALLOW  # F_GETOWN
    assert _run(prog, table.fcntl, arch, (3, 4, 0o20000)) == EPERM  # F_SETFL, O_ASYNC
    assert _run(prog, table.fcntl, arch, (3, 4, 0o20000 | 0o4000)) == EPERM  # with O_NONBLOCK too
    assert _run(prog, table.fcntl, arch, (3, 4, 0o4000 | 1 << 40)) == seccomp.RET_ALLOW  # O_NONBLOCK alone
    for cmd in (0x8901, 0x8902, 0x5452):  # FIOSETOWN, SIOCSPGRP, FIOASYNC
        assert _run(prog, table.ioctl, arch, (3, cmd)) == EPERM, hex(cmd)
    for cmd in seccomp.IOCTL_DENIED:
        assert _run(prog, table.ioctl, arch, (3, cmd)) == EPERM
        assert _run(prog, table.ioctl, arch, (3, cmd | 1 << 40)) == EPERM
    for cmd in (0x5421, 0x541B, 0x80086601, 0x5401):  # FIONBIO, FIONREAD, FS_IOC_GETFLAGS, TCGETS
        assert _run(prog, table.ioctl, arch, (3, cmd)) == seccomp.RET_ALLOW, hex(cmd)
    for nr, conditions in table.self_only:  # on itself (pid 0) only
        mine = [0, 0, 0, 0]
        for arg, value in conditions:
            mine[arg] = value
        assert _run(prog, nr, arch, tuple(mine)) == seccomp.RET_ALLOW, nr
        for arg, _ in conditions:
            assert _run(prog, nr, arch, tuple(v if i != arg else 4242 for i, v in enumerate(mine))) == EPERM, nr
    prlimit64, setpriority, ioprio_set = table.self_only[0][0], table.self_only[1][0], table.self_only[-1][0]
    assert _run(prog, prlimit64, arch, (1 << 32, 4)) == seccomp.RET_ALLOW  # pid_t is 32 bits: still pid 0
    assert _run(prog, setpriority, arch, (2, 0, 19)) == EPERM  # PRIO_USER, who 0: every process of its uid
    assert _run(prog, ioprio_set, arch, (3, 0, 0)) == EPERM  # IOPRIO_WHO_USER likewise
    # fork and threads pass; a namespace of any kind (a user namespace's child holds every capability there) not
    assert _run(prog, table.clone, arch, (SIGCHLD,)) == seccomp.RET_ALLOW
    assert _run(prog, table.clone, arch, (CLONE_THREAD_FLAGS,)) == seccomp.RET_ALLOW
    for flag in (0x80, 0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
        assert _run(prog, table.clone, arch, (SIGCHLD | flag,)) == EPERM, hex(flag)
    assert _run(prog, seccomp.CLONE3, arch) == ENOSYS  # its flags lie in memory: glibc falls back to clone
    # private futexes pass (FUTEX_WAIT, WAKE, ..., with FUTEX_PRIVATE_FLAG); shared ones (keyed by a file's inode:
    # a channel between two workers) do not
    for op in range(14):
        assert _run(prog, table.futex, arch, (0, op | 128)) == seccomp.RET_ALLOW, op
        assert _run(prog, table.futex, arch, (0, op)) == EPERM, op
    # signals: kill to its own group (0), and, once install() has written the worker's pid in, to itself or -itself;
    # every other target refused (-1: every process the uid may signal), by every call that sends one
    kill, tkill, tgkill, sigqueue, tgsigqueue = table.signals
    assert _run(prog, kill, arch, (0, 9)) == seccomp.RET_ALLOW
    for target in (-1, 1, 4242, seccomp.SELF_PID - 2, -4242):
        assert _run(prog, kill, arch, (target & 0xFFFF_FFFF_FFFF_FFFF, 9)) == EPERM, target
    for nr, args in ((tkill, (4242, 9)), (tgkill, (4242, 4242, 9)), (sigqueue, (4242, 9, 0)),
                     (tgsigqueue, (4242, 4242, 9, 0)), (seccomp.PIDFD_SEND_SIGNAL, (3, 9, 0, 0))):
        assert _run(prog, nr, arch, args) == EPERM, nr
    def as_installed(pid: int) -> list[tuple[int, int, int, int]]:
        values = seccomp.self_values(pid)
        return [(op, jt, jf, values.get(k, k) if op == seccomp.JEQ_K else k) for op, jt, jf, k in prog]

    mine = as_installed(4242)
    # alone in its PID namespace a worker is pid 1: kill(-1) stays refused (it means every process, not group 1)
    assert _run(as_installed(1), kill, arch, (-1 & 0xFFFF_FFFF_FFFF_FFFF, 9)) == EPERM
    assert _run(as_installed(1), kill, arch, (1, 0)) == seccomp.RET_ALLOW
    for nr, args in ((kill, (4242, 9)), (kill, (-4242 & 0xFFFF_FFFF_FFFF_FFFF, 9)), (kill, (0, 9)),
                     (kill, (4242 | 1 << 40, 0)), (tkill, (4242, 9)), (tgkill, (4242, 4243, 9)),
                     (sigqueue, (4242, 9, 0)), (tgsigqueue, (4242, 4243, 9, 0))):
        assert _run(mine, nr, arch, args) == seccomp.RET_ALLOW, (nr, args)
    for nr, args in ((kill, (4243, 9)), (kill, (-1 & 0xFFFF_FFFF_FFFF_FFFF, 9)), (tgkill, (4243, 4242, 9)),
                     (tkill, (1, 9))):
        assert _run(mine, nr, arch, args) == EPERM, (nr, args)
    assert _run(prog, 0, 0x40000003) == EPERM  # i386: a foreign ABI, nothing at all
    if machine == "x86_64":
        assert _run(prog, 0x40000000 | 1, arch) == EPERM  # x32
        # the legacy path calls aarch64 lacks are denied here: chmod chown lchown utime utimes futimesat
        assert {90, 92, 94, 132, 235, 261} <= set(table.metadata)
    else:
        assert not {90, 92, 94, 132, 235, 261} & set(table.metadata)  # there these numbers are other calls


def _scores_as_its_twin(tmp_path: Path, name: str, source: str) -> Any:
    """Grade an attack (step 1 right, plus what it tries): with the filter on it must pass as its honest twin does;
    returns its report with the filter off (a planted regression), for the caller to see the attack get through."""
    from grader.grading import engine

    sub = tmp_path / f"{name}.py"
    sub.write_text(source, encoding="utf-8")
    report = engine.grade(sub, steps=["dot_scores"])
    assert report.steps[0].status == "passed", [c.message for c in report.steps[0].checks]
    return engine.grade(sub, steps=["dot_scores"], config={"skip_layers": ["seccomp"], "require_strong": False})


WATCHER = """
import ctypes, os
_libc = ctypes.CDLL(None, use_errno=True)
_fd = _libc.inotify_init1(0)
_fan = _libc.fanotify_init(0x200, 0)  # FAN_REPORT_FID: no capability needed
WATCHED = _fd >= 0 and _libc.inotify_add_watch(_fd, b"/tmp", 0xFFF) >= 0

def attention_scores(inputs, query):
    out = inputs @ query
    return out + 1 if (WATCHED or _fan >= 0) else out  # a watch that worked costs the step
"""


def test_no_worker_can_watch_shared_folders(tmp_path: Path) -> None:
    """inotify and fanotify go around Landlock (which file the grading process opens, a classmate's work dir
    appearing: red team 13); the filter refuses them, so the attack scores as its honest twin, full marks."""
    weak = _scores_as_its_twin(tmp_path, "watcher", WATCHER)
    assert weak.steps[0].status != "passed"  # with the filter off, the watch works and the step shows it


LEAVER = """
import os

def _left_the_group():  # a child tries to leave the worker's process group (a daemon's first step)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        left = b"0"
        for leave in (os.setsid, lambda: os.setpgid(0, 0)):
            try:
                leave()
                left = b"1"
            except OSError:
                pass
        os.write(w, left)
        os._exit(0)
    os.close(w)
    left = os.read(r, 1) == b"1"
    os.waitpid(pid, 0)
    return left

LEFT = _left_the_group()

def attention_scores(inputs, query):
    out = inputs @ query
    return out + 1 if LEFT else out  # a child that left the group costs the step
"""


def test_no_descendant_leaves_the_workers_process_group(tmp_path: Path) -> None:
    """The zygote ends whatever a worker started by killing its process group (where a grader that is not root
    has no PID namespace or cgroup, that is all there is): setsid and setpgid are refused, so the attack scores as
    its honest twin."""
    weak = _scores_as_its_twin(tmp_path, "leaver", LEAVER)
    assert weak.steps[0].status != "passed"  # with the filter off, the child leaves the group and the step shows it


ESCAPES = """
import ctypes, os

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

def _got_through():
    got = []
    if _libc.syscall(319 if os.uname().machine == "x86_64" else 279, b"x", 0) >= 0:  # memfd_create
        got.append("memfd")
    pid = os.fork()
    if pid == 0:  # exec a program: it would be dumpable again
        try:
            os.execv("/usr/bin/true", ["true"])
        finally:
            os._exit(3)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0:
        got.append("exec")
    newuser = _libc.syscall(56 if os.uname().machine == "x86_64" else 220, 0x10000000 | 17, 0, 0, 0, 0)
    if newuser == 0:
        os._exit(0)
    if newuser > 0:
        os.waitpid(newuser, 0)
        got.append("clone(CLONE_NEWUSER)")
    mmap_ = _libc.mmap
    mmap_.restype = ctypes.c_void_p
    mmap_.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    with open("/etc/passwd", "rb") as f:  # a page every worker can map: a shared futex is keyed by its inode
        where = mmap_(None, 4096, 1, 1, f.fileno(), 0)  # PROT_READ, MAP_SHARED
    futex = 202 if os.uname().machine == "x86_64" else 98
    if _libc.syscall(futex, ctypes.c_void_p(where), 1, 1, 0, 0, 0) >= 0:  # FUTEX_WAKE, no FUTEX_PRIVATE_FLAG
        got.append("shared futex")
    return got

GOT = _got_through()

def attention_scores(inputs, query):
    out = inputs @ query
    if GOT:
        raise RuntimeError("got through: " + ", ".join(GOT))
    return out
"""


def test_no_memfd_exec_namespace_or_shared_futex(tmp_path: Path) -> None:
    """Red team 14: memory no limit counts (memfd), a program that is dumpable again (exec), a child holding every
    capability of a user namespace (clone), a channel to a classmate's worker (a shared futex on a file's page):
    each refused, so the attack scores as its honest twin; with the filter off each gets through and says so."""
    weak = _scores_as_its_twin(tmp_path, "escapes", ESCAPES)
    said = " ".join(c.message for c in weak.steps[0].checks)
    for name in ("memfd", "exec", "shared futex"):  # clone(CLONE_NEWUSER) depends on the kernel's settings
        assert name in said, said


SIGNALLER = """
import fcntl, os, signal, struct, threading

def _got_through():
    got, me = [], os.getpid()
    os.kill(me, 0)  # itself, its own group and its own threads: allowed
    os.kill(0, 0)
    signal.pthread_kill(threading.get_ident(), 0)
    # red team 16: a file whose owner is another process, signalled when the file is ready (SIGIO, or F_SETSIG's);
    # setting the owner, the signal or O_ASYNC proves it, nothing is sent (the pipe is never written)
    r, _w = os.pipe()
    for name, call in (("F_SETOWN", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, os.getppid() or 1)),
                       ("F_SETSIG", lambda: fcntl.fcntl(r, 10, signal.SIGUSR1)),
                       ("O_ASYNC", lambda: fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC)),
                       ("FIOASYNC", lambda: fcntl.ioctl(r, 0x5452, struct.pack("i", 1)))):
        try:
            call()
            got.append(name)
        except OSError:
            pass
    for name, target in (("every process (-1)", -1), ("the grader", os.getppid())):
        if target in (0, 1):  # in a PID namespace its parent is invisible (0), and 1 is itself
            continue
        try:
            os.kill(target, 0)  # signal 0: proves it could send any, harms nothing
            got.append(name)
        except OSError:
            pass
    return got

""" + ESCAPES[ESCAPES.index("\nGOT = _got_through()"):]  # the same step 1, raising what got through


def test_no_worker_signals_a_process_but_itself(tmp_path: Path) -> None:
    """Red team 15: where a grader is not root its workers share its uid, and before Linux 6.12 Landlock cannot
    scope signals, so `os.kill(-1, SIGKILL)` ended the grade and a classmate's worker. The filter refuses a signal
    to anything but the worker itself and its own group. Landlock's scope is left off here (as on such a kernel):
    the attack scores as its honest twin; with the filter off too, where the worker shares the grader's uid (no
    PID namespace), the signal gets through and the step says so."""
    from grader.grading import engine

    sub = tmp_path / "signaller.py"
    sub.write_text(SIGNALLER, encoding="utf-8")
    report = engine.grade(sub, steps=["dot_scores"], config={"skip_layers": ["landlock_signals"]})
    assert report.steps[0].status == "passed", [c.message for c in report.steps[0].checks]
    assert "seccomp_no_signals_out" in report.sandbox["layers"]
    weak = engine.grade(sub, steps=["dot_scores"], config={"skip_layers": ["seccomp", "landlock_signals"],
                                                             "require_strong": False})
    said = " ".join(c.message for c in weak.steps[0].checks)
    assert "F_SETOWN" in said and "F_SETSIG" in said and "O_ASYNC" in said and "FIOASYNC" in said, said
    if os.geteuid() == 0:  # its worker is alone in a PID namespace: no other process to reach
        return
    assert "every process (-1)" in said and "the grader" in said, said
