"""A seccomp filter for a worker, installed whatever its uid and whatever capabilities it kept: the calls that
change (or, for locks, read) what lies outside the worker and that Landlock does not mediate fail.

Landlock decides which files a worker may open, create, remove or write, but not these:

- sockets: connecting to a Unix socket by its path is not one of the accesses Landlock handles, so a socket file
  that another program left reachable (a container engine's, a desktop bus's) would stay usable; a worker has no
  need to create any socket, so `socket(2)` and `socketpair(2)` (a datagram end can `connect()` by path) fail
  with EACCES. io_uring fails too (EACCES): its IORING_OP_SOCKET makes a socket without calling socket(2), which
  the filter never sees (a confined worker reached a warm daemon's socket that way). So do the kernel keyrings
  (a worker of a uid shares that uid's user keyring with every other process of it).
- a file's metadata, by its owner, who needs no capability for it: chmod, chown (to a group of its own),
  utime, extended attributes; and ioctls that change a tty's input (TIOCSTI, TIOCLINUX) or an inode's flags,
  project id or generation (FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR, FS_IOC_SETVERSION). Where a worker runs as the
  grader's uid (a grader that is not root) it owns the grader's files; a worker as uid 0 owns root's.
- file locks, taken or read: flock, POSIX record locks and open file description locks (fcntl F_SETLK, F_GETLK,
  F_OFD_*), leases and directory notifications (F_SETLEASE, F_GETLEASE, F_NOTIFY). Any readable file can carry a
  lock: POSIX record locks on /etc/passwd carried a reference from one worker to a classmate graded at the same
  time (docs/design.md §4), so reading another process's locks (F_GETLK) fails as well as taking one.
- System V and POSIX IPC: without an IPC namespace (a grader that is not root) a worker could leave a mode-666
  shared memory segment or message queue for a classmate's worker.
- another process of its uid (a grader that is not root has no PID namespace to hide it): its limits (prlimit64),
  nice value, scheduling, CPUs and I/O priority; each of these calls is allowed on pid 0, the worker itself, only.
- what a worker never needs and confine() has done already (namespaces and mounts, before this filter) or no
  worker may do: ptrace, process_vm_readv/writev, pidfd_getfd, process_madvise, name_to_handle_at,
  open_by_handle_at, bpf, perf_event_open, userfaultfd, mount and the new mount API, pivot_root, setns, unshare,
  kexec and module loading; memfd_create and memfd_secret (pages that no rlimit, disk cap or OOM killer counts:
  red team 14 held 1.2 GiB past a worker's address-space limit); execve and execveat (an exec'd program is
  dumpable again, and a core_pattern pipe would run its helper as root on it); the futex2 calls; setsid and
  setpgid (a worker is the leader of its own session and process group, and every descendant stays in that
  group, which the zygote kills whole when the worker ends: where a grader that is not root has no PID namespace
  or cgroup, this is what ends a fork bomb).
- a signal to any process but the worker itself and its own process group (kill, tkill, tgkill, rt_sigqueueinfo,
  rt_tgsigqueueinfo; pidfd_send_signal not at all): where a grader is not root there is no PID namespace, and
  before Linux 6.12 Landlock cannot scope signals, so a worker of the grader's uid could kill a classmate's worker
  or the grader itself (`os.kill(-1, SIGKILL)`: red team 15). Nor may it make itself a file's owner's signaller:
  fcntl F_SETOWN, F_SETOWN_EX, F_SETSIG, F_SETFL with O_ASYNC, ioctl FIOSETOWN, SIOCSPGRP and FIOASYNC fail (the
  kernel sends SIGIO, or any signal F_SETSIG names, to the owner, any process of the uid: red team 16 killed its
  parent, the grading process, that way). The worker's own pid is written into the program
  as it installs it (install(): the program is assembled once, in the zygote, with a placeholder); kill(0, ...)
  (its own group: the worker and its descendants) and kill(-pid, ...) pass, and so does signal 0 to itself.
- clone with a namespace flag (a user namespace's child holds every capability there: kernel attack surface), and
  clone3, whose flags lie in memory a filter cannot read (ENOSYS: glibc falls back to clone, as with Docker's
  profile); futex without FUTEX_PRIVATE_FLAG: a shared futex is keyed by the inode of the page, so two workers
  mapping the same file (any library every worker loaded) could wake each other, a channel between classmates
  graded at once (red team 14). Python, glibc and torch use private futexes only.

Denied calls return EPERM (EACCES for sockets, keyrings and io_uring, as before); nothing is killed. Syscalls of a
foreign ABI (i386 `int 0x80`, x32) fail entirely, so `socketcall` or a 32-bit `chmod` cannot go around the filter.
fcntl's and ioctl's command is `unsigned int` in the kernel (SYSCALL_DEFINE3(fcntl, unsigned int, fd, unsigned int,
cmd, ...)): only the low 32 bits of the argument count, so only they are compared (comparing the upper half too
would let a command with junk in it through). Raw prctl/seccomp(2) and a short hand-assembled BPF program, no
library needed; installed on every thread (SECCOMP_FILTER_FLAG_TSYNC), inherited by every child.
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "the Linux backend's own module"  # the type checker skips it elsewhere

import ctypes
import errno
import os
import platform
from typing import NamedTuple

from grader.sandbox.landlock import libc

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
X32_SYSCALL_BIT = 0x40000000
OFF_NR, OFF_ARCH, OFF_ARGS = 0, 4, 16  # struct seccomp_data; 8 bytes an argument, little endian: its low word first
OFF_ARG0_LOW, OFF_ARG1_LOW, OFF_ARG2_LOW = OFF_ARGS, OFF_ARGS + 8 * 1, OFF_ARGS + 8 * 2
# clone(2)'s namespace flags (its first argument on both arches): CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC,
# NEWUSER, NEWPID, NEWNET. clone3 passes its flags in memory, which a filter cannot read: it fails with ENOSYS,
# so glibc falls back to clone (as Docker's profile does)
CLONE_NEW = 0x80 | 0x20000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
CLONE3 = 435
FUTEX_PRIVATE_FLAG = 128

# fcntl commands: F_GETLK, F_SETLK, F_SETLKW (the same numbers as their 64-bit forms on 64-bit arches), the open file
# description locks, leases and directory notification
FCNTL_DENIED = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)
# ioctl commands (the same on x86_64 and aarch64): TIOCSTI, TIOCLINUX, FS_IOC_SETFLAGS and FS_IOC32_SETFLAGS,
# FS_IOC_FSSETXATTR, FS_IOC_SETVERSION and FS_IOC32_SETVERSION
IOCTL_DENIED = (0x5412, 0x541C, 0x40086602, 0x40046602, 0x401C5820, 0x40087602, 0x40047602)
# a file's owner is whom the kernel signals when it is ready (SIGIO, or the signal F_SETSIG names): any process of
# the worker's uid, the grader itself included (red team 16: F_SETOWN to getppid(), F_SETSIG SIGKILL, O_ASYNC, one
# write). fcntl F_SETOWN, F_SETSIG, F_SETOWN_EX; F_SETFL with O_ASYNC; ioctl FIOSETOWN, SIOCSPGRP, FIOASYNC
FCNTL_SIGNALS = (8, 10, 15)
F_SETFL, O_ASYNC = 4, 0o20000
IOCTL_SIGNALS = (0x8901, 0x8902, 0x5452)


class Table(NamedTuple):
    """One architecture's numbers. aarch64 (the generic table) lacks the legacy path calls (chmod, chown, lchown,
    utime, utimes, futimesat): it has only their *at forms."""
    audit_arch: int
    seccomp: int  # __NR_seccomp
    fcntl: int
    ioctl: int
    sockets: tuple[int, ...]  # socket, socketpair
    keyring: tuple[int, ...]  # add_key, request_key, keyctl
    metadata: tuple[int, ...]  # chmod, chown, utime and xattr families, flock
    ipc: tuple[int, ...]  # System V shm, sem, msg; POSIX mq
    never: tuple[int, ...]  # what a worker never needs (see the module's docstring)
    clone: int  # allowed without namespace flags
    futex: int  # allowed on private futexes only
    memfd_create: int  # a witness of observed() (denied among `never`)
    # calls observed() makes with harmless arguments: fchmod, fchownat, utimensat, fsetxattr, flock, shmget, msgctl,
    # mq_getsetattr
    witnesses: tuple[int, int, int, int, int, int, int, int]
    # calls allowed on the worker itself only: (nr, ((argument, value), ...)), each argument's low 32 bits
    self_only: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]
    # kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo: their first argument names the worker (or, for
    # kill, its own group: 0 or -pid)
    signals: tuple[int, int, int, int, int]


def _self_only(prlimit64: int, setpriority: int, sched: tuple[int, ...], ioprio_set: int
               ) -> tuple[tuple[int, tuple[tuple[int, int], ...]], ...]:
    """What a process may do to another of its uid without a capability, and Landlock does not scope (it scopes
    signals and ptrace): lower its limits (prlimit64: RLIMIT_CPU 1 for a classmate's worker), renice it, pin it
    to one CPU or make it SCHED_IDLE (a classmate's time-out). Only pid 0, this process, is allowed: glibc's
    setrlimit and getrlimit, os.nice and os.sched_setaffinity(0, ...) all pass 0. setpriority and ioprio_set
    also take PRIO_USER / IOPRIO_WHO_USER, where who 0 means every process of the uid: only PRIO_PROCESS (0) and
    IOPRIO_WHO_PROCESS (1) pass."""
    return ((prlimit64, ((0, 0),)), (setpriority, ((0, 0), (1, 0))), *((nr, ((0, 0),)) for nr in sched),
            (ioprio_set, ((0, 1), (1, 0))))


# the same number on every arch (new since 5.1): io_uring_setup/enter/register; fchmodat2, setxattrat,
# removexattrat; open_tree, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr, open_tree_attr,
# pidfd_getfd, process_madvise
IO_URING = (425, 426, 427)
NEW_METADATA = (452, 463, 466)
NEW_NEVER = (428, 429, 430, 431, 432, 433, 442, 467, 438, 440,
             447, 449, 454, 455, 456,  # memfd_secret; futex_waitv, futex_wake, futex_wait, futex_requeue
             424)  # pidfd_send_signal: a pidfd may name any process (pidfd_open needs no relation to it)
# placeholders for the worker's pid and its negation (its process group, for kill), above PID_MAX_LIMIT: install()
# writes the real values; uninstalled, the program (as the tests read it) allows only pid 0 (its own group)
SELF_PID, SELF_GROUP = 0x3FFFFFF1, 0x3FFFFFF2

ARCHES = {
    # arch/x86/entry/syscalls/syscall_64.tbl
    "x86_64": Table(
        0xC000003E, 317, 72, 16,
        sockets=(41, 53), keyring=(248, 249, 250),
        # chmod fchmod fchmodat, chown fchown lchown fchownat, utime utimes futimesat utimensat, setxattr lsetxattr
        # fsetxattr removexattr lremovexattr fremovexattr, flock
        metadata=(90, 91, 268, 92, 93, 94, 260, 132, 235, 261, 280, 188, 189, 190, 197, 198, 199, 73, *NEW_METADATA),
        # shmget shmat shmctl shmdt, semget semop semctl semtimedop, msgget msgsnd msgrcv msgctl,
        # mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr
        ipc=(29, 30, 31, 67, 64, 65, 66, 220, 68, 69, 70, 71, 240, 241, 242, 243, 244, 245),
        # ptrace, process_vm_readv/writev, name_to_handle_at open_by_handle_at, bpf, perf_event_open, userfaultfd,
        # mount umount2 pivot_root, setns unshare, kexec_load kexec_file_load, init_module finit_module delete_module
        # inotify_init inotify_add_watch inotify_init1 fanotify_init fanotify_mark: watching shared folders (which
        # file the grading process opens, a classmate's work dir appearing) goes around Landlock (red team 13);
        # setsid setpgid: a descendant stays in the worker's process group, which the zygote kills whole
        never=(101, 310, 311, 303, 304, 321, 298, 323, 165, 166, 155, 308, 272, 246, 320, 175, 313, 176, *NEW_NEVER,
               253, 254, 294, 300, 301, 112, 109,
               # memfd_create: pages no rlimit, disk cap or OOM killer counts; execve execveat: an exec'd program
               # is dumpable again (a core_pattern pipe would run its helper as root on it)
               319, 59, 322),
        clone=56, futex=202, memfd_create=319,
        witnesses=(91, 260, 280, 190, 73, 29, 71, 245),
        # prlimit64, setpriority, sched_setparam sched_setscheduler sched_setaffinity sched_setattr, ioprio_set
        self_only=_self_only(302, 141, (142, 144, 203, 314), 251),
        signals=(62, 200, 234, 129, 297)),
    # include/uapi/asm-generic/unistd.h
    "aarch64": Table(
        0xC00000B7, 277, 25, 29,
        sockets=(198, 199), keyring=(217, 218, 219),
        # fchmod fchmodat, fchown fchownat, utimensat, setxattr lsetxattr fsetxattr removexattr lremovexattr
        # fremovexattr, flock
        metadata=(52, 53, 55, 54, 88, 5, 6, 7, 14, 15, 16, 32, *NEW_METADATA),
        ipc=(194, 196, 195, 197, 190, 193, 191, 192, 186, 189, 188, 187, 180, 181, 182, 183, 184, 185),
        never=(117, 270, 271, 264, 265, 280, 241, 282, 40, 39, 41, 268, 97, 104, 294, 105, 273, 106, *NEW_NEVER,
               # inotify_init1 inotify_add_watch fanotify_init fanotify_mark, setsid setpgid, memfd_create, execve
               # execveat
               26, 27, 262, 263, 157, 154, 279, 221, 281),
        clone=220, futex=98, memfd_create=279,
        witnesses=(52, 54, 88, 7, 32, 194, 187, 185),
        self_only=_self_only(261, 140, (118, 119, 122, 274), 30),
        signals=(129, 130, 131, 138, 240)),
}


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program(table: Table) -> list[tuple[int, int, int, int]]:
    """The BPF program, as (code, jt, jf, k). Jumps name labels while it is built; each is then resolved to an
    offset, which must fit BPF's 8 bits."""
    eacces, eperm, fcntl, ioctl = "eacces", "eperm", "fcntl", "ioctl"
    code: list[tuple[int, object, object, int] | str] = [
        (LD_W_ABS, 0, 0, OFF_ARCH),
        (JEQ_K, 1, 0, table.audit_arch),
        (RET_K, 0, 0, RET_ERRNO | errno.EPERM),  # a foreign ABI: nothing at all
        (LD_W_ABS, 0, 0, OFF_NR),
        (JGE_K, 0, 1, X32_SYSCALL_BIT),
        (RET_K, 0, 0, RET_ERRNO | errno.EPERM),  # x32 calls
    ]
    code += [(JEQ_K, eacces, 0, nr) for nr in (*table.sockets, *table.keyring, *IO_URING)]
    code += [(JEQ_K, eperm, 0, nr) for nr in (*table.metadata, *table.ipc, *table.never)]
    code += [(JEQ_K, fcntl, 0, table.fcntl), (JEQ_K, ioctl, 0, table.ioctl)]
    code += [(JEQ_K, f"self {nr}", 0, nr) for nr, _ in table.self_only]
    code += [(JEQ_K, "clone", 0, table.clone), (JEQ_K, "futex", 0, table.futex), (JEQ_K, "enosys", 0, CLONE3)]
    kill, *to_self = table.signals
    code += [(JEQ_K, "kill", 0, kill), *((JEQ_K, "signal", 0, nr) for nr in to_self)]
    code.append((RET_K, 0, 0, RET_ALLOW))
    # a signal: to itself (pid_t is 32 bits: the low word), or, by kill, to its own group (0 or -pid); else EPERM
    code += ["kill", (LD_W_ABS, 0, 0, OFF_ARG0_LOW), (JEQ_K, "allow", 0, 0), (JEQ_K, "allow", 0, SELF_GROUP),
             (JEQ_K, "allow", eperm, SELF_PID)]
    code += ["signal", (LD_W_ABS, 0, 0, OFF_ARG0_LOW), (JEQ_K, "allow", eperm, SELF_PID)]
    # a new namespace (a user namespace gives its child every capability there): EPERM; a plain fork or thread passes
    code += ["clone", (LD_W_ABS, 0, 0, OFF_ARG0_LOW), (JSET_K, eperm, "allow", CLONE_NEW)]
    # a shared futex is keyed by the inode of the page (any file, any library): a channel between two workers
    # graded at once; Python, glibc and torch use private ones only
    code += ["futex", (LD_W_ABS, 0, 0, OFF_ARG1_LOW), (JSET_K, "allow", eperm, FUTEX_PRIVATE_FLAG)]
    for label, commands in ((fcntl, (*FCNTL_DENIED, *FCNTL_SIGNALS)), (ioctl, (*IOCTL_DENIED, *IOCTL_SIGNALS))):
        code += [label, (LD_W_ABS, 0, 0, OFF_ARG1_LOW)]
        code += [(JEQ_K, eperm, 0, cmd) for cmd in commands]
        if label == fcntl:
            code.append((JEQ_K, "setfl", 0, F_SETFL))
        code.append((RET_K, 0, 0, RET_ALLOW))
    # F_SETFL: O_NONBLOCK and the rest pass; O_ASYNC (signals to the file's owner when it is ready) does not
    code += ["setfl", (LD_W_ABS, 0, 0, OFF_ARG2_LOW), (JSET_K, eperm, "allow", O_ASYNC)]
    for nr, conditions in table.self_only:  # every condition holds, or EPERM
        code.append(f"self {nr}")
        for i, (arg, value) in enumerate(conditions):
            last = i == len(conditions) - 1
            code += [(LD_W_ABS, 0, 0, OFF_ARGS + 8 * arg), (JEQ_K, "allow" if last else 0, eperm, value)]
    # BPF jumps forward only: every target lies after every test
    code += [eperm, (RET_K, 0, 0, RET_ERRNO | errno.EPERM), eacces, (RET_K, 0, 0, RET_ERRNO | errno.EACCES),
             "enosys", (RET_K, 0, 0, RET_ERRNO | errno.ENOSYS), "allow", (RET_K, 0, 0, RET_ALLOW)]
    at: dict[str, int] = {}  # each label: the index of the instruction after it
    n = 0
    for ins in code:
        if isinstance(ins, str):
            at[ins] = n
        else:
            n += 1
    out: list[tuple[int, int, int, int]] = []
    for ins in code:
        if not isinstance(ins, str):
            op, jt, jf, k = ins
            out.append((op, _offset(jt, at, len(out)), _offset(jf, at, len(out)), k))
    return out


def _offset(target: object, at: dict[str, int], here: int) -> int:
    """A jump's offset: to a label, counted from the instruction after this one; BPF holds it in 8 bits."""
    if isinstance(target, str):
        target = at[target] - here - 1
    if not (isinstance(target, int) and 0 <= target < 256):
        raise ValueError("a BPF jump too far")
    return target


TABLE = ARCHES.get(platform.machine())
# assembled once, at import (in the zygote): a worker only hands it to the kernel
_PROGRAM = program(TABLE) if TABLE else []
_FILTERS = (_Filter * len(_PROGRAM))(*[_Filter(*ins) for ins in _PROGRAM])
_PROG = _Prog(len(_PROGRAM), _FILTERS)
_SELF_AT = [i for i, ins in enumerate(_PROGRAM) if ins[0] == JEQ_K and ins[3] in (SELF_PID, SELF_GROUP)]


def self_values(pid: int) -> dict[int, int]:
    """What install() writes over each placeholder for a worker of `pid`. kill(-1) is every process, never the
    group of pid 1 (a worker alone in its PID namespace): there the group placeholder stays, matching no call."""
    return {SELF_PID: pid, SELF_GROUP: -pid & 0xFFFFFFFF if pid != 1 else SELF_GROUP}


def install() -> bool:
    """Set no_new_privs (a filter needs it without CAP_SYS_ADMIN) and install the filter on every thread of this
    process (and its future children), with this process's pid written in where a signal may go. False where the
    kernel or the architecture has none."""
    if TABLE is None:
        return False
    pid = os.getpid()  # as this process sees it (1 inside its own PID namespace), as its calls name it
    for i in _SELF_AT:
        _FILTERS[i].k = self_values(pid)[_PROGRAM[i][3]]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    r = libc.syscall(ctypes.c_long(TABLE.seccomp), ctypes.c_long(SECCOMP_SET_MODE_FILTER),
                     ctypes.c_long(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(_PROG))
    if r < 0 and ctypes.get_errno() in (errno.ENOSYS, errno.EINVAL):  # before 3.17, or no TSYNC
        r = libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(_PROG), 0, 0)
    return r == 0  # > 0: the id of a thread that could not be synchronised


NO_PID = 0x3FFFFFFF  # above PID_MAX_LIMIT (4 Mi): no process has it
PIDFD_SEND_SIGNAL = 424
_RLIMIT = (ctypes.c_uint64 * 2)()


def _at_no_pid(conditions: tuple[tuple[int, int], ...]) -> list[int]:
    """Arguments that meet every condition but the last, the pid (or who), which names no process."""
    args = [0, 0, 0, 0]
    for arg, value in conditions:
        args[arg] = value
    args[conditions[-1][0]] = NO_PID
    return args


def _errno_of(nr: int, *args: int) -> int:
    """The errno of a call that, unfiltered, fails harmlessly (a bad fd, a bad size): 0 if it succeeded."""
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return ctypes.get_errno() if r < 0 else 0


def observed() -> dict[str, bool]:
    """What this process can see of its own filter: calls that fail harmlessly without it (EBADF on fd -1,
    EAFNOSUPPORT for family -1, EINVAL for a 0-byte segment), and fail as the filter says with it."""
    layers = {"seccomp_no_sockets": False, "seccomp_no_file_changes": False, "seccomp_no_ipc": False,
              "seccomp_no_process_changes": False, "seccomp_no_signals_out": False}
    if TABLE is None:
        return layers
    t = TABLE
    fchmod, fchownat, utimensat, fsetxattr, flock, shmget, msgctl, mq_getsetattr = t.witnesses
    layers["seccomp_no_sockets"] = (_errno_of(t.sockets[0], -1, 0, 0) == errno.EACCES
                                    and _errno_of(t.sockets[1], -1, 0, 0, 0) == errno.EACCES
                                    and _errno_of(IO_URING[0], 0, 0) == errno.EACCES)
    layers["seccomp_no_file_changes"] = all(e == errno.EPERM for e in (
        _errno_of(fchmod, -1, 0),
        _errno_of(fchownat, -1, 0, -1, -1, 0),
        _errno_of(utimensat, -1, 0, 0, 0),
        _errno_of(fsetxattr, -1, 0, 0, 0, 0),
        _errno_of(NEW_METADATA[0], -1, 0, 0, 0),  # fchmodat2
        _errno_of(flock, -1, 0),
        *(_errno_of(t.fcntl, -1, cmd, 0) for cmd in FCNTL_DENIED),
        *(_errno_of(t.ioctl, -1, cmd, 0) for cmd in IOCTL_DENIED)))
    layers["seccomp_no_ipc"] = (_errno_of(shmget, 0, 0, 0) == errno.EPERM  # IPC_PRIVATE, 0 bytes: EINVAL unfiltered
                                and _errno_of(msgctl, -1, 2, 0) == errno.EPERM  # IPC_STAT of id -1
                                and _errno_of(mq_getsetattr, -1, 0, 0) == errno.EPERM
                                and _errno_of(t.memfd_create, 0, 0) == errno.EPERM  # name NULL: EFAULT unfiltered
                                # a shared FUTEX_WAKE at address NULL (EFAULT unfiltered); the private one passes
                                and _errno_of(t.futex, 0, 1, 0) == errno.EPERM
                                and _errno_of(t.futex, 0, 1 | FUTEX_PRIVATE_FLAG, 0) != errno.EPERM)
    # each aimed at a pid past any pid_max (ESRCH unfiltered, nothing changed); itself (pid 0) still allowed
    layers["seccomp_no_process_changes"] = all(_errno_of(nr, *_at_no_pid(conditions)) == errno.EPERM
                                               for nr, conditions in t.self_only) and _errno_of(
        t.self_only[0][0], 0, 4, 0, ctypes.addressof(_RLIMIT)) == 0  # prlimit64(0, RLIMIT_CORE, NULL, &old)
    # a signal to a pid past any pid_max, to every process (-1), by every signalling call: refused (ESRCH, or
    # success for -1, unfiltered); signal 0 to itself and to its own group passes
    kill, tkill, tgkill, sigqueue, tgsigqueue = t.signals
    me = os.getpid()
    layers["seccomp_no_signals_out"] = all(_errno_of(nr, *args) == errno.EPERM for nr, args in (
        (kill, (NO_PID, 0)), (kill, (-1, 0)), (kill, (-NO_PID, 0)), (tkill, (NO_PID, 0)), (tgkill, (NO_PID, NO_PID, 0)),
        (sigqueue, (NO_PID, 0, 0)), (tgsigqueue, (NO_PID, NO_PID, 0, 0)), (PIDFD_SEND_SIGNAL, (-1, 0, 0, 0)))
    ) and _errno_of(kill, me, 0) == 0 and _errno_of(kill, 0, 0) == 0 and (me == 1 or _errno_of(kill, -me, 0) == 0) \
        and _no_owner_signals(t)
    return layers


def _no_owner_signals(t: Table) -> bool:
    """No file can be given an owner to signal, or O_ASYNC (EBADF on fd -1 unfiltered); F_SETFL without it passes."""
    return (all(_errno_of(t.fcntl, -1, cmd, 0) == errno.EPERM for cmd in FCNTL_SIGNALS)
            and all(_errno_of(t.ioctl, -1, cmd, 0) == errno.EPERM for cmd in IOCTL_SIGNALS)
            and _errno_of(t.fcntl, -1, F_SETFL, O_ASYNC) == errno.EPERM
            and _errno_of(t.fcntl, -1, F_SETFL, 0) == errno.EBADF)
