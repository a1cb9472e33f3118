"""`attn-kata`: a thin Click layer over plain functions (grader.learner.api)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from grader import i18n, limits
from grader.cli_args import (
    EXIT_INFRA,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    cannot_write,
    complete_steps,
    fail,
    need_input,
    need_output,
    secret_value,
    step_ids,
)
from grader.files import utf8_streams, write_atomic
from grader.i18n import _
from grader.registry import STEPS
from grader.settings import DEFAULT_TIMEOUT
from grader.submission import is_workspace, kind, marker

LANGS = click.Choice(["en", "zh"])
GRADING_COMMANDS = {"check", "grade", "batch", "watch", "doctor"}


class _Seconds(click.FloatRange):
    """A FloatRange that also refuses nan (every comparison with nan is false, so a range lets it through)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        seconds = super().convert(value, param, ctx)
        if seconds != seconds:
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return seconds


# seconds allowed per step: a positive number, at most an hour
TIMEOUT = _Seconds(min=0, min_open=True, max=limits.MAX_TIMEOUT_OPTION)

def interrupted() -> None:
    click.echo(_("interrupted"), err=True)
    sys.exit(EXIT_INTERRUPTED)


def workspace_option(required: bool = True):  # type: ignore[no-untyped-def]
    """`--path`: the workspace as given, else the one the current folder is in (grader.learner.workspace, searched
    upwards as git does). None where there is none and the command can do without (`list`)."""

    def resolve(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
        from grader.learner import workspace

        if ctx.resilient_parsing:  # shell completion: nothing runs, so nothing to find
            return value
        try:
            return workspace.resolve(value)
        except workspace.NoWorkspace:
            if not required:
                return None
            fail(_("attn-kata: no workspace in this folder or above it; `attn-kata init` makes one, or pass --path"))
        return None

    return click.option("--path", "workspace", type=click.Path(path_type=Path), default=None, callback=resolve,
                        help="Your workspace (default: the one this folder is in, found as git finds a repository).")


class KataGroup(click.Group):
    """Ctrl-C anywhere in a command (its imports, the zygote's warm-up, grading) exits 130, never click's
    "Aborted!" and 1, which a script would read as a failing step."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        utf8_streams()  # before a word is written: ✓, ≠ and Chinese into a cp1252 pipe must not raise
        return super().main(*args, **kwargs)

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            interrupted()

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """`--lang` and `--no-daemon` are accepted before or after the subcommand (`attn-kata check --lang zh`):
        they are moved to the front, where the group reads them (arguments after `--` are left alone). `--path`
        too (`attn-kata --path ws check`): it is moved after the subcommand, whose option it is."""
        args = lang_first(path_after_command(args, self.commands))
        ctx.meta["attn_kata.argv"] = args  # what the warm daemon is handed (grader/daemon)
        return super().parse_args(ctx, args)


def takes_path(command: click.Command | None) -> bool:
    """Is `command` one of the learner's commands, working on a workspace given by `--path`?"""
    return command is not None and not isinstance(command, click.Group) and any(
        "--path" in p.opts for p in command.params)


def path_after_command(args: list[str], commands: Mapping[str, click.Command]) -> list[str]:
    """The arguments with a `--path X` / `--path=X` given before the subcommand moved just after it, when the
    subcommand takes `--path`; otherwise unchanged (click then says what is wrong)."""
    moved: list[str] = []
    before: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return args
        if a in ("--path", "--lang"):  # options with a value
            (moved if a == "--path" else before).extend(args[i:i + 2])
            i += 2
            continue
        if a.startswith("-"):
            (moved if a.startswith("--path=") else before).append(a)
            i += 1
            continue
        if moved and takes_path(commands.get(a)):
            return [*before, a, *moved, *args[i + 1:]]
        return args
    return args


def command_path(args: list[str]) -> str | None:
    """The `--path` value on a (normalised) command line, before any `--`."""
    for i, a in enumerate(args):
        if a == "--":
            break
        if a == "--path" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--path="):
            return a.split("=", 1)[1]
    return None


def workspace_lang(command: click.Command | None, args: list[str]) -> str | None:
    """The language the learner's workspace was made in (`init --lang zh` records it), for the learner's commands:
    it wins over the locale, while `--lang` and ATTN_KATA_LANG win over it. None where there is none."""
    import os

    if not takes_path(command) or os.environ.get("ATTN_KATA_LANG"):
        return None
    from grader.learner import workspace

    try:
        ws = workspace.resolve(command_path(args))
    except (workspace.NoWorkspace, OSError):
        return None
    from grader.learner.init import recorded_lang

    lang = recorded_lang(marker(ws))  # only a language the learner chose at init; an old init's "en" is none
    return lang if lang in LANGS.choices else None


def lang_first(args: list[str]) -> list[str]:
    """The arguments with every `--lang X` / `--lang=X` / `--no-daemon` before `--` moved to the front, in order."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest += args[i:]
            break
        if a == "--lang":  # its value follows (or is missing: the group says so)
            front += args[i:i + 2]
            i += 2
            continue
        (front if a.startswith("--lang=") or a == "--no-daemon" else rest).append(a)
        i += 1
    return front + rest


def show_version(ctx: click.Context, value: bool) -> None:
    """`--version`: the version, and a warning where torch is a CUDA build with no GPU to use it (issue 38)."""
    if not value or ctx.resilient_parsing:
        return
    from grader.settings import grader_version
    from grader.torch_pin import cuda_warning

    click.echo(f"attn-kata, version {grader_version()}")
    i18n.set_lang(i18n.default_lang())
    warning = cuda_warning()
    if warning:
        click.echo(warning, err=True)
    ctx.exit()


@click.group(cls=KataGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--lang", type=LANGS, default=None, help="Language of learner-facing text (default: from the locale); "
              "before or after the subcommand.")
@click.option("--no-daemon", is_flag=True, help="Grade in this process, not in the warm background grader "
              "(or ATTN_KATA_NO_DAEMON=1); before or after the subcommand.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=lambda c, p, v: show_version(c, v),
              help="Show the version and exit.")
@click.pass_context
def main(ctx: click.Context, lang: str | None, no_daemon: bool) -> None:
    """attention-kata: `attn-kata init` makes a workspace; write each step's file there, then `attn-kata check`."""
    chosen = lang  # said on this command line: `init` records it in the workspace, and only it
    if ctx.invoked_subcommand in GRADING_COMMANDS:
        from grader.torch_pin import missing_torch, missing_torch_message

        if missing_torch():  # say which command installs it, rather than a worker's traceback (issue 38)
            i18n.set_lang(lang or i18n.default_lang())
            fail(missing_torch_message(), EXIT_INFRA)
    lang = lang or workspace_lang(ctx.command.get_command(ctx, ctx.invoked_subcommand or ""),  # type: ignore[attr-defined]
                                  ctx.meta.get("attn_kata.argv", []))
    if sys.platform != "win32":  # the warm daemon is POSIX's: on Windows every command grades in its own process
        from grader.daemon import client

        if client.wanted(ctx.invoked_subcommand, ctx.meta.get("attn_kata.argv", []), no_daemon):
            argv = client.argv_for(ctx.meta["attn_kata.argv"], lang or i18n.default_lang())
            code = client.run(argv, ctx.find_root().info_name or "attn-kata",
                              start=ctx.invoked_subcommand not in client.NEVER_STARTS)
            if code is not None:  # else it could not answer: grade here, as if there were no daemon
                sys.exit(code)
    if ctx.invoked_subcommand in GRADING_COMMANDS:
        from grader.pool import warm

        warm.warm_up()  # the zygote (or a spare worker) imports torch while this process goes on
    if sys.platform != "win32" and ctx.invoked_subcommand == "watch" and not client.bypassed(no_daemon):
        client.start_in_background()  # so that the checks after this session are warm too
    ctx.obj = {"lang": lang or i18n.default_lang(), "chosen_lang": chosen}
    i18n.set_lang(ctx.obj["lang"])  # every learner-facing text from here on (grader/i18n.py)


@main.command()
@click.argument("folder", type=click.Path(path_type=Path), default="attention-kata", required=False)
@click.option("--notebook", is_flag=True, help="One Jupyter notebook with every step, instead of a file per step.")
@click.pass_obj
def init(obj: dict, folder: Path, notebook: bool) -> None:
    """Make a workspace in FOLDER (default: attention-kata): the exercises, a README, your progress."""
    from grader.learner.init import NotEmpty
    from grader.learner.init import init as make_workspace

    try:
        ws = make_workspace(folder, lang=obj.get("chosen_lang"), with_notebook=notebook)
    except NotEmpty:
        fail(_("attn-kata: {path} exists and is not empty; choose a new folder").format(path=folder))
    except OSError as exc:
        cannot_write(folder, exc)
    click.echo(_("workspace ready: cd {path} && attn-kata check").format(path=ws))


@main.command("list")
@workspace_option(required=False)
@click.pass_obj
def list_cmd(obj: dict, workspace: Path | None) -> None:
    """The steps, with your progress."""
    from grader.learner import api

    api.list_steps(workspace=workspace, lang=obj["lang"])


@main.command()
@click.argument("steps", nargs=-1, shell_complete=complete_steps)
@workspace_option()
@click.option("--timeout", type=TIMEOUT, default=DEFAULT_TIMEOUT, show_default=True,
              help="Seconds allowed per step.")
@click.option("--html", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write a self-contained HTML report (heatmaps of the attention weights).")
@click.pass_obj
def check(obj: dict, steps: tuple[str, ...], workspace: Path, timeout: float, html: Path | None) -> None:
    """Grade your workspace; exit 0 only when every requested step passes."""
    from grader.learner import api

    need_output(html)
    try:
        ok = api.check(workspace=workspace, steps=step_ids(steps) or None, lang=obj["lang"], timeout=timeout,
                       html=html)
    except KeyboardInterrupt:
        interrupted()
    if html is not None and html.exists():
        click.echo(_("HTML report: {path}").format(path=html), err=True)
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("step", shell_complete=complete_steps)
@workspace_option()
@click.option("--all", "show_all", is_flag=True, help="Show every hint revealed so far.")
@click.pass_obj
def hint(obj: dict, step: str, workspace: Path, show_all: bool) -> None:
    """Reveal the next hint for STEP (id or number)."""
    from grader.learner import api

    api.hint(step=step_ids((step,))[0], workspace=workspace, lang=obj["lang"], show_all=show_all)


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "json", "gradescope", "prairielearn"]), default="table",
              show_default=True)
