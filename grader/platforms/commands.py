"""`attn-kata classroom …` and `attn-kata prairielearn …`: the platforms' commands (registered by grader.cli)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grader.i18n import _

EXIT_USAGE = 2  # as grader.cli: a usage problem, one line on stderr


def _fail(message: str) -> None:
    click.echo(message, err=True)
    sys.exit(EXIT_USAGE)


def _lang() -> str:
    ctx = click.get_current_context()
    obj = ctx.find_root().obj or {}
    return obj.get("lang") or "en"


@click.group("classroom")
def classroom_group() -> None:
    """GitHub Classroom: the autograding workflow of a template repository."""


@classroom_group.command("init")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False), default=".")
@click.option("--path", "workspace", default="exercises", show_default=True,
              help="The students' workspace inside the repository (the stubs are copied there if it has none).")
@click.option("--install", default=None, help="What the workflow pip-installs for attention-kata (default: "
              "this kata's git repository at this commit when run from a clone with a remote, else "
              "attention-kata==<this version> from PyPI; any pip requirement, e.g. a git URL).")
@click.option("--python", "python", default="3.11", show_default=True, help="Python version on the runner.")
@click.option("--force", is_flag=True, help="Replace an existing workflow.")
def classroom_init(directory: Path, workspace: str, install: str | None, python: str, force: bool) -> None:
    """Write DIRECTORY/.github/workflows/classroom.yml: one command-grader test per step, then the reporter."""
    from grader.platforms import classroom

    if directory.exists() and not directory.is_dir():
        _fail(_("attn-kata: {path} is not a directory").format(path=directory))
    try:
        written = classroom.init(directory, path=workspace, lang=_lang(), install=install, python=python,
                                 force=force)
    except classroom.ClassroomError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(_("attn-kata: cannot write {path} ({error})").format(path=directory, error=exc.strerror or exc))
    for path in written:
        click.echo(f"wrote {path}")


@click.group("prairielearn")
def prairielearn_group() -> None:
    """PrairieLearn: an externally graded question folder, and the grading inside its container."""


@prairielearn_group.command("build")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@click.option("--image", default=None, help="The Docker image PrairieLearn runs the grader in (Python and torch; "
              "tests/Dockerfile builds one).")
@click.option("--secret", envvar="ATTN_KATA_SECRET", default=None,
              help="Put this key for the hidden cases in tests/ (or ATTN_KATA_SECRET).")
@click.option("--force", is_flag=True, help="Replace an existing question.")
def prairielearn_build(directory: Path, image: str | None, secret: str | None, force: bool) -> None:
    """Lay out a question folder in DIRECTORY: info.json, question.html, tests/ (run.sh, the kata)."""
    from grader.platforms import prairielearn as pl

    if directory.exists() and not directory.is_dir():
        _fail(_("attn-kata: {path} is not a directory").format(path=directory))
    try:
        pl.build(directory, image=image or pl.DEFAULT_IMAGE, lang=_lang(), secret=secret, force=force)
    except pl.PrairieLearnError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(_("attn-kata: cannot write {path} ({error})").format(path=directory, error=exc.strerror or exc))
    click.echo(f"wrote {directory}")


@prairielearn_group.command("run")
@click.option("--root", type=click.Path(path_type=Path, file_okay=False), envvar="PL_GRADE_ROOT",
              default=Path("/grade"), show_default=True)
def prairielearn_run(root: Path) -> None:
    """What tests/run.sh calls: grade ROOT/student, write ROOT/results/results.json."""
    from grader.platforms import prairielearn as pl

    try:
        path = pl.run(root=root)
    except OSError as exc:  # ROOT/results cannot be written: nothing can report the failure but this line
        _fail(_("attn-kata: cannot write {path} ({error})").format(path=root / "results", error=exc.strerror or exc))
    click.echo(f"wrote {path}")
