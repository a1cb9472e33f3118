"""What goes wrong with a worker, on either backend (a leaf: the backends and the engine import it)."""

from __future__ import annotations


class InfrastructureError(Exception):
    """The grader itself could not run a worker (after a retry): no score may be derived from this."""


class WeakSandbox(InfrastructureError):
    """Grading with a secret was asked for, on a machine whose workers lack a layer it needs."""


class WorkerLost(Exception):
    """The worker did not answer: `reason` is timeout, crashed, or unreadable."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
