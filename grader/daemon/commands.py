"""`attn-kata daemon start|status|stop`: the warm background grader, seen and stopped by its user."""

from __future__ import annotations

import sys
import time
from typing import NoReturn

import click

from grader.i18n import _

if sys.platform != "win32":
    from grader.daemon import client


def _none_on_windows() -> NoReturn:
    click.echo(_("Windows has no background grader: every command grades in its own process"))
    sys.exit(1)


@click.group("daemon")
def daemon_group() -> None:
    """The warm background grader that answers check, list and grade (never with a secret)."""


@daemon_group.command("status")
def status() -> None:
    """Whether it runs (exit 0) or not (exit 1)."""
    _status()


def _status() -> None:
    if sys.platform == "win32":
        _none_on_windows()
    else:
        doc = client.request({"op": "status"})
        if not doc or "pid" not in doc:
            click.echo(_("the background grader is not running (the next `attn-kata check` starts it)"))
            sys.exit(1)
        click.echo(_("the background grader is running: pid {pid}, {served} command(s) served, up {up:.0f} s; it stops "
                     "after {idle:g} s without a command").format(pid=doc["pid"], served=doc.get("served", 0),
                                                                  up=time.time() - float(doc.get("started", 0)),
                                                                  idle=float(doc.get("idle_limit", 0))))
        click.echo(_("socket: {path}").format(path=doc.get("socket", "")))


@daemon_group.command("start")
def start() -> None:
    """Start it now, if none runs (`check` and `watch` also start it; `list` only uses one that runs)."""
    if sys.platform == "win32":
        _none_on_windows()
    else:
        try:
            if not client.protocol.supported():
                raise OSError("this system has no daemon")
            client.connect(start=True).close()
        except (client.paths.Unavailable, OSError) as exc:
            click.echo(_("the background grader could not start ({error}); commands grade in their own process")
                       .format(error=exc), err=True)
            sys.exit(1)
        _status()


@daemon_group.command("stop")
def stop() -> None:
    """Stop it (the next check starts a fresh one); exit 0 also when none was running."""
    if sys.platform == "win32":
        _none_on_windows()
    else:
        doc = client.request({"op": "stop"})
        if not doc or "stopped" not in doc:
            click.echo(_("the background grader is not running"))
            return
        click.echo(_("stopped the background grader (pid {pid})").format(pid=doc["stopped"]))
