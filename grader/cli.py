"""`attn-kata`: a thin Click layer over plain functions (grader.api)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from . import api
from .registry import STEPS, get_step

LANGS = click.Choice(["en", "zh"])


def _step_ids(values: tuple[str, ...]) -> list[str]:
    ids = []
    for v in values:
        try:
            ids.append(get_step(v).id)
        except KeyError:
            raise click.BadParameter(f"unknown step {v!r}; `attn-kata list` shows the steps") from None
    return ids


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--lang", type=LANGS, default=None, help="Language of learner-facing text (default: from the locale).")
@click.pass_context
def main(ctx: click.Context, lang: str | None) -> None:
    """attention-kata: fill in exercises/, then `attn-kata check`."""
    ctx.obj = {"lang": lang or api.default_lang()}


@main.command("list")
@click.option("--path", "workspace", default="exercises", show_default=True, help="Your workspace.")
@click.pass_obj
def list_cmd(obj: dict, workspace: str) -> None:
    """The steps, with your progress."""
    api.list_steps(workspace=workspace, lang=obj["lang"])


@main.command()
@click.argument("steps", nargs=-1)
@click.option("--path", "workspace", default="exercises", show_default=True, help="Your workspace.")
@click.option("--timeout", default=api.DEFAULT_TIMEOUT, show_default=True, help="Seconds allowed per step.")
@click.pass_obj
def check(obj: dict, steps: tuple[str, ...], workspace: str, timeout: float) -> None:
    """Grade your workspace; exit 0 only when every requested step passes."""
    ok = api.check(workspace=workspace, steps=_step_ids(steps) or None, lang=obj["lang"], timeout=timeout)
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("step")
@click.option("--path", "workspace", default="exercises", show_default=True, help="Your workspace.")
@click.option("--all", "show_all", is_flag=True, help="Show every hint revealed so far.")
@click.pass_obj
def hint(obj: dict, step: str, workspace: str, show_all: bool) -> None:
    """Reveal the next hint for STEP (id or number)."""
    api.hint(step=_step_ids((step,))[0], workspace=workspace, lang=obj["lang"], show_all=show_all)


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "json", "gradescope"]), default="table",
              show_default=True)
@click.option("--secret", envvar="ATTN_KATA_SECRET", default=None, help="Key for the hidden cases "
              "(or ATTN_KATA_SECRET).")
@click.option("--step", "steps", multiple=True, help="Grade only these steps (repeatable).")
@click.option("--timeout", default=api.DEFAULT_TIMEOUT, show_default=True, help="Seconds allowed per step.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write the report here instead of stdout (gradescope: results.json).")
@click.pass_obj
def grade(obj: dict, path: Path, fmt: str, secret: str | None, steps: tuple[str, ...], timeout: float,
          out: Path | None) -> None:
    """Grade one submission: a directory like exercises/, a .py file or a .ipynb notebook."""
    text = api.grade(path=path, fmt=fmt, secret=secret, steps=_step_ids(steps) or None, timeout=timeout,
                     lang=obj["lang"], to_terminal=out is None)
    if out is not None:
        out.write_text(text, encoding="utf-8")
    elif text:
        click.echo(text)


@main.command()
@click.pass_obj
def steps(obj: dict) -> None:
    """The step registry as JSON (for tools)."""
    click.echo(json.dumps([{"number": s.number, "id": s.id, "names": list(s.names), "section": s.section,
                            "title": s.title, "title_zh": s.title_zh, "core": s.core} for s in STEPS],
                          ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
