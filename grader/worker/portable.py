"""The portable worker backend's child process (macOS, Windows, and Linux without the full sandbox).

Started by grader/pool/portable.py as `python -I -c ...` (spawned, never forked after torch: fork after torch is a
known hazard on macOS and does not exist on Windows). It imports torch and the worker code, then waits for its
set-up on stdin; its channel is its stdin and stdout, moved off fds 0 and 1 before any learner code runs, so the
learner's prints go to a capped log, never into a message. Its confinement is what every platform offers: a
process of its own (its own session on POSIX, so a time-out kills what it started), a private work dir that is
its current and temp folder, a cleared environment, capped output, rlimits where `resource` exists, one thread.
It is NOT a sandbox: learner code can read what the user can. Nothing here needs Linux.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

from grader import limits as bounds
from grader.sandbox import common, framing

DEFAULT_LIMITS: dict[str, int] = {
    "cpu_seconds": bounds.WORKER_CPU_SECONDS,
    "memory_bytes": bounds.PORTABLE_ADDRESS_SPACE,  # on top of what torch maps (POSIX but macOS, where it is ignored)
    "file_bytes": bounds.WORKER_FILE_BYTES,
    "open_files": bounds.WORKER_OPEN_FILES,
    "output_bytes": bounds.WORKER_OUTPUT_BYTES,
}


class PipeTransport:
    """Length-prefixed messages over two file descriptors (the pipes this process was started with)."""

    def __init__(self, rfd: int, wfd: int):
        self.rfd, self.wfd = rfd, wfd

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = os.read(self.rfd, min(n - len(buf), 1 << 20))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)

    def recv(self) -> bytes:
        (n,) = framing.HEADER.unpack(self._read(framing.HEADER.size))
        if n > framing.MAX_MESSAGE_BYTES:
            raise EOFError
        return self._read(n)

    def send(self, payload: bytes) -> None:
        data = memoryview(framing.HEADER.pack(len(payload)) + payload)
        while data:
            data = data[os.write(self.wfd, data):]


def _rlimits(limits: dict[str, Any]) -> bool:
    if sys.platform == "win32":  # no rlimits there (the grader's wall clock still kills the worker)
        return False
    import resource

    ok = True
    for which, key in ((resource.RLIMIT_CORE, None), (resource.RLIMIT_CPU, "cpu_seconds"),
                       (resource.RLIMIT_FSIZE, "file_bytes"), (resource.RLIMIT_NOFILE, "open_files"),
                       (resource.RLIMIT_AS, "memory_bytes")):
        value = 0 if key is None else int(limits[key])
        try:
            if which == resource.RLIMIT_AS:
                if sys.platform == "darwin":
                    continue  # not enforced by macOS
                with open("/proc/self/statm") as f:
                    value += int(f.read().split()[0]) * resource.getpagesize()
            _soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))
        except (OSError, ValueError):
            ok = False
    return ok


def confine(config: dict[str, Any]) -> dict[str, bool]:
    """What every platform offers; returns the layers, as this process observes them afterwards."""
    import torch

    limits = {**DEFAULT_LIMITS, **config.get("limits", {})}
    workdir = config["workdir"]  # made (and later removed) by the grader, 0700
    os.chdir(workdir)
    log = os.open(os.path.join(workdir, "output.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(devnull)
    sys.stdout = sys.stderr = common.CappedOutput(1, int(limits["output_bytes"]))
    os.environ.clear()
    own = {"HOME": workdir, "TMPDIR": workdir, "TEMP": workdir, "TMP": workdir, "USERPROFILE": workdir,
           **common.work_caches(workdir)}
    os.environ.update(common.WORKER_ENV | own)
    tempfile.tempdir = workdir
    rlimits = _rlimits(limits)
    torch.set_num_threads(1)
    return {
        "separate_process": True,
        "session": sys.platform != "win32" and os.getsid(0) == os.getpid(),
        "private_dir": os.getcwd() == os.path.realpath(workdir) or os.getcwd() == workdir,
        "clean_env": set(os.environ) == set(common.WORKER_ENV) | set(own),
        "rlimits": rlimits,
    }


def main() -> None:
    """The child's entry: the channel off fds 0 and 1, the worker code imported, then serve."""
    debug = bool(os.environ.get("ATTN_KATA_DEBUG"))  # read before confine() clears the environment
    rfd, wfd = os.dup(0), os.dup(1)
    for fd in (rfd, wfd):
        os.set_inheritable(fd, False)
    try:
        from grader.worker import serve

        serve.serve(PipeTransport(rfd, wfd), confine)
    except BaseException:
        if debug:
            import traceback

            traceback.print_exc(file=sys.__stderr__)
    finally:
        common.hard_exit()
