"""Landlock (Linux ≥ 5.13) through raw syscalls: the worker may read what it needs, write only its
own directory, and (ABI ≥ 4) make no TCP connection; (ABI ≥ 6) it may not signal processes outside."""

from __future__ import annotations

import sys

assert sys.platform == "linux", "the Linux backend's own module"  # the type checker skips it elsewhere

import contextlib
import ctypes
import os
import struct

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and aarch64
PR_SET_NO_NEW_PRIVS = 38
RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = (
    1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12)
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

libc = ctypes.CDLL(None, use_errno=True)  # one handle for the sandbox modules and the zygote
libc.syscall.restype = ctypes.c_long


def release_free_memory() -> None:
    """Hand what malloc has freed back to the system (glibc's malloc_trim; glibc keeps freed heap memory): the
    zygote after its warm-up, before any fork; a grading process once the reference's results are prepared.
    Where there is no such call (no C library by that name, musl, macOS) nothing happens."""
    with contextlib.suppress(AttributeError, OSError, TypeError):
        libc.malloc_trim(0)  # type: ignore[union-attr]


def abi() -> int:
    """Landlock ABI version of the running kernel, 0 when unavailable."""
    v = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(v), 0)


def _fs_rights(version: int) -> int:
    rights = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


NONE = {"filesystem": False, "tcp": False, "signals": False}


def prepare(read: list[str], write: list[str], scope_signals: bool = True) -> tuple[int, dict[str, bool]]:
    """Build the ruleset (paths are opened now, while the worker may still be root). Returns (fd, what
    it will enforce); fd is -1 when Landlock is unavailable. `scope_signals` False: the ruleset of a kernel before
    6.12 (ABI < 6), which cannot scope signals (a fault the tests inject: confine's skip "landlock_signals")."""
    version = abi()
    if version < 1:
        return -1, dict(NONE)
    handled_fs = _fs_rights(version)
    handled_net = NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0
    if not scope_signals:
        version = min(version, 5)
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
    size = 24 if version >= 6 else 16 if version >= 4 else 8
    buf = ctypes.create_string_buffer(struct.pack("=QQQ", handled_fs, handled_net, scoped)[:size], size)
    fd = libc.syscall(SYS_CREATE_RULESET, buf, ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        return -1, dict(NONE)
    file_rights = EXECUTE | WRITE_FILE | READ_FILE | (TRUNCATE if version >= 3 else 0)
    read_rights = EXECUTE | READ_FILE | READ_DIR
    for paths, rights in ((read, read_rights), (write, handled_fs)):
        for path in paths:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                allowed = rights if os.path.isdir(path) else rights & file_rights
                rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, pfd), 12)
                libc.syscall(SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(RULE_PATH_BENEATH), rule,
                              ctypes.c_uint32(0))
            finally:
                os.close(pfd)
    return fd, {"filesystem": True, "tcp": handled_net != 0, "signals": scoped != 0}


def enforce(fd: int, promised: dict[str, bool]) -> dict[str, bool]:
    """Restrict this process (and its future children) with the prepared ruleset."""
    if fd < 0:
        return dict(NONE)
    try:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return dict(NONE)
        if libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            return dict(NONE)
    finally:
        os.close(fd)
    return promised
