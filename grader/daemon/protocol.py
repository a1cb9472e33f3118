"""One message each way: a JSON object on one line, file descriptors alongside it (SCM_RIGHTS). No pickle."""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from typing import Any

assert sys.platform != "win32", "POSIX only: on Windows every command grades in its own process"  # typed so

from grader import limits

MAX_MESSAGE = limits.DAEMON_MESSAGE_BYTES  # a request carries the client's environment: far below this
MAX_FDS = limits.DAEMON_FDS  # stdin, stdout, stderr, the working directory


class Garbled(Exception):
    pass


def send(sock: socket.socket, doc: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(doc, ensure_ascii=False).encode() + b"\n"
    sent = socket.send_fds(sock, [data], fds or [])
    if sent < len(data):  # never an empty sendall: the peer may have answered and closed already (EPIPE)
        sock.sendall(data[sent:])


def receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """The next message and the fds that came with it; (None, []) at end-of-file. Raises Garbled for anything
    that is not one JSON object (a hung-up writer's half line included); the fds are closed then."""
    buf, fds = b"", []
    try:
        while not buf.endswith(b"\n"):
            chunk, got, _flags, _addr = socket.recv_fds(sock, 65536, MAX_FDS)
            fds += got
            if not chunk:
                if buf or fds:
                    raise Garbled("incomplete message")
                return None, []
            buf += chunk
            if len(buf) > MAX_MESSAGE or len(fds) > MAX_FDS:
                raise Garbled("message too large")
        doc = json.loads(buf)
        if not isinstance(doc, dict):
            raise Garbled("not an object")
        return doc, fds
    except (Garbled, ValueError) as exc:
        for fd in fds:
            os.close(fd)
        raise Garbled(str(exc)) from None


def peer_uid(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end, as the kernel recorded them when it connected: SO_PEERCRED on
    Linux, getpeereid(3) on macOS and the BSDs (pid -1: not told). OSError where neither exists."""
    if hasattr(socket, "SO_PEERCRED"):
        pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                              struct.calcsize("3i")))
        return pid, uid
    getpeereid = _getpeereid()
    if getpeereid is None:
        raise OSError("no way to learn a Unix socket peer's uid here")
    import ctypes

    uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
    if getpeereid(sock.fileno(), ctypes.byref(uid), ctypes.byref(gid)) != 0:
        raise OSError(ctypes.get_errno(), "getpeereid failed")
    return -1, uid.value


def _getpeereid() -> Any:
    """libc's getpeereid, or None (Linux has SO_PEERCRED instead; Windows neither). Looked up in what the process
    has loaded (libSystem on macOS), not through ctypes.util: on a darwin platform that imports ctypes.macholib,
    which some Pythons leave out (Debian's)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).getpeereid
    except (OSError, AttributeError, TypeError, ImportError):
        return None


def supported() -> bool:
    """Can the warm daemon run here? It needs Unix sockets that carry fds (SCM_RIGHTS), fork, and the kernel's
    word on a peer's uid. Linux and macOS have them; Windows does not: there every check grades in-process."""
    return (os.name == "posix" and hasattr(socket, "AF_UNIX") and hasattr(socket, "SCM_RIGHTS")
            and hasattr(socket.socket, "sendmsg") and hasattr(os, "fork")
            and (hasattr(socket, "SO_PEERCRED") or _getpeereid() is not None))
