"""`attn-kata doctor`: which confinement layers are active here. Each row is verified by an attack run
inside a real worker; a layer is reported active only if its attack failed there. The attacks that look for
the reference and the secret are also run once outside the sandbox, in this trusted process, as a control:
a row whose attack finds nothing even there is reported "unverified", never "active"."""

from __future__ import annotations

import ctypes
import os
import pty
import shutil
import socket
import sys
import tempfile
import textwrap
import warnings
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import torch

assert sys.platform == "linux", "the Linux backend's attacks"  # the type checker skips it elsewhere

from grader.checks import Case
from grader.grading import reference
from grader.grading.engine import request
from grader.pool.session import Worker
from grader.registry import BY_ID
from grader.sandbox import policy
from grader.sandbox.common import WORKER_ENV, work_caches
from grader.submission import step_path

# Shared by the worker's attack and the control run here: look for `needles` (bytes) in every object the
# garbage collector sees, in sys.modules and linecache, and in the process's own memory, read with
# the kernel (a write to a pipe, which fails cleanly on unmapped memory) around the addresses of live objects.
HUNT = '''
import ctypes, fcntl, gc, linecache, os, sys, types

PUBLIC = "grader.worker.standins"  # the public stand-ins share the book's class names (docs/design.md §4)

def _hunt(needles, skip_module):
    hits = []
    for name, mod in list(sys.modules.items()):
        try:
            if name not in (skip_module, PUBLIC) and any(n in vars(mod) for n in REF_NAMES):
                hits.append("sys.modules:" + name)
        except TypeError:
            pass
    for key, entry in list(linecache.cache.items()):
        text = "".join(entry[2]).encode() if len(entry) > 2 and isinstance(entry[2], list) else b""
        if any(nd in text for nd in needles):
            hits.append("linecache:" + str(key))
    for obj in gc.get_objects():
        if isinstance(obj, type) and obj.__name__ in REF_NAMES and obj.__module__ not in (skip_module, PUBLIC):
            hits.append("gc:" + obj.__name__)
        if isinstance(obj, types.FunctionType) and obj.__code__.co_code in needles:
            hits.append("gc-code:" + obj.__code__.co_name)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    libc.write.restype = ctypes.c_ssize_t
    step = 1 << 20
    scratch = bytearray(step)
    sbuf = (ctypes.c_char * step).from_buffer(scratch)
    view = memoryview(scratch)
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, 1031, step)  # F_SETPIPE_SZ: a chunk at a time where the system allows it
    except OSError:
        pass
    room = fcntl.fcntl(w, 1032)  # F_GETPIPE_SZ
    os.set_blocking(w, False)
    def _read(addr):
        """Up to `step` bytes of this process's memory at addr, copied by the kernel into a pipe: where nothing
        readable is mapped the copy fails (EFAULT) or stops short, never a crash (seccomp refuses process_vm_readv
        in a worker)."""
        n = 0
        while n < step:
            want = min(room, step - n)
            k = libc.write(w, addr + n, want)
            if k <= 0:
                break
            got = 0
            while got < k:
                got += os.readv(r, [view[n + got:n + k]])
            n += k
            if k < want:
                break
        return n
    mine = [(ctypes.addressof(sbuf), step)] + [(id(nd), len(nd) + 64) for nd in needles]
    bases = {id(x) & ~(step - 1) for x in (gc, sys, scratch, needles, hits, 1.5, "x" * 100)}
    bases |= {ctypes.addressof(ctypes.create_string_buffer(1 << 16)) & ~(step - 1)}
    seen = set()
    for base in bases:
        for i in range(-512, 512):
            addr = base + i * step
            if addr <= 0 or addr in seen:
                continue
            seen.add(addr)
            n = _read(addr)
            if n <= 0:
                continue
            for nd in needles:
                at = scratch.find(nd, 0, n)
                while at >= 0:
                    where = addr + at
                    if not any(lo <= where < lo + size for lo, size in mine):
                        hits.append("memory:%x" % where)
                        break
                    at = scratch.find(nd, at + 1, n)
    os.close(r)
    os.close(w)
    return hits

def _peek(pid, needle):
    """Another process's memory, through /proc/PID/maps and mem."""
    try:
        with open("/proc/%s/maps" % pid) as maps, open("/proc/%s/mem" % pid, "rb") as mem:
            for line in maps:
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                if "r" in line.split()[1] and hi - lo < 1 << 28:
                    try:
                        mem.seek(lo)
                        if needle in mem.read(hi - lo):
                            return True
                    except (OSError, ValueError, OverflowError):
                        pass
    except OSError:
        pass
    return False
'''

