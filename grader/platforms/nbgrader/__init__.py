"""nbgrader: make the chapter an nbgrader assignment, and autograde it in the sandbox into nbgrader's gradebook.

One subpackage: its build (`assignment`: the source notebook and `assert_step`, which its hidden test cells call),
its run (`autograde`: submitted/ graded by the engine, scores written to the gradebook) and here, its Click group
`attn-kata nbgrader assignment|autograde` (`nbgrader_group`, added by grader.cli). nbgrader itself is an extra
(`pip install "attention-kata[nbgrader]"`), imported only when a command needs it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

NEEDS_EXTRA = 'this needs nbgrader, which the plain install leaves out: pip install "attention-kata[nbgrader]"'


def have_nbgrader() -> bool:
    import importlib.util

    return importlib.util.find_spec("nbgrader") is not None


@click.group("nbgrader")
def nbgrader_group() -> None:
    """nbgrader integration: the source notebook, and a sandboxed autograde into nbgrader's gradebook."""


@nbgrader_group.command("assignment")
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--step", "steps", multiple=True, help="Only these steps (repeatable; default: all).")
def assignment_cmd(out: Path, steps: tuple[str, ...]) -> None:
    """Write the nbgrader source notebook to OUT (a folder such as source/ps1, or a .ipynb path)."""
    from grader.cli_args import step_ids
    from grader.platforms.nbgrader.assignment import next_step, write_assignment

    path = write_assignment(out, step_ids(steps) or None)
    click.echo(f"wrote {path}; {next_step(path)}")
    if not have_nbgrader():
        click.echo(f"note: {NEEDS_EXTRA}", err=True)


@nbgrader_group.command("autograde")
@click.argument("course_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("assignment")
@click.option("--student", "students", multiple=True, help="Only these students (repeatable).")
@click.option("--db", "db_url", default=None, help="Gradebook URL (default: sqlite:///COURSE_DIR/gradebook.db).")
@click.option("--secret", envvar="ATTN_KATA_SECRET", default=None, help="Key for the hidden cases.")
@click.option("--timeout", default=None, type=float, help="Seconds allowed per step.")
def autograde_cmd(course_dir: Path, assignment: str, students: tuple[str, ...], db_url: str | None,
                  secret: str | None, timeout: float | None) -> None:
    """Grade COURSE_DIR/submitted/*/ASSIGNMENT with the sandboxed engine; scores go to nbgrader's gradebook."""
    from grader.platforms.nbgrader.autograde import autograde_course

    if not have_nbgrader():
        click.echo(f"attn-kata nbgrader autograde: {NEEDS_EXTRA}", err=True)
        sys.exit(2)
    try:
        graded = autograde_course(course_dir, assignment, students=students or None, db_url=db_url,
                                  secret=secret, timeout=timeout)
    except Exception as exc:  # an unknown assignment, an unreadable gradebook: say so, no traceback
        click.echo(f"autograde failed: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)
    for g in graded:  # one line per student and notebook: the score, or why there is none
        if g.error:
            click.echo(f"{g.student}\t{g.notebook or '-'}\tnot graded: {g.error}")
        else:
            click.echo(f"{g.student}\t{g.notebook}\t{g.report.score:g}/{g.report.max_score:g}")
    if not graded:
        click.echo(f"no submissions found under {course_dir}/submitted/*/{assignment}", err=True)
    failed = [g for g in graded if g.error]
    if failed:  # as nbgrader's own autograde: everyone else is graded, and the status says someone was not
        names = ", ".join(dict.fromkeys(g.student for g in failed))
        click.echo(f"{len(failed)} of {len(graded)} notebooks not graded ({names}), the lines above say why; in "
                   "the gradebook each scores 0, flagged, with the reason as its comment; rerun with --student "
                   "once fixed", err=True)
        sys.exit(1)
