"""Run Python as it would be on macOS or Windows, as far as the grader can tell: the Linux-only names Python
lacks there are removed before the grader is imported (neither system is available to the project's CI).

    python tests/platform/sim.py darwin|win32 -m grader ARGS...   # the attn-kata command line, simulated
    ATTN_KATA_SIMULATE=<this file> ATTN_KATA_SIMULATE_OS=...      # what worker children run first (set here)

The names removed are what the type checker knows: every name of os, socket, signal, select, resource, fcntl,
termios, time, ... that typeshed gives Linux and not the simulated system (tests/platform/names.py), and on Windows
the modules it lacks whole (resource, fcntl, termios, tty, pty, grp, pwd). Beyond names: no /proc; a libc without
prctl, unshare, mount or syscall(2), with getpeereid(3) on macOS (the daemon's peer check there); on Windows
ctypes.CDLL(None) raises TypeError, and what Windows has that Linux lacks is emulated with Linux's means (O_BINARY,
O_NOINHERIT, Popen's CREATE_NEW_PROCESS_GROUP and TerminateProcess, msvcrt's single keys).
torch and the libraries the grader uses are imported first, on the real platform (their loaders and Windows
branches read sys.platform), then sys.platform changes; psutil reads the real /proc, as it reads Windows' own
process table there.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import ctypes
import os
import runpy
import select
import signal
import socket
import sys
import time

import torch  # noqa: F401 - before sys.platform changes (see above)

# the libraries the grader uses, on the real platform too: their own Windows branches (click's console, rich's
# terminal) need Windows itself; what is simulated is what the grader's own code finds
for _lib in ("click", "rich.console", "platformdirs", "nbformat", "safetensors.torch", "numpy", "subprocess",
             "multiprocessing", "asyncio", "tempfile", "shutil", "pathlib", "json", "hmac", "sqlite3", "uuid",
             "zipfile", "csv", "gettext", "locale", "selectors", "threading", "queue", "importlib.metadata", "psutil"):
    __import__(_lib)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import names  # noqa: E402 - beside this file

LINUX_LIBC = ("prctl", "unshare", "mount", "syscall", "capget", "capset", "setns")


def _no_proc(fn):
    def wrapped(path, *args, **kwargs):
        if sys._getframe(1).f_globals.get("__name__", "").startswith("psutil"):
            return fn(path, *args, **kwargs)  # the library's own platform code: Windows' process table there
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


def _windows_only(real_sigkill: int, real_cloexec: int) -> None:
    """What Windows' Python has and Linux's lacks, where the grader uses it, emulated with the real system's means:
    O_BINARY (no text translation on POSIX), O_NOINHERIT (O_CLOEXEC), Popen's creationflags (a new process group:
    its own session here), Popen.kill/terminate (TerminateProcess: a SIGKILL here), and msvcrt's single keys."""
    import subprocess
    import termios as real_termios  # captured before the simulation removes them
    import tty as real_tty
    import types

    os.O_BINARY = 0  # type: ignore[attr-defined]
    os.O_NOINHERIT = real_cloexec  # type: ignore[attr-defined]
    subprocess.CREATE_NEW_PROCESS_GROUP = 0x200  # type: ignore[attr-defined]
    real_popen_init = subprocess.Popen.__init__

    def popen_init(self, *args, creationflags=0, **kwargs):
        if creationflags & 0x200:
            kwargs["start_new_session"] = True
        real_popen_init(self, *args, **kwargs)

    subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]

    def kill(self):
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, real_sigkill)

    subprocess.Popen.kill = subprocess.Popen.terminate = kill  # type: ignore[method-assign]
    msvcrt = types.ModuleType("msvcrt")
    state: dict[str, object] = {}

    def getwch() -> str:
        """One key from the console, unechoed, as Windows' console gives it."""
        if "saved" not in state and os.isatty(0):
            state["saved"] = real_termios.tcgetattr(0)
            real_tty.setcbreak(0)
            attrs = real_termios.tcgetattr(0)
            attrs[3] &= ~real_termios.ECHO
            real_termios.tcsetattr(0, real_termios.TCSANOW, attrs)
            atexit.register(real_termios.tcsetattr, 0, real_termios.TCSADRAIN, state["saved"])
        data = os.read(0, 4)
        if not data:
            time.sleep(3600)  # the console never ends: wait, as getwch would
        return data.decode("utf-8", "replace")

    msvcrt.getwch = getwch  # type: ignore[attr-defined]
    msvcrt.kbhit = lambda: bool(select.select([0], [], [], 0)[0])  # type: ignore[attr-defined]
    sys.modules["msvcrt"] = msvcrt


def removed(system: str) -> dict[str, tuple[str, ...]]:
    """Module -> the names this simulation removes: what the type checker says Linux has and `system` lacks
    (tests/platform/names.py reads typeshed's stubs), and nothing kept by hand."""
    return {m: tuple(sorted(names.missing(system, m))) for m in names.MODULES
            if m not in names.absent_modules(system) and names.missing(system, m)}


def _libraries_keep_the_real_system(mods: list[str]) -> None:
    """Every module loaded so far (the standard library, torch, click, rich, psutil: not the grader, which is
    imported after) keeps a copy of the real os, signal, select, socket and time, so a POSIX subprocess still finds
    os.WNOHANG, as Windows' own subprocess finds _winapi; only what is imported from now on sees the simulation."""
    import types

    copies = {}
    for name in mods:
        real = sys.modules[name]
        copy = types.ModuleType(name)
        copy.__dict__.update(real.__dict__)
        copies[id(real)] = copy
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or mod_name in mods or mod_name.startswith("grader") or mod_name in ("__main__", "names"):
            continue
        try:
            items = list(vars(mod).items())
        except TypeError:
            continue
        for attr, value in items:
            if id(value) in copies and value is sys.modules.get(getattr(value, "__name__", "")):
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(mod, attr, copies[id(value)])


def simulate(system: str) -> None:
    real_sigkill, real_cloexec = signal.SIGKILL, os.O_CLOEXEC
    if system == "win32":
        _windows_only(real_sigkill, real_cloexec)
    _libraries_keep_the_real_system(["os", "signal", "select", "socket", "time"])
    for mod_name, gone in removed(system).items():
        mod = sys.modules.get(mod_name) or __import__(mod_name)
        for name in gone:
            if hasattr(mod, name):
                delattr(mod, name)
    for mod_name in names.absent_modules(system):
        sys.modules[mod_name] = None  # type: ignore[assignment]  # `import fcntl` now raises ImportError
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
