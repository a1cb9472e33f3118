"""What goes wrong with a worker, and what its first message says, on either backend (a leaf: the backends and
the engine import it)."""

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


def layers_of(doc: object) -> dict[str, bool]:
    """The layers in a worker's first message (either backend), read back after confinement and before any
    learner code ran (so no submission can forge them). Malformed: no layer at all."""
    layers = doc.get("layers") if isinstance(doc, dict) else None
    if not isinstance(layers, dict) or len(layers) > 64:
        return {}
    return {str(k)[:64]: v for k, v in layers.items() if v is True or v is False}
