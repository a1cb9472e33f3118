"""Arguments and answers every command line of the kata shares (grader.cli and the platforms' groups): step ids,
the key, the exit codes, and the one-line refusals of an input or an output before anything runs."""

from __future__ import annotations

import difflib
import stat
import sys
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from grader import limits
from grader.files import NotARegularFile, check_target
from grader.i18n import _
from grader.registry import STEPS, get_step

MAX_KEY_FILE = limits.KEY_FILE_BYTES


def step_ids(values: tuple[str, ...]) -> list[str]:
    """Step ids from ids or numbers; an unknown one is a one-line error and exit 2, in the learner's words."""
    ids = []
    for v in values:
        try:
            ids.append(get_step(v).id)
        except KeyError:
            # our own words rather than click's ("Error: Invalid value: …" would stay in English)
            close = difflib.get_close_matches(v.strip().lower().replace("-", "_"), [s.id for s in STEPS], n=1,
                                              cutoff=0.6)
            if close:
                click.echo(_("unknown step {step!r}: did you mean {close!r}? (`attn-kata list` shows the "
                             "steps)").format(step=v, close=close[0]), err=True)
            else:
                click.echo(_("unknown step {step!r}; `attn-kata list` shows the steps").format(step=v), err=True)
            sys.exit(2)
    return ids


def complete_steps(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Shell completion of a step argument (`_ATTN_KATA_COMPLETE=bash_source attn-kata`): ids, with their titles."""
    from grader.i18n import step_title
    from grader.registry import STEPS

    return [CompletionItem(s.id, help=step_title(s)) for s in STEPS
            if s.id.startswith(incomplete) or str(s.number) == incomplete]


def secret_value(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--secret KEY, or --secret @FILE (the key in a file, as curl reads @file), or ATTN_KATA_SECRET. A key typed
    on the command line is visible to every user of the machine in `ps`: said once, on stderr."""
    if value is None:
        return None
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block, /dev/zero never end
                raise click.BadParameter(f"{path} is not a regular file", ctx=ctx, param=param)
            with open(path, "rb") as f:
                raw = f.read(MAX_KEY_FILE + 1)
            if len(raw) > MAX_KEY_FILE:
                raise click.BadParameter(f"{path} is over {MAX_KEY_FILE} bytes: not a key", ctx=ctx, param=param)
            key = raw.decode("utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"cannot read the key from {path}: {getattr(exc, 'strerror', None) or exc}",
                                     ctx=ctx, param=param) from None
        if not key:
            raise click.BadParameter(f"{path} holds no key", ctx=ctx, param=param)
        return key
    if ctx.get_parameter_source(param.name or "") is click.core.ParameterSource.COMMANDLINE:
        click.echo("attn-kata: note: a --secret typed on the command line is visible to other users of this machine "
                   "(ps); prefer ATTN_KATA_SECRET or --secret @FILE", err=True)
    return value


# exit codes (docs/instructors.md "Exit codes"): 0 success; 1 a step fails (check), some submission could not be graded
# (batch) or a needed sandbox layer is missing (doctor); 2 a usage error, a missing input or an output that
# cannot be written; 3 the grader's own failure (no report, never a score); 130 interrupted (Ctrl-C)
EXIT_USAGE, EXIT_INFRA, EXIT_INTERRUPTED = 2, 3, 130


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """One line on stderr (names escaped: nothing a student named reaches the terminal raw), then exit."""
    from grader.render.terminal import plain

    click.echo(plain(message), err=True)
    sys.exit(code)


def need_input(path: Path) -> None:
    if not path.exists() and not path.is_symlink():
        fail(_("attn-kata: {path}: no such file or directory").format(path=path))


def need_output(path: Path | None) -> None:
    """An output path is checked before any grading: not a folder, and a file can be written there (tried:
    permissions alone do not say, e.g. for root under /proc); a file made by the try is removed."""
    if path is None:
        return
    if path.is_dir():
        fail(_("attn-kata: {path} is a directory, not a file to write").format(path=path))
    try:
        check_target(path)
    except NotARegularFile:  # a device, a FIFO: never replaced by a report
        fail(_("attn-kata: {path} exists and is not a regular file").format(path=path))
    existed = path.exists()
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        cannot_write(path, exc)
    if not existed:
        path.unlink(missing_ok=True)


def cannot_write(path: Path, exc: OSError) -> None:
    fail(_("attn-kata: cannot write {path} ({error})").format(path=path, error=exc.strerror or exc))
