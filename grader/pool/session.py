"""What grading with a secret needs of a worker, and the worker of this machine's backend (grader.pool.linux's
LinuxWorker, or grader.pool.portable's PortableWorker: the same interface)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

from grader.pool.errors import InfrastructureError, WeakSandbox, WorkerLost, layers_of  # noqa: F401 - this API too
from grader.sandbox import policy
from grader.settings import backend

# What instructor grading (a secret given) needs of every worker, as the worker observed itself after
# confinement: read from the one policy table (grader.sandbox.policy, which doctor's required rows, the report's
# `sandbox` key and docs/design.md's table read too): alternatives per need, per context.
CONTEXTS = policy.SECRET_CONTEXTS
REQUIRED_LAYERS: dict[str, tuple[str, ...]] = policy.gate("host")
# what to do about each need, for the refusal
FIXES: dict[str, str] = {need.name: need.fix for need in policy.NEEDS}


def required_layers(context: str = "host") -> dict[str, tuple[str, ...]]:
    """The needs of grading with a secret in `context` ("host" or "container"), each with its alternatives
    (policy.gate: the needs a worker observes of itself)."""
    return policy.gate(context)


def missing_layers(layers: Any, context: str = "host") -> list[str]:
    """The needs of `required_layers(context)` that a worker's observed layers do not show."""
    layers = layers if isinstance(layers, dict) else {}
    return [need for need, any_of in required_layers(context).items()
            if not any(layers.get(k) is True for k in any_of)]


def refusal(missing: list[str]) -> str:
    """One line per missing need, with what to do about it."""
    return "; ".join(f"{need} (needs {FIXES[need]})" if need in FIXES else need for need in missing)


class WorkerHandle(Protocol):
    """What the trusted side holds of one submission's worker, on either backend."""

    backend: str
    pid: int
    alive: bool

    def send_all(self, requests: list[bytes]) -> None: ...
    def receive(self, timeout: float) -> tuple[dict[str, torch.Tensor], Any]: ...
    def confined(self, timeout: float) -> dict[str, bool]: ...
    def hello(self, timeout: float) -> Any: ...
    def ask(self, request: bytes, timeout: float) -> tuple[dict[str, torch.Tensor], Any]: ...
    def kill(self) -> None: ...
    def close(self) -> None: ...


def Worker(units: list[tuple[str, str, str]], config: dict[str, Any]) -> WorkerHandle:
    """One submission's worker, on the backend this machine grades with (grader.settings.backend)."""
    if sys.platform == "linux" and backend() == "linux":
        from grader.pool.linux import LinuxWorker  # the Linux backend only: never imported elsewhere

        return LinuxWorker(units, config)
    from grader.pool.portable import PortableWorker

    return PortableWorker(units, config)
