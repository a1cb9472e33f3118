"""Start what the next worker comes from while this process goes on (torch-free: the CLI calls it first)."""

from __future__ import annotations

import sys

from grader.settings import backend


def warm_up() -> None:
    """The zygote on the Linux backend, a spare worker on the portable one: each imports torch meanwhile."""
    if sys.platform == "linux" and backend() == "linux":
        from grader.pool import zygote

        zygote.warm_up()
    else:
        from grader.pool import portable

        portable.keep_warm()
