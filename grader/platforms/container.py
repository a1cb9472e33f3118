"""What Gradescope and PrairieLearn share: a platform's container runs a script that grades one upload and writes
ROOT/results/results.json. The script (`run_script`), the grading of the one upload (`grade_upload`) and the
`attn-kata <platform> run` command (`run_command`) are written once here; each platform's module keeps only what
is its own: its paths, its words and its results.json.

The platforms' commands share `lang` too: the language `attn-kata --lang` chose.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from grader.cli_args import cannot_write

RUN_SCRIPT = """#!/usr/bin/env bash
# {comment}
set -uo pipefail
ROOT="${{{root_env}:-{root_default}}}"
SRC="$ROOT/{source}"
{python}
export {root_env}="$ROOT"
export PYTHONPATH="$SRC/kata${{PYTHONPATH:+:$PYTHONPATH}}"
export ATTN_KATA_SOLUTIONS="$SRC/kata/solutions"
if [ -z "${{ATTN_KATA_SECRET:-}}" ] && [ -f "$SRC/secret.txt" ]; then
    ATTN_KATA_SECRET="$(cat "$SRC/secret.txt")"
    export ATTN_KATA_SECRET
fi
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
cd "$SRC/kata" || exit 1
"$PY" -m grader {platform} run --root "$ROOT"
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then
    # {failed_comment}
    printf '%s\\n' '{failed_json}' > "$ROOT/results/results.json"
fi
exit 0
"""
# where the exit status goes in the script's fallback results.json (the JSON is in single quotes in the script)
STATUS = "'\"$status\"'"
FAILED = "The autograder failed to run (exit status " + STATUS + "). Please tell your instructor."


def run_script(*, platform: str, comment: str, root_env: str, root_default: str, source: str, python: str,
               failed_comment: str, failed_json: str) -> str:
    """The script a platform's container runs for every submission: the kata (ROOT/SOURCE/kata) on the path and
    the course key (ROOT/SOURCE/secret.txt) in the environment, `python -m grader PLATFORM run`, and, when the
    grader itself wrote nothing, `failed_json` (where FAILED stands, with the exit status) so that the student
    still sees a result. `python` sets PY, the interpreter."""
    return RUN_SCRIPT.format(platform=platform, comment=comment, root_env=root_env, root_default=root_default,
                             source=source, python=python, failed_comment=failed_comment, failed_json=failed_json)


@dataclass
class Graded:
    """One upload graded in a platform's container; what happened is the first of these that is set."""

    target: Path | None = None  # the submission found in the upload
    missing: str = ""  # no submission found: why, in words ("" when the upload simply holds no .py or .ipynb)
    refused: str = ""  # found, but not gradable (nothing ran): the reason, said once
    error: str = ""  # the grader's own failure, never the student's
    report: Any = None  # grader.report.Report
    elapsed: float = 0.0  # seconds, from the search for the submission to the report


def grade_upload(upload: Path, *, lang: str, ready: Callable[[Path], str] | None = None) -> Graded:
    """Find the submission in UPLOAD (grader.instructor.discovery.locate), screen it (what cannot be read is not
    graded: batch's one verdict), ask `ready` (a platform's own reason not to grade yet, or ""), then grade it as a
    batch does, in a trusted process forked from the zygote; never raises.

    The hidden cases are drawn from the course key and this upload's content, so feedback read off one attempt is
    no use in the next; one upload per container: the strong sandbox of that context, checked before any of its
    code runs."""
    from grader.instructor.batch import screen
    from grader.instructor.discovery import EMPTY, locate

    start = time.monotonic()
    found = locate(upload) if upload.is_dir() else None
    if found is None or found.path is None:
        return Graded(missing=found.reason if found is not None and found.status not in ("", EMPTY) else "")
    status, problem = screen(found.path)
    if status:  # empty, unreadable, a syntax error in every file, too large: nothing runs
        return Graded(found.path, refused=problem)
    why = ready(found.path) if ready is not None else ""
    if why:
        return Graded(found.path, refused=why)
    try:
        from grader.grading import forked
        from grader.grading.cases_key import per_submission
        from grader.settings import resolve_secret

        course = resolve_secret(None)
        report = forked.grade(found.path, lang=lang, secret=per_submission(course, upload),
                              config={"context": "container", "require_strong": bool(course)})
    except Exception as exc:  # the grader's own failure, not the student's
        return Graded(found.path, error=f"{type(exc).__name__}: {exc}")
    return Graded(found.path, report=report, elapsed=time.monotonic() - start)


def write_results(root: Path, doc: dict[str, Any]) -> Path:
    """Write ROOT/results/results.json, whole or not at all (the script's fallback then speaks)."""
    from grader.files import write_atomic

    path = root / "results" / "results.json"
    write_atomic(path, json.dumps(doc, ensure_ascii=False, indent=2))
    return path


def in_language(lang: str | None, work: Callable[[str], Path]) -> Path:
    """`work(lang)` with every learner-facing text in `lang` (default: ATTN_KATA_LANG, else the locale)."""
    from grader import i18n

    lang = lang or i18n.default_lang()
    with i18n.using(lang):
        return work(lang)


def chosen_lang() -> str:
    """The language `attn-kata --lang` (or the locale, or the workspace) chose for this command."""
    obj = click.get_current_context().find_root().obj or {}
    return obj.get("lang") or "en"


def run_command(*, run: Callable[..., Path], envvar: str, default: str, help: str) -> click.Command:
    """`attn-kata <platform> run [--root ROOT]`: grade the upload under ROOT and write ROOT/results/results.json."""

    @click.command("run", help=help)
    @click.option("--root", type=click.Path(path_type=Path, file_okay=False), envvar=envvar, default=Path(default),
                  show_default=True)
    def command(root: Path) -> None:
        try:
            path = run(root=root)
        except OSError as exc:  # ROOT/results cannot be written: nothing can report the failure but this line
            cannot_write(root / "results", exc)
        click.echo(f"wrote {path}")

    return command