PROBE = '''
import os, resource, socket, stat, torch
{hunt}
REF_NAMES = {ref_names!r}

def uring_socket():
    """A Unix socket made by io_uring (IORING_OP_SOCKET), never by socket(2): seccomp must refuse io_uring too."""
    import ctypes, mmap, struct
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    def sys_(nr, *a):
        r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
        if r < 0:
            raise OSError(ctypes.get_errno(), "syscall %d" % nr)
        return r
    params = ctypes.create_string_buffer(120)
    ring = sys_(425, 4, ctypes.addressof(params))  # io_uring_setup
    sq_n, cq_n = struct.unpack_from("<II", params.raw, 0)
    sq_off, cq_off = struct.unpack_from("<IIIIIIIIQ", params.raw, 40), struct.unpack_from("<IIIIIIIIQ", params.raw, 80)
    rw = dict(flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    sq = mmap.mmap(ring, sq_off[6] + sq_n * 4, offset=0, **rw)
    cq = mmap.mmap(ring, cq_off[5] + cq_n * 16, offset=0x8000000, **rw)
    sqes = mmap.mmap(ring, sq_n * 64, offset=0x10000000, **rw)
    sqes[0:64] = struct.pack("<BBHiQQII", 45, 0, 0, 1, 1, 0, 0, 0).ljust(64, b"\\0")  # SOCKET(AF_UNIX, STREAM)
    tail, mask = struct.unpack_from("<I", sq, sq_off[1])[0], struct.unpack_from("<I", sq, sq_off[2])[0]
    struct.pack_into("<I", sq, sq_off[6] + 4 * (tail & mask), 0)
    struct.pack_into("<I", sq, sq_off[1], tail + 1)
    sys_(426, ring, 1, 1, 1, 0, 0)  # io_uring_enter: wait for the one completion
    head, cmask = struct.unpack_from("<I", cq, cq_off[0])[0], struct.unpack_from("<I", cq, cq_off[2])[0]
    res = struct.unpack_from("<Qi", cq, cq_off[5] + 16 * (head & cmask))[1]
    os.close(ring)
    if res < 0:
        raise OSError(-res, "IORING_OP_SOCKET")
    return socket.socket(fileno=res)

def attention_scores(inputs, query):
    def blocked(fn):
        try:
            return 0.0 if fn() is not False else 1.0
        except (OSError, MemoryError):
            return 1.0
    def fork_many():  # each child waits for the pipe to close (a worker may signal no process but itself)
        pids = []
        r, w = os.pipe()
        try:
            for _ in range(64):
                pid = os.fork()
                if pid == 0:
                    os.close(w)
                    os.read(r, 1)
                    os._exit(0)
                pids.append(pid)
        finally:
            os.close(w)
            for pid in pids:
                os.waitpid(pid, 0)
    def allocate():
        block = bytearray(3 << 30)
        return len(block)
    def fill_disk():  # files under the per-file limit, more of them than the cap allows
        for i in range(100):
            with open("filler%d" % i, "wb") as f:
                f.write(bytes(1 << 20))
    def share_ipc():
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        shared = libc.shmget({shm_key}, 0, 0) >= 0  # the grader's own segment, found by its key
        key = libc.syscall(248 if os.uname().machine == "x86_64" else 217, b"user", b"attn-kata-doctor", b"x",
                           1, -4)  # add_key to the user keyring (shared by every process of this uid)
        return shared or key >= 0 or False
    def hold_memory_in_children():
        import select, time
        pids, got, dead = [], 0, set()
        r, w = os.pipe()
        release_r, release_w = os.pipe()  # closed to end the children: a worker signals no process but itself
        for _ in range(5):
            pid = os.fork()
            if pid == 0:
                os.close(release_w)
                block = bytearray(400 << 20)
                block[::4096] = b"x" * len(block[::4096])
                os.write(w, b"1")
                select.select([release_r], [], [], 30)
                os._exit(0)
            pids.append(pid)
        os.close(w)
        os.close(release_r)
        def reap():  # the children that died (the OOM killer's victims), each reaped once
            dead.update(p for p in pids if p not in dead and os.waitpid(p, os.WNOHANG)[0])
        deadline = time.monotonic() + 20
        while got < 5 and len(dead) < 5 and time.monotonic() < deadline:
            if select.select([r], [], [], 0.2)[0]:
                data = os.read(r, 16)
                if not data:
                    break
                got += len(data)
            reap()
        reap()
        # held only if all five live at once: the OOM killer may take a child that had already reported its pages
        held = got == 5 and not dead
        os.close(release_w)
        for pid in pids:
            if pid not in dead:
                os.waitpid(pid, 0)
        return held or False
    def chown_own_file():
        open("mine.txt", "w").close()
        os.chown("mine.txt", 4242, 4242)
    def see_processes():
        others = [e for e in os.listdir("/proc") if e.isdigit() and int(e) != os.getpid()]
        return bool(others) or open("/proc/{grader_pid}/cmdline", "rb").read()
    def find_reference():
        needles = [bytes(n) for n in {ref_needles!r}]
        return bool(_hunt(needles, __name__)) or False
    def find_secret():
        needles = [bytes({secret_needle!r})]
        hits = _hunt(needles, __name__)
        if _peek({grader_pid}, needles[0]):
            hits.append("mem")
        for pid in ("{grader_pid}", "1", "self"):
            for part in ("cmdline", "environ"):
                try:
                    if needles[0] in open(f"/proc/{{pid}}/{{part}}", "rb").read():
                        hits.append(part)
                except OSError:
                    pass
        return bool(hits) or False
    def change_own_file():  # outside its folder, owned by its own uid: seccomp, never Landlock, stops this
        done = []
        for name, change in (("chmod", lambda: os.chmod({owned!r}, 0o777)),
                             ("chown", lambda: os.chown({owned!r}, -1, os.getegid())),  # to a group of its own
                             ("utime", lambda: os.utime({owned!r}, (0, 0))),
                             ("setxattr", lambda: os.setxattr({owned!r}, "user.attn_kata", b"x"))):
            try:
                change()
                done.append(name)
            except OSError:
                pass
        return bool(done) or False
    def take_locks():  # any file it may read can carry a lock a classmate reads: take one, or read another's
        import fcntl, struct
        got = []
        fd = os.open({lock_file!r}, os.O_RDONLY)
        rd, wr = (struct.pack("hhqqi", t, 0, 0, 0, 0) for t in (fcntl.F_RDLCK, fcntl.F_WRLCK))
        for name, lock in (("posix", lambda: fcntl.fcntl(fd, fcntl.F_SETLK, rd)),
                           ("ofd", lambda: fcntl.fcntl(fd, 37, rd)),  # F_OFD_SETLK
                           ("flock", lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
                           ("getlk", lambda: fcntl.fcntl(fd, fcntl.F_GETLK, wr)),  # a classmate's lock, seen
                           ("ofd_getlk", lambda: fcntl.fcntl(fd, 36, wr))):
            try:
                lock()
                got.append(name)
            except OSError:
                pass
        os.close(fd)
        return bool(got) or False
    def refused_ioctls():  # refused by number: EPERM, never ENOTTY (no tty here) nor success
        import errno, fcntl, struct
        got = []
        open("flags.txt", "w").close()
        null, own = os.open("/dev/null", os.O_RDONLY), os.open("flags.txt", os.O_RDONLY)
        for fd, cmd, arg in ((null, 0x5412, b"x"), (null, 0x541C, b"x"),  # TIOCSTI, TIOCLINUX
                             (own, 0x40086602, struct.pack("l", 0x40))):  # FS_IOC_SETFLAGS: nodump
            try:
                fcntl.ioctl(fd, cmd, arg)
                got.append(cmd)
            except OSError as e:
                if e.errno != errno.EPERM:
                    got.append(cmd)
        os.close(null)
        os.close(own)
        return bool(got) or False
    def make_ipc():  # mode 666 objects a classmate could attach where no IPC namespace holds them
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        made = []
        for get, rm in ((lambda: libc.shmget(0, 4096, 0o1666), lambda i: libc.shmctl(i, 0, None)),  # IPC_PRIVATE
                        (lambda: libc.msgget(0, 0o1666), lambda i: libc.msgctl(i, 0, None))):  # IPC_RMID after
            i = get()
            if i >= 0:
                made.append(i)
                rm(i)
        return bool(made) or False
    def change_grader_process():  # as it is already (harmless): its limits, nice value, CPUs; a classmate's likewise
        grader = {grader_pid}
        core = resource.prlimit(grader, resource.RLIMIT_CORE)
        resource.prlimit(grader, resource.RLIMIT_CORE, core)
        os.setpriority(os.PRIO_PROCESS, grader, os.getpriority(os.PRIO_PROCESS, grader))
        os.sched_setaffinity(grader, os.sched_getaffinity(grader))
    def read_outside():  # a kata file, and the terminal of the grader's user (what is typed there)
        reached = []
        for path in ({kata_file!r}, {terminal!r}):
            try:
                os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY))
                reached.append(path)
            except OSError:
                pass
        return bool(reached) or False
    def reach_grader_socket():
        reached = []
        for fd in range(3, 1024):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode) and fd != CHANNEL:
                    reached.append(fd)
            except OSError:
                pass
        for address in ({abstract!r}, {pathname!r}):
            for make in (lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), uring_socket):
                try:
                    s = make()
                    s.connect(address)
                    reached.append(address)
                except OSError:
                    pass
        try:  # one end of a datagram pair re-connects to any datagram socket by its path
            mine, _other = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            mine.connect({datagram!r})
            reached.append({datagram!r})
        except OSError:
            pass
        return bool(reached) or False
    # first, while the worker is small: the memory hunts below page in what they read of its own memory (torch's
    # libraries), and the memory cgroup's OOM killer would then pick the worker itself, not the children
    only = {only!r}  # the rows to attack, by index (None: every row; a test's way to run one layer's attacks)
    tree_capped = blocked(hold_memory_in_children) if only is None or {tree_row} in only else 0.0
    attacks = [
        lambda: blocked(lambda: socket.create_connection(("127.0.0.1", {port}), timeout=1).close()),
        lambda: blocked(read_outside),
        lambda: blocked(lambda: open({outside!r}, "w").write("x")),
        lambda: blocked(lambda: os.kill({grader_pid}, 0)),
        lambda: blocked(fork_many),
        lambda: blocked(allocate),
        lambda: float(resource.getrlimit(resource.RLIMIT_CORE)[0] == 0
                      and __import__("ctypes").CDLL(None).prctl(3, 0, 0, 0, 0) == 0),  # PR_GET_DUMPABLE
        lambda: float(os.getuid() != 0),
        lambda: blocked(lambda: os.chmod({graders_file!r}, 0o4777)),
        lambda: blocked(chown_own_file),
        lambda: blocked(see_processes),
        lambda: blocked(find_reference),
        lambda: blocked(find_secret),
        lambda: blocked(reach_grader_socket),
        lambda: blocked(fill_disk),
        lambda: blocked(share_ipc),
        lambda: tree_capped,
        lambda: float(os.getsid(0) == os.getpid()),
        lambda: float(os.stat(".").st_uid == os.geteuid() and not os.stat(".").st_mode & 0o077),
        lambda: float(set(os.environ) <= set({worker_env!r})),
        lambda: blocked(change_own_file),
        lambda: blocked(take_locks),
        lambda: blocked(refused_ioctls),
        lambda: blocked(make_ipc),
        lambda: blocked(change_grader_process),
    ]
    return torch.tensor([attack() if only is None or i in only else 0.0 for i, attack in enumerate(attacks)])

def _channel_fd():
    # the one socket a worker legitimately holds: its channel to the grader (open before this module ran)
    import gc
    for obj in gc.get_objects():
        if isinstance(obj, socket.socket) and obj.fileno() >= 0:
            return obj.fileno()
    return -1

CHANNEL = _channel_fd()
'''


