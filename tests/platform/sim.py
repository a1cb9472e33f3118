"""Run Python as it would be on macOS or Windows, as far as the grader can tell: the Linux-only names Python
lacks there are removed before the grader is imported (neither system is available to the project's CI).

    python tests/platform/sim.py darwin|win32 -m grader ARGS...   # the attn-kata command line, simulated
    ATTN_KATA_SIMULATE=<this file> ATTN_KATA_SIMULATE_OS=...      # what worker children run first (set here)

macOS: no pidfd, SO_PEERCRED, epoll; a libc without prctl, unshare, mount or syscall(2) but with getpeereid(3)
(the daemon's peer check there); no /proc.
Windows: also no fork, setsid/getsid/killpg, fcntl, resource, termios, pty, AF_UNIX, SCM_RIGHTS, POSIX-only
signals, os.O_DIRECTORY, and ctypes.CDLL(None) raises TypeError.
torch and the libraries the grader uses are imported first, on the real platform (their loaders and Windows
branches read sys.platform), then sys.platform changes.
"""

from __future__ import annotations

import builtins
import ctypes
import os
import runpy
import select
import signal
import socket
import sys

import torch  # noqa: F401 - before sys.platform changes (see above)

# the libraries the grader uses, on the real platform too: their own Windows branches (click's console, rich's
# terminal) need Windows itself; what is simulated is what the grader's own code finds
for _lib in ("click", "rich.console", "platformdirs", "nbformat", "safetensors.torch", "numpy", "subprocess",
             "multiprocessing", "asyncio", "tempfile", "shutil", "pathlib", "json", "hmac", "sqlite3", "uuid",
             "zipfile", "csv", "gettext", "locale", "selectors", "threading", "queue", "importlib.metadata"):
    __import__(_lib)

LINUX_LIBC = ("prctl", "unshare", "mount", "syscall", "capget", "capset", "setns")


def _no_proc(fn):
    def wrapped(path, *args, **kwargs):
        p = os.fspath(path) if isinstance(path, (str, bytes, os.PathLike)) else path
        if isinstance(p, bytes):
            p = p.decode("utf-8", "replace")
        if isinstance(p, str) and (p == "/proc" or p.startswith("/proc/")):
            raise FileNotFoundError(2, "No such file or directory (simulated: no /proc)", p)
        return fn(path, *args, **kwargs)
    return wrapped


class _Libc:
    """A C library without Linux's own calls."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        if name in LINUX_LIBC:
            raise AttributeError(f"simulated: no {name} in this C library")
        return getattr(self._real, name)


SO_PEERCRED = 17  # Linux's number: what macOS's getpeereid(3) is simulated with


def _getpeereid(fd, uid_ref, gid_ref) -> int:
    """macOS's getpeereid(3), for the daemon's peer check (glibc has none): the kernel's record, read the Linux
    way under the hood."""
    import struct

    dup = socket.socket(fileno=os.dup(fd))
    try:
        _pid, uid, gid = struct.unpack("3i", dup.getsockopt(socket.SOL_SOCKET, SO_PEERCRED, 12))
    finally:
        dup.close()
    uid_ref._obj.value, gid_ref._obj.value = uid, gid
    return 0


def simulate(system: str) -> None:
    for name in ("pidfd_open",):
        if hasattr(os, name):
            delattr(os, name)
    for mod, names in ((socket, ("SO_PEERCRED",)), (select, ("epoll",)), (signal, ("pidfd_send_signal",))):
        for name in names:
            if hasattr(mod, name):
                delattr(mod, name)
    builtins.open = _no_proc(builtins.open)
    os.open = _no_proc(os.open)
    os.listdir = _no_proc(os.listdir)
    os.scandir = _no_proc(os.scandir)
    os.stat = _no_proc(os.stat)
    real_cdll = ctypes.CDLL

    class CDLL(real_cdll):  # type: ignore[misc, valid-type]
        def __init__(self, name, *args, **kwargs):
            if name is None and system == "win32":
                raise TypeError("simulated Windows: ctypes.CDLL(None)")
            super().__init__(name, *args, **kwargs)

        def __getattr__(self, name):
            if name in LINUX_LIBC:
                raise AttributeError(f"simulated: no {name} in this C library")
            if name == "getpeereid" and system == "darwin":
                return _getpeereid
            return super().__getattr__(name)

        def __getitem__(self, name):
            if name in LINUX_LIBC:
                raise AttributeError(f"simulated: no {name} in this C library")
            return super().__getitem__(name)

    ctypes.CDLL = CDLL
    if system == "win32":
        for name in ("fork", "forkpty", "setsid", "getsid", "killpg", "getpgid", "setpgid", "O_DIRECTORY",
                     "getuid", "geteuid", "getpwuid", "sync", "WIFSIGNALED", "WTERMSIG", "WEXITSTATUS"):
            if hasattr(os, name):
                delattr(os, name)
        for name in ("fcntl", "resource", "termios", "pty", "tty", "grp", "pwd", "posix_ipc"):
            sys.modules[name] = None  # type: ignore[assignment]  # `import fcntl` now raises ImportError
        for name in ("AF_UNIX", "SCM_RIGHTS", "SO_PEERCRED", "AF_NETLINK"):
            if hasattr(socket, name):
                delattr(socket, name)
        # SIGKILL stays: the simulated subprocess module is still POSIX's, whose kill() sends it
        for name in ("SIGHUP", "SIGQUIT", "SIGALRM", "SIGCHLD", "SIGUSR1", "SIGUSR2", "SIGSTOP",
                     "SIGCONT", "SIGPIPE", "SIGTSTP", "SIGWINCH", "setitimer", "alarm", "pthread_kill", "siginterrupt"):
            if hasattr(signal, name):
                delattr(signal, name)
    sys.platform = system
    os.environ["ATTN_KATA_SIMULATE"] = os.path.abspath(__file__)
    os.environ["ATTN_KATA_SIMULATE_OS"] = system


if __name__ == "attn_kata_simulation":  # run first by a worker child (grader/pool/portable.py)
    simulate(os.environ["ATTN_KATA_SIMULATE_OS"])
elif __name__ == "__main__":
    system, rest = sys.argv[1], sys.argv[2:]
    simulate(system)
    if rest[:1] == ["-m"]:
        sys.argv = [rest[1], *rest[2:]]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = rest
        runpy.run_path(rest[0], run_name="__main__")
