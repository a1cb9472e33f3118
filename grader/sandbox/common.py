"""What every worker backend shares, on every platform: nothing here needs Linux (no ctypes, resource or
fcntl), so the portable backend (grader/worker/portable.py) and the trusted side import it anywhere."""

from __future__ import annotations

import io
import os
from typing import Any, Protocol

import torch

from grader.sandbox import framing

WORKER_ENV = {"PATH": os.defpath, "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "ATTN_KATA_WORKER": "1"}


def work_caches(workdir: str) -> dict[str, str]:
    """The caches a worker's libraries write, inside its own work dir: torch.compile's (FlexAttention compiles
    through it) and Triton's. Left to their default, tempfile's directory as the zygote saw it, they name the
    machine's /tmp and its sandbox user ("Permission denied: '/tmp/torchinductor_nobody'") and fail the
    learner's correct code for a cause outside it."""
    return {"TORCHINDUCTOR_CACHE_DIR": os.path.join(workdir, "torchinductor"),
            "TRITON_CACHE_DIR": os.path.join(workdir, "triton")}


class Transport(Protocol):
    """A worker's one channel to the grader: whole messages (grader/sandbox/framing.py's length-prefixed bytes)."""

    def send(self, payload: bytes) -> None: ...

    def recv(self) -> bytes: ...  # raises EOFError at the end


class SocketTransport:
    """The Linux backend's channel: a socketpair end inherited from the zygote."""

    def __init__(self, sock: Any):
        self.sock = sock

    def send(self, payload: bytes) -> None:
        framing.send_msg(self.sock, payload)

    def recv(self) -> bytes:
        return framing.recv_msg(self.sock)


class CappedOutput(io.TextIOBase):
    """sys.stdout and sys.stderr of a worker: the first `cap` bytes go to its log, the rest is dropped, so a
    learner's prints never become an error (a full disk, a file-size limit)."""

    def __init__(self, fd: int, cap: int):
        self._fd, self._left = fd, cap
        self.dropped = False  # some output went over the cap: the report says so (grader.grading.engine)

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        data = str(s).encode("utf-8", "replace")
        keep = data[:max(self._left, 0)]
        self.dropped = self.dropped or len(keep) < len(data)
        if keep:
            try:
                os.write(self._fd, keep)
                self._left -= len(keep)
            except OSError:
                self._left = 0
        return len(s)

    def fileno(self) -> int:
        return self._fd

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


def reset_torch_state(seed: int) -> None:
    """Undo what learner code may have changed in torch's global defaults, then seed its RNG."""
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)
    torch.default_generator.manual_seed(seed)  # CPU only: torch.manual_seed also queues CUDA work


def hard_exit(code: int = 0) -> None:
    os._exit(code)