@dataclass(frozen=True)
class Layer:
    name: str
    claimed_by: tuple[str, ...]  # the worker's self-observed layers (grader.sandbox.confine.LAYERS) that provide it
    attack: str

    @property
    def required(self) -> bool:
        """Needed for instructor grading on a shared class host (a secret given): it proves a need of the policy
        table (grader.sandbox.policy), which the gate checks too."""
        return self.name in policy.required_rows("host")


LAYERS = (
    Layer("no TCP (network namespace, Landlock or seccomp)",
          ("network_namespace", "landlock_no_tcp", "seccomp_no_sockets"),
          "connect to a port the grader listens on"),
    Layer("kata files unreadable (Landlock)", ("landlock_filesystem",),
          "read solutions/ from disk; open a terminal of the grader's user (/dev/pts)"),
    Layer("writes only in its own folder (Landlock)", ("landlock_filesystem",), "write a file outside its folder"),
    Layer("cannot signal the grader (PID namespace, Landlock scope or seccomp)",
          ("pid_namespace", "landlock_signal_scope", "seccomp_no_signals_out"), "send a signal to the grader process"),
    Layer("process count capped (pids cgroup or RLIMIT_NPROC)", ("pids_cgroup", "unprivileged_user"),
          "fork 64 processes"),
    Layer("memory limit (RLIMIT_AS)", ("rlimits",), "allocate 3 GiB"),
    Layer("no core dumps", ("not_dumpable",),
          "read its core-size limit and whether it is dumpable (a core_pattern pipe ignores that limit)"),
    Layer("not running as root", ("unprivileged_user",), "read its uid"),
    Layer("owns nothing outside its folder (another uid, or seccomp)",
          ("owns_nothing_outside", "seccomp_no_file_changes"), "chmod 04777 a file of the grader's user"),
    Layer("no capabilities", ("no_capabilities", "unprivileged_user"), "chown its own file to another user"),
    Layer("other processes invisible (PID namespace, /proc hidden)", ("pid_namespace", "landlock_filesystem"),
          "list /proc, read the grader's /proc/PID/cmdline"),
    Layer("the reference is unreachable", ("no_reference",),
          "look for the reference in sys.modules, gc, linecache and its own memory"),
    Layer("the secret is unreachable", ("landlock_filesystem", "pid_namespace"),
          "look for the secret in its own memory and in /proc/*/cmdline, environ"),
    Layer("no grader socket is reachable", ("seccomp_no_sockets",),
          "use an inherited socket; connect to a grader's Unix socket by path and in the abstract namespace, with a "
          "socket from socket(2) and one from io_uring; re-connect one end of a datagram socketpair"),
    Layer("disk use capped (private tmpfs, or no file writes)", ("private_tmpfs", "landlock_no_file_writes"),
          "write 100 files of 1 MiB (each under the file-size limit)"),
    Layer("nothing shared with other workers (IPC namespace, no keyrings)", ("ipc_namespace", "seccomp_no_ipc"),
          "create System V shared memory and a key in the user keyring"),
    Layer("memory capped for the whole process tree (memory cgroup)", ("memory_cgroup",),
          "hold 5 × 400 MiB in forked children"),
    Layer("session", ("session",), "read its session id"),
    Layer("private dir", ("private_dir",), "stat its working folder (owner, mode)"),
    Layer("clean env", ("clean_env",), "read its environment"),
    # what Landlock does not mediate and no uid stops: seccomp refuses the calls (grader/sandbox/seccomp.py)
    Layer("its uid's files outside its folder keep mode, owner, times, xattrs (seccomp)", ("seccomp_no_file_changes",),
          "chmod, chown, utime and setxattr a file outside its folder that its own uid owns"),
    Layer("no file locks, taken or read (seccomp)", ("seccomp_no_file_changes",),
          "take a POSIX record lock, an OFD lock and a flock on a file it may read; read the locks there "
          "(F_GETLK, F_OFD_GETLK)"),
    Layer("no tty input or inode-flag ioctls (seccomp)", ("seccomp_no_file_changes",),
          "TIOCSTI and TIOCLINUX on /dev/null, FS_IOC_SETFLAGS on its own file: each refused by number (EPERM)"),
    Layer("no System V or POSIX IPC at all (seccomp)", ("seccomp_no_ipc",),
          "create a System V shared memory segment and a message queue, mode 666"),
    Layer("cannot change another process's limits or scheduling (PID namespace or seccomp)",
          ("pid_namespace", "seccomp_no_process_changes"),
          "prlimit, setpriority and sched_setaffinity on the grader (each set to what it already is)"),
)


