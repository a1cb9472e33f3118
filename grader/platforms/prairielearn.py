"""PrairieLearn: a question folder with an external grader (`attn-kata prairielearn build DIR`), and the grading
of one submission inside PrairieLearn's container (`attn-kata prairielearn run`).

PrairieLearn copies the question's tests/ to /grade/tests and the student's files to /grade/student, runs
`externalGradingOptions.entrypoint`, and reads /grade/results/results.json back (`score` in 0–1, `tests`,
`gradable: false` for a submission that cannot be read, which costs the student no attempt). The kata travels in
tests/kata (the grader and the reference, never shown to students); the image only needs Python and torch
(tests/Dockerfile builds one). `PL_GRADE_ROOT` replaces /grade (tests run the whole thing in a temporary folder).

One module: the question folder (`build`), the grading of one upload (`run`, its script `RUN_SH`; the part
Gradescope shares is grader.platforms.container), PrairieLearn's results.json (`document`, `not_gradable`) and
`attn-kata prairielearn build|run` (`prairielearn_group`, added by grader.cli).
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from grader import limits
from grader.cli_args import cannot_write, fail
from grader.i18n import _
from grader.platforms.container import (
    FAILED,
    Graded,
    chosen_lang,
    grade_upload,
    in_language,
    run_command,
    run_script,
    write_results,
)
from grader.registry import STEPS
from grader.settings import KATA_ROOT, grader_version
from grader.torch_pin import PIP_FAIL_FAST, TORCH_CPU_INDEX, TORCH_PIN

if TYPE_CHECKING:
    from grader.report import Report

PACKAGE = Path(__file__).resolve().parent.parent  # the grader package this runs from (checkout or wheel)
SKIP = {"__pycache__", ".pytest_cache", ".ruff_cache", "kata"}
DEFAULT_IMAGE = "attention-kata/prairielearn-grader"
ENTRYPOINT = "/grade/tests/run.sh"
TIMEOUT_S = limits.PRAIRIELEARN_TIMEOUT  # PrairieLearn's limit is 600

RUN_SH = run_script(
    platform="prairielearn", comment="PrairieLearn runs this (externalGradingOptions.entrypoint) for every submission: "
    "grade /grade/student,\n# write /grade/results/results.json. PL_GRADE_ROOT replaces /grade (for tests).",
    root_env="PL_GRADE_ROOT", root_default="/grade", source="tests", python='PY="${ATTN_KATA_PYTHON:-python3}"',
    failed_comment="the grader itself failed: not the student's fault, so not gradable (no attempt used), never a 0",
    failed_json='{"gradable": false, "format_errors": ["' + FAILED + '"], "tests": []}')

DOCKERFILE = f"""# The image PrairieLearn grades in: Python, the CPU build of torch {TORCH_PIN} (the kata: /grade/tests)
# docker build -t YOU/attn-kata-grader . && docker push YOU/attn-kata-grader, then set "image" in info.json.
# In a venv: on a Debian 12 or Ubuntu 24.04 base (python3 from apt) pip refuses the system Python (PEP 668).
# torch's source (docs/platforms.md): --build-arg TORCH_INDEX_URL=URL (a mirror; empty: pip's own index),
# TORCH_FIND_LINKS=URL (a page with the wheel, e.g. `python -m http.server` beside it), pip's own PIP_INDEX_URL,
# PIP_EXTRA_INDEX_URL and PIP_FIND_LINKS, passed through. One retry of 15 s, then a message.
FROM python:3.11-slim
ARG TORCH_INDEX_URL={TORCH_CPU_INDEX}
ARG TORCH_FIND_LINKS=
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ENV VIRTUAL_ENV=/opt/attn-kata PATH=/opt/attn-kata/bin:$PATH ATTN_KATA_PYTHON=/opt/attn-kata/bin/python
RUN python -m venv /opt/attn-kata \\
 && /opt/attn-kata/bin/python -m pip install --no-cache-dir {PIP_FAIL_FAST} "torch=={TORCH_PIN}" \\
    ${{TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}} ${{TORCH_FIND_LINKS:+--find-links "$TORCH_FIND_LINKS"}} \\
 || {{ echo "Dockerfile: could not install torch=={TORCH_PIN} from ${{TORCH_INDEX_URL:-the configured index}}" \\
      "${{TORCH_FIND_LINKS:+or $TORCH_FIND_LINKS}}; give it a source this build can reach:" \\
      "--build-arg TORCH_INDEX_URL=URL, TORCH_FIND_LINKS=DIR or PIP_INDEX_URL=URL (docs/platforms.md)" >&2; exit 1; }}
RUN /opt/attn-kata/bin/python -m pip install --no-cache-dir numpy "safetensors>=0.4" "pytest>=8" "click>=8.1" \\
    "rich>=13" "nbformat>=5" "platformdirs>=3" "watchfiles>=0.21"
