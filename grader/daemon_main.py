"""The warm background grader's own entry point (grader.daemon.client starts it as
`python -c "from grader.daemon_main import main; main()" READY_FD`): the daemon (grader.daemon.server) serving the
command line of `attn-kata` (grader.cli.main).

It is the one module that joins the two, at the top of the layers: the CLI starts a daemon through the client and
the daemon runs CLI commands, yet neither imports the other upwards.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    if sys.platform == "win32":  # never started there (grader.daemon.client is POSIX's)
        raise SystemExit("Windows has no background grader")
    from grader.cli import main as app  # imported before the warm-up: the daemon's first command pays nothing for it
    from grader.daemon import server

    server.main(app, argv)
