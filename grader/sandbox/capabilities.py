"""Dropping every Linux capability in a worker, by raw prctl/capset calls (no library needed).

A worker of a root grader runs as nobody (grader.sandbox.confine); it stays uid 0 only where it cannot (Python in a
folder only root can read and no mount namespace to open the way): then it keeps root's file ownership (and
says so: instructor grading refuses) but none of root's powers: no CAP_DAC_OVERRIDE, CAP_SYS_ADMIN, CAP_LINUX_IMMUTABLE
(`chattr +i`), CAP_SYS_PTRACE, CAP_KILL, CAP_NET_*, ... in its bounding, permitted, effective, inheritable and
ambient sets, and no_new_privs, so no exec can give any back.
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "the Linux backend's own module"  # the type checker skips it elsewhere

import ctypes

from grader.sandbox.landlock import libc

PR_CAPBSET_READ, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 23, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
MAX_CAP = 64


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _sets() -> tuple[int, int, int]:
    """(effective, permitted, inheritable) of this process, as 64-bit masks."""
    header = _Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        return -1, -1, -1
    return tuple(data[0].__getattribute__(f) | data[1].__getattribute__(f) << 32  # type: ignore[return-value]
                 for f in ("effective", "permitted", "inheritable"))


def bounding_set() -> int:
    """The capabilities any exec could still get, as a mask (-1 if unreadable)."""
    mask = 0
    for cap in range(MAX_CAP):
        r = libc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0)
        if r < 0:
            break  # past the kernel's last capability
        mask |= r << cap
    return mask


def drop_bounding() -> None:
    """Empty the bounding and ambient sets (needs CAP_SETPCAP): before a setuid() away from root, which clears
    the permitted and effective sets but leaves these, and CAP_SETPCAP with the rest, so drop_all() cannot."""
    for cap in range(MAX_CAP):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and cap > 40:
            break
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def drop_all() -> bool:
    """Drop every capability from every set, set no_new_privs; True only if the process then holds none."""
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    for cap in range(MAX_CAP):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and cap > 40:
            break  # EINVAL: past the kernel's last capability (EPERM earlier means we could not drop)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()  # all zero
    libc.capset(ctypes.byref(header), data)
    return _sets() == (0, 0, 0) and bounding_set() == 0