# `attn-kata` on PATH (e.g. `attn-kata doctor` in the image), from the kata PrairieLearn mounts in /grade/tests
RUN printf '#!/bin/sh\\nexport PYTHONPATH=/grade/tests/kata${{PYTHONPATH:+:$PYTHONPATH}}\\nexec %s -m grader "$@"\\n' \\
    /opt/attn-kata/bin/python > /usr/local/bin/attn-kata && chmod 755 /usr/local/bin/attn-kata
"""

QUESTION_HTML = """<pl-question-panel>
  <p>Chapter 3 of <i>Build a Large Language Model (From Scratch)</i>: coding attention mechanisms.</p>
  <p>Write the chapter's functions and classes ({names}) in <code>attention.py</code> below, or upload your
  notebook (<code>.ipynb</code>) or the <code>.py</code> files of your <code>exercises/</code> folder.
  Each step is checked on hidden inputs; every check is worth one point.</p>
</pl-question-panel>

<pl-file-editor file-name="attention.py" ace-mode="ace/mode/python" source-file-name="attention.py"></pl-file-editor>

<pl-file-upload optional-file-patterns="*.ipynb, *.py"></pl-file-upload>

<pl-submission-panel>
  <pl-external-grader-results></pl-external-grader-results>
  <pl-file-preview></pl-file-preview>
</pl-submission-panel>
"""

STARTER = """import torch
import torch.nn as nn

