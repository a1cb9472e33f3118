"""A seccomp filter for a worker: no new sockets at all (its one channel to the grader is inherited; neither
`socket(2)` nor `socketpair(2)`), no io_uring, and no kernel keyrings.

Landlock decides which files a worker may open, but connecting to a Unix socket by its path is not one of
the accesses it handles, so a socket file that another program left reachable (a container engine's,
a desktop bus's) would stay usable; a worker has no need to create any socket, so `socket(2)` fails
with EACCES. Syscalls of a foreign ABI (i386 `int 0x80`, x32) fail entirely, so `socketcall` cannot go
around the filter. io_uring fails too: its IORING_OP_SOCKET makes a socket without calling socket(2), which the
filter never sees (a confined worker reached a warm daemon's socket that way). Raw prctl and a short BPF program,
no library needed.
"""

from __future__ import annotations

import ctypes
import errno
import platform

from grader.sandbox.landlock import libc

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JGE_K, RET_K = 0x20, 0x15, 0x35, 0x06
X32_SYSCALL_BIT = 0x40000000
# machine -> (AUDIT_ARCH_*, (__NR_socket, __NR_socketpair), the kernel keyring's calls: add_key, request_key, keyctl).
# socketpair too: one end of a datagram pair can still connect() to any datagram socket by its path (syslog's,
# systemd's notify socket) and send there
ARCHES = {"x86_64": (0xC000003E, (41, 53), (248, 249, 250)), "aarch64": (0xC00000B7, (198, 199), (217, 218, 219))}
IO_URING = (425, 426, 427)  # io_uring_setup, io_uring_enter, io_uring_register: the same number on every arch


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def no_sockets() -> bool:
    """Install the filter on this process (and its future children). Needs no_new_privs already set."""
    arch = ARCHES.get(platform.machine())
    if arch is None:
        return False
    audit_arch, sockets, keyring = arch
    # keyrings: a uid-0 worker would share root's user keyring across workers; io_uring: sockets without socket(2)
    denied = (*sockets, *keyring, *IO_URING)
    program = [
        (LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (JEQ_K, 1, 0, audit_arch),
        (RET_K, 0, 0, RET_ERRNO | errno.EPERM),  # a foreign ABI: nothing at all
        (LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (JGE_K, 0, 1, X32_SYSCALL_BIT),
        (RET_K, 0, 0, RET_ERRNO | errno.EPERM),  # x32 calls
    ]
    for i, nr in enumerate(denied):  # each: if nr matches, jump to the EACCES return after the last test
        program.append((JEQ_K, len(denied) - i, 0, nr))
    program += [(RET_K, 0, 0, RET_ALLOW), (RET_K, 0, 0, RET_ERRNO | errno.EACCES)]
    filters = (_Filter * len(program))(*[_Filter(*ins) for ins in program])
    prog = _Prog(len(program), filters)
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0