def _needles() -> list[list[int]]:
    """What only the reference holds: the bytecode of its forward passes and a line of its source."""
    ns = reference.namespace()
    codes = [ns[n].forward.__code__.co_code for n in ("CausalAttention", "MultiHeadAttention")]
    source = step_path(reference.solutions_dir(), BY_ID["causal_attention"]).read_text()
    line = next(ln.strip() for ln in source.splitlines() if "masked_fill_" in ln)
    return [list(c) for c in codes] + [list(line.encode())]


def _control(needles: list[list[int]], secret: bytes) -> tuple[bool, bool]:
    """The same hunts, run here, where the reference and the secret are: do they find them?"""
    scope: dict[str, Any] = {"REF_NAMES": tuple(reference.namespace())}
    exec(HUNT, scope)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # touching every module's namespace wakes deprecation warnings
        found_ref = bool(scope["_hunt"]([bytes(n) for n in needles], "__no_module__"))
        found_secret = bool(scope["_hunt"]([secret], "__no_module__"))
    pid = os.fork()  # and from another, unconfined process: through /proc/PID/mem
    if pid == 0:
        os._exit(0 if scope["_peek"](os.getppid(), secret) else 1)
    _, status = os.waitpid(pid, 0)
    return found_ref, found_secret and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _metadata(path: str) -> tuple[Any, ...]:
    """What a worker must not change of a file outside its folder: mode, owner, times, extended attributes."""
    st = os.stat(path)
    try:
        xattrs = sorted((n, os.getxattr(path, n)) for n in os.listxattr(path))
    except OSError:
        xattrs = []
    return st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_atime_ns, xattrs