# Write the chapter's functions and classes here, with the book's names:
# {names}
"""


class PrairieLearnError(Exception):
    """A usage problem, worded for the instructor (the CLI shows it on one line, exit 2)."""


def info(*, image: str, lang: str, title: str) -> dict[str, Any]:
    """The question's info.json (PrairieLearn's documented fields; external grading enabled)."""
    return {"uuid": str(uuid.uuid4()), "title": title, "topic": "Attention mechanisms",
            "tags": ["attention-kata", "llm-from-scratch", "chapter3"], "type": "v3", "singleVariant": True,
            "gradingMethod": "External",
            "externalGradingOptions": {"enabled": True, "image": image, "entrypoint": ENTRYPOINT,
                                       "timeout": TIMEOUT_S, "environment": {"ATTN_KATA_LANG": lang}}}


def build(directory: Path, *, image: str = DEFAULT_IMAGE, lang: str = "en", secret: str | None = None,
          force: bool = False) -> Path:
    """Lay out the question folder: info.json, question.html, the editor's starter file, tests/ (run.sh, the kata,
    a Dockerfile for the image)."""
    if (directory / "info.json").exists() and not force:
        raise PrairieLearnError(_("attn-kata: {path} exists (--force replaces it)").format(
            path=directory / "info.json"))
    tests = directory / "tests"
    if (tests / "kata").exists():
        shutil.rmtree(tests / "kata")
    tests.mkdir(parents=True, exist_ok=True)
    names = ", ".join(n for s in STEPS for n in s.names)
    title = "Coding attention mechanisms (chapter 3)"
    (directory / "info.json").write_text(json.dumps(info(image=image, lang=lang, title=title), indent=2) + "\n",
                                         encoding="utf-8")
    (directory / "question.html").write_text(QUESTION_HTML.format(names=names), encoding="utf-8")
    (directory / "attention.py").write_text(STARTER.format(names=names), encoding="utf-8")
    run = tests / "run.sh"
    run.write_text(RUN_SH, encoding="utf-8")
    run.chmod(0o755)
    (tests / "Dockerfile").write_text(DOCKERFILE, encoding="utf-8")
    _copy_kata(tests / "kata")
    secret_file = tests / "secret.txt"
    if secret:
        secret_file.write_text(secret, encoding="utf-8")
        secret_file.chmod(0o600)
    else:
        secret_file.unlink(missing_ok=True)
    return directory


def _copy_kata(dest: Path) -> None:
    """The grader package and the reference, laid out as a checkout (kata/grader, kata/solutions)."""
    for name, base in (("grader", PACKAGE), ("solutions", KATA_ROOT / "solutions")):
        for f in sorted(base.rglob("*")):
            rel = f.relative_to(base)
            if SKIP.intersection(rel.parts) or f.suffix == ".pyc" or not f.is_file() or f.is_symlink():
                continue
            target = dest / name / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, target)
    (dest / "VERSION").write_text(grader_version() + "\n", encoding="utf-8")


def run(*, root: str | Path = "/grade", lang: str | None = None) -> Path:
    """Grade ROOT/student and write ROOT/results/results.json (PrairieLearn's format); never raises.

    `lang`: the students' language (default: ATTN_KATA_LANG, set by info.json's environment, or the locale)."""
    root = Path(root)

    def grade(lang: str) -> Path:
        return write_results(root, results(grade_upload(root / "student", lang=lang, ready=_started), lang))

    return in_language(lang, grade)


def results(graded: Graded, lang: str) -> dict[str, Any]:
    """What results.json says of one upload: the report, or why it is not gradable (no attempt used)."""
    if graded.target is None:
        reason = _("No submission found: write attention.py, or upload a .ipynb notebook or the .py files of your "
                   "exercises/ folder.")
        return not_gradable(reason + (" " + _("({reason})").format(reason=graded.missing) if graded.missing else ""))
    if graded.refused:  # nothing ran: empty, unreadable, a syntax error in every file, too large, the starter file
        return not_gradable(graded.refused)
    if graded.error:  # the grader's own failure, not the student's: no attempt used, never a 0
        return not_gradable(_("The autograder failed ({error}). Please tell your instructor.").format(
            error=graded.error))
    return document(graded.report, graded.elapsed, lang)


def _started(target: Path) -> str:
    """The untouched starter file (imports, a comment) is not graded: no attempt spent on it."""
    if defines_a_step_name(target):
        return ""
    return _("nothing to grade yet: {path} defines none of the chapter's functions and classes ({names}, …)").format(
        path=target.name, names=", ".join(n for s in STEPS[:3] for n in s.names))


def document(report: Report, execution_time: float | None = None, lang: str = "en") -> dict[str, Any]:
    """PrairieLearn's results.json of a report: `score` in 0–1, one test per check (name, points, max_points,
    message, output, and `id`: the check's stable id, the same in every language), the table as `output`. A
    submission that could not be read at all is `gradable: false` (the student keeps the attempt) with the reason in
    `format_errors`."""
    from rich.console import Console

    from grader import i18n
    from grader.registry import BY_ID
    from grader.render.reporters import table

    if report.steps and all(s.detail == "rejected_input" for s in report.steps):
        return not_gradable(report.steps[0].message)
    tests = []
    for s in report.steps:
        diagnoses = "\n".join(d.get("message", "") for d in s.diagnoses)
        for c in s.checks:
            message = c.message if not c.passed else ""
            if s.status in ("not_started", "error") and s.message:
                message = s.message
            tests.append({"id": c.id, "name": f"{BY_ID[s.id].number}. {s.id}: {c.name}", "description": s.title,
                          "points": c.score, "max_points": c.max_score, "message": message,
                          "output": diagnoses if not c.passed else ""})
    console = Console(width=100, force_terminal=False, color_system=None)
    with console.capture() as captured:
        table(report, console, lang=lang)
    with i18n.using(lang):
        message = _("{score:g} / {max_score:g} points").format(score=report.score, max_score=report.max_score)
    return {"gradable": True, "score": round(report.score / report.max_score, 6) if report.max_score else 0.0,
            "message": message, "output": captured.get(), "tests": tests}


def not_gradable(reason: str) -> dict[str, Any]:
    """What PrairieLearn shows as "invalid, not gradable": no points awarded or lost, no attempt used."""
    return {"gradable": False, "format_errors": [reason], "message": reason, "tests": []}


def defines_a_step_name(path: Path) -> bool:
    """Does the submission define (def, class, or assign at its top level) any name a step asks for? The editor's
    starter file defines none. Read as text, nothing runs; what cannot be read counts as defining (screen judged
    it readable, so grading says the rest)."""
    import ast

    from grader.grading import ingest

    wanted = {n for s in STEPS for n in s.names}
    try:
        units = ingest.read_submission(path).units
    except Exception:  # screen() read it; anything odd here is for grading to report
        return True
    for unit in units:
        try:
            tree = ast.parse(unit.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in wanted:
                return True
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            if any(isinstance(t, ast.Name) and t.id in wanted for t in targets):
                return True
            if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                    (a.asname or a.name).split(".")[0] in wanted for a in node.names):
                return True
    return False


# ---------------------------------------------------------------- `attn-kata prairielearn build|run`

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
def build_command(directory: Path, image: str | None, secret: str | None, force: bool) -> None:
    """Lay out a question folder in DIRECTORY: info.json, question.html, tests/ (run.sh, the kata)."""
    if directory.exists() and not directory.is_dir():
        fail(_("attn-kata: {path} is not a directory").format(path=directory))
    try:
        build(directory, image=image or DEFAULT_IMAGE, lang=chosen_lang(), secret=secret, force=force)
    except PrairieLearnError as exc:
        fail(str(exc))
    except OSError as exc:
        cannot_write(directory, exc)
    click.echo(f"wrote {directory}")


prairielearn_group.add_command(run_command(
    run=run, envvar="PL_GRADE_ROOT", default="/grade",
    help="What tests/run.sh calls: grade ROOT/student, write ROOT/results/results.json."))
