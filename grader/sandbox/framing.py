"""Length-prefixed messages over a socket, without torch: the worker channel (grader/sandbox/channel.py) and the
batch's grading processes (grader/instructor/batch.py) both speak it."""

from __future__ import annotations

import select
import socket
import struct
import time

from grader import limits

MAX_MESSAGE_BYTES = limits.CHANNEL_MESSAGE_BYTES  # a whole step's outputs; far above any honest answer
HEADER = struct.Struct(">Q")  # every message's length, before it


class ChannelError(Exception):
    """A message from a worker that is not a well-formed result."""


def send_msg(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack(">Q", len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    # select() instead of settimeout(): the socket stays blocking, so another thread may send on it
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise TimeoutError
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def recv_msg(sock: socket.socket, timeout: float | None = None, max_bytes: int = MAX_MESSAGE_BYTES) -> bytes:
    """One length-prefixed message. Raises TimeoutError, EOFError, or ChannelError (over the cap)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    (n,) = struct.unpack(">Q", _recv_exact(sock, 8, deadline))
    if n > max_bytes:
        raise ChannelError(f"result of {n} bytes exceeds the {max_bytes}-byte cap")
    return _recv_exact(sock, n, deadline)
