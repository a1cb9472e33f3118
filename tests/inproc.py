"""`attn-kata ARGS` run in the test's own process (Click's CliRunner on the top-level group `grader.cli.main`), for the
tests whose subject is a command's output and exit code: the same stdout, stderr and exit status a subprocess
gives, without a fresh interpreter, a fresh `import grader` and a fresh zygote (its torch import) per command.
Grading stays real: the command grades through the session's zygote and its sandboxed workers.

A process stays separate where it is the subject (the daemon, the wheel, signals, a terminal, the sandbox's set-ups,
one smoke test per verb: tests/test_cli.py::test_every_verb_runs_as_a_process) and where the command would read
something decided once per process (see PER_PROCESS): those tests call subprocess.run themselves.

What a command could leave behind is put back after each call: the environment, the working directory, the
language (a ContextVar: the call runs in a copy of the context), sys.argv."""

from __future__ import annotations

import contextvars
import faulthandler
import os
import subprocess
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path

from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent

# settings a process reads once (functools.cache, the zygote's environment): a command that needs one of them set
# differently from the test process runs as a subprocess (the helper refuses it here rather than ignore it)
PER_PROCESS = ("ATTN_KATA_BACKEND", "ATTN_KATA_SOLUTIONS", "ATTN_KATA_TEST_FAULTS", "ATTN_KATA_DEBUG")


def _help_width(env: Mapping[str, str]) -> int:
    """The width click wraps help to in a process whose stdout is a pipe (shutil.get_terminal_size: COLUMNS, else
    80; click takes 2 off and caps it at 80), not CliRunner's fixed 80."""
    try:
        columns = int(env.get("COLUMNS", "80"))
    except ValueError:
        columns = 80
    return max(min(columns if columns > 0 else 80, 80) - 2, 50)


def kata(*args: str, cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
         input: str | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`attn-kata ARGS` in-process: a CompletedProcess (args, returncode, stdout, stderr) as subprocess.run with
    capture_output=True, text=True would give. `env`, as subprocess's, replaces the environment for the call.
    An exception that escapes the command is printed on stderr with exit 1, as Python does; a command still
    running after `timeout` seconds dumps every thread's stack and ends the session (a hang fails, never waits)."""
    wanted = dict(os.environ if env is None else env)
    for name in PER_PROCESS:
        if wanted.get(name) != os.environ.get(name):
            raise ValueError(f"{name} is read once per process: run this command as a subprocess")
    if wanted.get("ATTN_KATA_NO_DAEMON") != "1":  # a daemon started from here would outlive the test
        raise ValueError("the daemon is tested as a process (tests/test_daemon.py): keep ATTN_KATA_NO_DAEMON=1")
    overrides: dict[str, str | None] = {k: None for k in os.environ if k not in wanted}
    overrides.update(wanted)
    before_cwd, before_argv = os.getcwd(), sys.argv[:]
    runner = CliRunner(env=overrides)
    faulthandler.dump_traceback_later(timeout, exit=True)
    try:
        if cwd is not None:
            os.chdir(cwd)
        from grader.cli import main

        result = contextvars.copy_context().run(
            runner.invoke, main, list(args), input=input, prog_name="attn-kata", catch_exceptions=True,
            terminal_width=_help_width(wanted))
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.chdir(before_cwd)
        sys.argv[:] = before_argv
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(result.exception)[1:])
    return subprocess.CompletedProcess(["attn-kata", *args], result.exit_code, result.stdout, stderr)