@click.option("--secret", envvar="ATTN_KATA_SECRET", default=None, callback=secret_value,
              help="Key for the hidden cases, or @FILE holding it (or ATTN_KATA_SECRET).")
@click.option("--step", "steps", multiple=True, help="Grade only these steps (repeatable).")
@click.option("--timeout", type=TIMEOUT, default=DEFAULT_TIMEOUT, show_default=True,
              help="Seconds allowed per step.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write the report here instead of stdout (gradescope: results.json).")
@click.option("--allow-weak-sandbox", is_flag=True, help="With a secret: grade even where `attn-kata doctor` "
              "finds a needed layer of the Linux sandbox missing (scores may then be gamed). Never on the portable "
              "backend, which holds no secret, waived or not.")
@click.option("--html", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write a self-contained HTML report (heatmaps of the attention weights).")
@click.option("--cases-per-upload", is_flag=True,
              help="Draw the hidden cases from the key and a hash of everything under PATH, as Gradescope and "
                   "PrairieLearn do: for graders of resubmitted attempts (values learned from one attempt's "
                   "feedback are no use in the next; the same upload still gets the same report).")
@click.pass_obj
def grade(obj: dict, path: Path, fmt: str, secret: str | None, steps: tuple[str, ...], timeout: float,
          out: Path | None, html: Path | None, allow_weak_sandbox: bool, cases_per_upload: bool) -> None:
    """Grade one submission: a directory like exercises/, a .py file or a .ipynb notebook."""
    from grader.instructor.discovery import EMPTY, locate
    from grader.learner import api
    from grader.pool.errors import InfrastructureError  # not pool.session, which imports torch

    need_input(path)
    need_output(out)
    need_output(html)
    upload = path if cases_per_upload else None  # the whole upload, before a workspace is found inside it
    if kind(path) == "dir" and not is_workspace(path):  # one discovery (batch, Gradescope, grade)
        found = locate(path)
        if found.path is not None:
            path = found.path
        elif found.status != EMPTY:
            fail(_("attn-kata: {path}: {reason}").format(path=path, reason=found.reason))
    platform = PLATFORM_FORMATS.get(fmt)  # a platform's results.json: what cannot be read is said once, nothing runs
    refused = platform.not_gradable(problem) if platform is not None and (problem := screened(path)) else None
    try:
        if refused is not None:
            text = json.dumps(refused, ensure_ascii=False, indent=2)
        elif platform is not None:
            started = time.monotonic()
            report = api.grade_report(path=path, secret=secret, steps=step_ids(steps) or None, timeout=timeout,
                                      lang=obj["lang"], html=html, allow_weak_sandbox=allow_weak_sandbox,
                                      upload=upload)
            text = json.dumps(platform.document(report, time.monotonic() - started, obj["lang"]),
                              ensure_ascii=False, indent=2)
        else:
            text = api.grade(path=path, fmt=fmt, secret=secret, steps=step_ids(steps) or None, timeout=timeout,
                             lang=obj["lang"], to_terminal=out is None, html=html,
                             allow_weak_sandbox=allow_weak_sandbox, upload=upload)
    except KeyboardInterrupt:
        interrupted()
    except InfrastructureError as exc:  # not the submission's fault: no report, never a 0
        click.echo(_("attn-kata: grader infrastructure error, no report produced: {error}").format(error=exc), err=True)
        sys.exit(EXIT_INFRA)
    if out is not None:
        try:
            write_atomic(out, text)
        except OSError as exc:
            cannot_write(out, exc)
    elif text:
        click.echo(text)
    if html is not None and refused is None:
        click.echo(_("HTML report: {path}").format(path=html), err=True)


def screened(path: Path) -> str:
    """Why the submission cannot be graded at all (empty, unreadable, a syntax error in every file), or ""."""
    from grader.instructor.batch import screen

    status, problem = screen(path)
    return problem if status else ""


@main.command()
@click.argument("step", required=False, shell_complete=complete_steps)
@workspace_option()
@click.option("--timeout", type=TIMEOUT, default=DEFAULT_TIMEOUT, show_default=True,
              help="Seconds allowed per step.")
@click.pass_obj
def watch(obj: dict, step: str | None, workspace: Path, timeout: float) -> None:
    """Re-grade the current step each time you save; `n` (no Enter needed) moves on, `q` quits."""
    from grader.learner.watch import watch as run_watch

    sys.exit(run_watch(workspace=workspace, start=step_ids((step,))[0] if step else None, lang=obj["lang"],
                       timeout=timeout))


@main.command()
@click.argument("step", shell_complete=complete_steps)
@workspace_option()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def reset(obj: dict, step: str, workspace: Path, yes: bool) -> None:
    """Put the stub of STEP back in your workspace (your version is first copied to .attn-kata/backup/)."""
    from grader.learner.watch import reset_step

    sys.exit(reset_step(step=step_ids((step,))[0], workspace=workspace, lang=obj["lang"], yes=yes))


@main.command()
@click.argument("step", shell_complete=complete_steps)
@workspace_option()
@click.pass_obj
def solution(obj: dict, step: str, workspace: Path) -> None:
    """Show the reference solution of STEP, once you have passed it."""
    from grader.learner.watch import show_solution

    sys.exit(show_solution(step=step_ids((step,))[0], workspace=workspace, lang=obj["lang"]))


@main.command()
@click.option("--secret", envvar="ATTN_KATA_SECRET", default=None, callback=secret_value,
              help="Check for instructor grading with this key: the worker hunts for it; exit 1 if a needed layer "
              "is missing.")
def doctor(secret: str | None) -> None:
    """Which sandbox layers are active on this machine (each verified by an attack in a real worker)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from grader.settings import backend, portable_reason

    console = Console()
    from grader.torch_pin import cuda_warning

    warning = cuda_warning()  # a CUDA build of torch with no GPU: the GBs it cost, and the command (issue 38)
    if warning:
        console.print(escape(warning), style="yellow")
    if sys.platform == "linux" and backend() == "linux":
        from grader.instructor.doctor import diagnose, missing_required

        console.print(escape(_("backend: linux (each worker sandboxed; every row below is proven by an attack)")))
        t = Table(title="worker confinement")
        for col in ("layer", "claimed", "verified", "attack tried"):
            t.add_column(col)
        rows = diagnose(secret)
        for name, claimed, verified, attack in rows:
            active = claimed and verified
            t.add_row(escape(name), "yes" if claimed else "no",
                      "[green]active[/green]" if active else "[red]not active[/red]", escape(attack))
        console.print(t)
        missing = missing_required(rows)
        if missing:
            console.print(escape("missing for instructor grading (--secret): " + "; ".join(missing)))
            if secret:
                sys.exit(1)
        return
    console.print(escape(_("backend: portable ({why})").format(why=portable_reason())))
    console.print(escape(_("Your code runs in a separate process with a time limit, a private temp folder and a "
                           "cleared environment. It is not confined: it can read and change what your user "
                           "can. Grade only your own code here. Instructor grading with a secret needs Linux "
                           "(the full sandbox), so it refuses on this machine.")))
    console.print(escape(portable_here()))
    if secret:
        sys.exit(1)


def portable_here() -> str:
    """What a learner gets on this system, in plain words (doctor, on the portable backend)."""
    if sys.platform == "win32":
        return _("On Windows: every command grades in its own process (no background grader, so each check imports "
                 "torch again, a few seconds); a step that runs too long is stopped with every process it started; "
                 "there is no memory limit; `watch` reads single keys from the console.")
    if sys.platform == "darwin":
        return _("On macOS: the background grader keeps checks warm after the first; a step that runs too long is "
                 "stopped with its whole process group; CPU time and file sizes are limited, memory is not (macOS "
                 "does not enforce it); `watch` reads single keys from the terminal.")
    return _("On this Linux set-up: the background grader keeps checks warm after the first; a step that runs too "
             "long is stopped with its whole process group; CPU time, memory and file sizes are limited.")


@main.command()
@click.pass_obj
def steps(obj: dict) -> None:
    """The step registry as JSON (for tools)."""
    click.echo(json.dumps([{"number": s.number, "id": s.id, "names": list(s.names), "section": s.section,
                            "title": s.title, "title_zh": s.title_zh, "core": s.core} for s in STEPS],
                          ensure_ascii=False, indent=2))


@main.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Where the gradebook, reports, feedback and the index go.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Parallel graders (default: all cores).")
@click.option("--resume", is_flag=True, help="Keep what OUT's index already holds; grade only what is missing. Give "
              "the key and settings the run was started with: under others it is refused, before grading.")
@click.option("--regrade", is_flag=True, help="Grade everything again into OUT, replacing what it holds, whatever key "
              "and settings graded it.")
@click.option("--secret", envvar="ATTN_KATA_SECRET", default=None, callback=secret_value,
              help="Key for the hidden cases, or @FILE holding it (or ATTN_KATA_SECRET).")
@click.option("--timeout", type=TIMEOUT, default=DEFAULT_TIMEOUT, show_default=True,
              help="Seconds allowed per step.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary (for scripts).")
@click.option("--step", "steps", multiple=True, help="Grade only these steps (repeatable).")
@click.option("--allow-weak-sandbox", is_flag=True, help="With a secret: grade even where `attn-kata doctor` "
              "finds a needed layer of the Linux sandbox missing (scores may then be gamed). Never on the portable "
              "backend, which holds no secret, waived or not.")
@click.pass_obj
def batch(obj: dict, directory: Path, out: Path, jobs: int | None, resume: bool, regrade: bool, secret: str | None,
          timeout: float, quiet: bool, allow_weak_sandbox: bool, steps: tuple[str, ...]) -> None:
    """Grade every submission in DIRECTORY (folders, .py, .ipynb, LMS zip exports) into OUT.

    Exit 0 when every submission got a report, 1 when some could not be graded (listed), 2 when OUT holds results
    graded under another key or other settings (nothing is graded or written; --regrade replaces them).
    """
    from grader.instructor import console
    from grader.instructor.batch import GradingUnavailable, ResumeRefused
    from grader.render.terminal import plain

    need_input(directory)
    if not directory.is_dir():
        fail(_("attn-kata: {path} is not a directory").format(path=directory))
    if out.exists() and not out.is_dir():
        fail(_("attn-kata: {path} is not a directory").format(path=out))
    try:
        result = console.batch(directory=directory, out=out, jobs=jobs, resume=resume, secret=secret, timeout=timeout,
                           lang=obj["lang"], quiet=quiet, allow_weak_sandbox=allow_weak_sandbox,
                           steps=step_ids(steps) or None, regrade=regrade)
    except ResumeRefused as exc:  # before anything was graded or written
        click.echo(plain(str(exc), newlines=True), err=True)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        click.echo(_("interrupted: what was graded is kept in {out}/index.sqlite; run the same command with --resume "
                     "(and the same --secret) to finish").format(out=out), err=True)
        sys.exit(EXIT_INTERRUPTED)
    except GradingUnavailable as exc:  # the grader's own failure: never recorded as a score
        click.echo(_("attn-kata: grader infrastructure error ({error}): what was graded is kept in "
                     "{out}/index.sqlite; run the same command with --resume (and the same --secret) to finish")
                   .format(error=exc, out=out), err=True)
        sys.exit(EXIT_INFRA)
    except OSError as exc:  # OUT cannot be written
        cannot_write(out, exc)
    sys.exit(0 if result.ok else 1)


@main.command()
@click.argument("out", type=click.Path(path_type=Path, file_okay=False))
@click.pass_obj
def report(obj: dict, out: Path) -> None:
    """Build OUT/class.html and OUT/class.json again from what `batch` left in OUT, without grading."""
    from grader.instructor import classreport

    if not (out / "gradebook.csv").is_file():
        fail(_("attn-kata: {path} holds no gradebook.csv: run `attn-kata batch` into it first").format(path=out))
    try:
        classreport.write(out, obj["lang"])
    except OSError as exc:
        cannot_write(out, exc)
    click.echo(_("class report: {path}").format(path=out / "class.html"), err=True)


from grader.daemon.commands import daemon_group  # noqa: E402
from grader.platforms import gradescope, prairielearn  # noqa: E402
from grader.platforms.classroom import classroom_group  # noqa: E402
from grader.platforms.gradescope import gradescope_group  # noqa: E402
from grader.platforms.nbgrader import nbgrader_group  # noqa: E402
from grader.platforms.prairielearn import prairielearn_group  # noqa: E402

for group in (gradescope_group, nbgrader_group, classroom_group, prairielearn_group, daemon_group):
    main.add_command(group)
PLATFORM_FORMATS = {"gradescope": gradescope, "prairielearn": prairielearn}  # `grade --format`


if __name__ == "__main__":
    main()