def diagnose(secret: str | None = None, config: dict[str, Any] | None = None,
             only: Collection[str] | None = None) -> list[tuple[str, bool, bool, str]]:
    """Rows of (layer, claimed, verified, attack). `secret` (default: a fresh canary) is held by this process
    while the worker looks for it. `config` goes to the worker (the tests leave layers off with it). `only`: the
    names of the layers whose attacks run, and whose rows come back (a test's, to try one layer left off without
    every other attack; the CLI runs them all)."""
    unknown = set(only or ()) - {layer.name for layer in LAYERS}
    if unknown:
        raise ValueError(f"no such layer: {sorted(unknown)}")
    picked = None if only is None else sorted(i for i, layer in enumerate(LAYERS) if layer.name in only)
    tree_row = next(i for i, layer in enumerate(LAYERS) if layer.name.startswith("memory capped for the whole"))
    canary = secret or "attn-kata-canary-" + os.urandom(12).hex()
    held = [canary.encode()]  # kept alive in this process's memory for the hunt
    needles = _needles()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    abstract = "\0attn-kata-doctor-" + os.urandom(6).hex()
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(abstract)
    unix.listen(1)
    libc = ctypes.CDLL(None, use_errno=True)
    shm_key = int.from_bytes(os.urandom(3), "big") | 0x40000000
    shm = libc.shmget(shm_key, 4096, 0o1600)  # IPC_CREAT: a segment a worker must not be able to find
    outside_dir = tempfile.mkdtemp(prefix="attn-kata-doctor-")
    os.chmod(outside_dir, 0o777)
    outside = os.path.join(outside_dir, "escaped.txt")
    graders_file = os.path.join(outside_dir, "graders.txt")  # this user's file, in a folder anyone may search
    with open(graders_file, "w"):
        pass
    os.chmod(graders_file, 0o644)
    owned = os.path.join(outside_dir, "owned.txt")  # given to the worker's uid once it is known (below)
    with open(owned, "w"):
        pass
    os.chmod(owned, 0o644)
    os.utime(owned, (1_000_000_000, 1_000_000_000))
    pathname = os.path.join(outside_dir, "grader.sock")  # a socket file any process could find and open
    by_path = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    by_path.bind(pathname)
    os.chmod(pathname, 0o777)
    by_path.listen(1)
    terminal_fds = pty.openpty()  # a terminal of this user's, as the one an instructor runs a batch in
    datagram = os.path.join(outside_dir, "grader.dgram")
    by_datagram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    by_datagram.bind(datagram)
    os.chmod(datagram, 0o777)
    src = PROBE.format(hunt=HUNT, ref_names=tuple(reference.namespace()), ref_needles=needles,
                       secret_needle=list(held[0]), port=listener.getsockname()[1],
                       kata_file=str(step_path(reference.solutions_dir(), BY_ID["dot_scores"])), outside=outside,
                       graders_file=graders_file, owned=owned, lock_file=os.__file__,
                       grader_pid=os.getpid(), abstract=abstract, pathname=pathname, datagram=datagram, shm_key=shm_key,
                       terminal=os.ttyname(terminal_fds[1]), only=picked, tree_row=tree_row,
                       # the names confine() leaves a worker, and nothing else (confine._clean_env)
                       worker_env=sorted(set(WORKER_ENV) | {"HOME", "TMPDIR"} | set(work_caches("."))))
    # the confinement that grading with a secret on a class host gets (engine.worker_config): no file writes where
    # no tmpfs can be mounted
    worker = Worker([("doctor", "doctor.py", textwrap.dedent(src))], {"no_file_writes": True, **(config or {})})
    try:
        layers = worker.confined(60)
        # its own uid's file: nobody's where a root grader's worker became nobody, else the grader's uid (kept)
        from grader.sandbox.confine import NOBODY

        os.chown(owned, NOBODY if os.geteuid() == 0 and layers.get("unprivileged_user") else os.geteuid(), -1)
        kept = _metadata(owned)
        worker.hello(60)
        case = Case("call", {"inputs": torch.zeros(1, 1), "query": torch.zeros(1)},
                    {"fn": "attention_scores", "args": ["inputs", "query"], "consts": [], "grad": False,
                     "repeat": 1})
        tensors, _ = worker.ask(request(BY_ID["dot_scores"], {"probe": case}), 120)
        flags = tensors.get("probe/out", torch.zeros(len(LAYERS))).tolist()
    finally:
        worker.close()
        listener.close()
        unix.close()
        by_path.close()
        by_datagram.close()
        for fd in terminal_fds:
            os.close(fd)
        if shm >= 0:
            libc.shmctl(shm, 0, None)  # IPC_RMID
    escaped = os.path.exists(outside)
    chmodded = os.stat(graders_file).st_mode & 0o7777 != 0o644
    changed = _metadata(owned) != kept  # seen from here too, whatever the worker's flag says
    shutil.rmtree(outside_dir, ignore_errors=True)
    hunted = only is None or any(name.startswith(("the reference", "the secret")) for name in only)
    potent_ref, potent_secret = _control(needles, held[0]) if hunted else (False, False)
    # layers no flag of the worker's can claim: they are what the attacks show
    layers = {**layers, "no_reference": True}
    rows = []
    for layer, flag in zip(LAYERS, flags, strict=False):
        verified = bool(flag) and not (escaped and "writes" in layer.name) and not (chmodded and "owns" in layer.name) \
            and not (changed and "keep mode" in layer.name)
        if layer.name.startswith("the reference"):
            verified = verified and potent_ref
        if layer.name.startswith("the secret"):
            verified = verified and potent_secret
        if only is None or layer.name in only:
            rows.append((layer.name, any(layers.get(k) for k in layer.claimed_by), verified, layer.attack))
    return rows


def missing_required(rows: list[tuple[str, bool, bool, str]], context: str = "host") -> list[str]:
    """The layers instructor grading needs in `context` (the policy table's rows) that are not active here."""
    required = set(policy.required_rows(context))
    return [name for name, claimed, verified, _ in rows if name in required and not (claimed and verified)]
