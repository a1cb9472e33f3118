"""PrairieLearn: a question folder with an external grader (`attn-kata prairielearn build DIR`), and the grading
of one submission inside PrairieLearn's container (`attn-kata prairielearn run`).

PrairieLearn copies the question's tests/ to /grade/tests and the student's files to /grade/student, runs
`externalGradingOptions.entrypoint`, and reads /grade/results/results.json back (`score` in 0–1, `tests`,
`gradable: false` for a submission that cannot be read, which costs the student no attempt). The kata travels in
tests/kata (the grader and the reference, never shown to students); the image only needs Python and torch
(tests/Dockerfile builds one). `PL_GRADE_ROOT` replaces /grade (tests run the whole thing in a temporary folder).
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from grader import limits
from grader.files import write_atomic
from grader.registry import STEPS
from grader.settings import KATA_ROOT, grader_version

PACKAGE = Path(__file__).resolve().parent.parent  # the grader package this runs from (checkout or wheel)
SKIP = {"__pycache__", ".pytest_cache", ".ruff_cache", "kata"}
DEFAULT_IMAGE = "attention-kata/prairielearn-grader"
ENTRYPOINT = "/grade/tests/run.sh"
TIMEOUT_S = limits.PRAIRIELEARN_TIMEOUT  # PrairieLearn's limit is 600

RUN_SH = """#!/usr/bin/env bash
# PrairieLearn runs this (externalGradingOptions.entrypoint) for every submission: grade /grade/student,
# write /grade/results/results.json. PL_GRADE_ROOT replaces /grade (for tests).
set -uo pipefail
ROOT="${PL_GRADE_ROOT:-/grade}"
TESTS="$ROOT/tests"
PY="${ATTN_KATA_PYTHON:-python3}"
export PYTHONPATH="$TESTS/kata${PYTHONPATH:+:$PYTHONPATH}"
export ATTN_KATA_SOLUTIONS="$TESTS/kata/solutions"
if [ -z "${ATTN_KATA_SECRET:-}" ] && [ -f "$TESTS/secret.txt" ]; then
    ATTN_KATA_SECRET="$(cat "$TESTS/secret.txt")"
    export ATTN_KATA_SECRET
fi
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
cd "$TESTS/kata" || exit 1
"$PY" -m grader prairielearn run --root "$ROOT"
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then
    # the grader itself failed: not the student's fault, so not gradable (no attempt used), never a 0
    printf '%s\\n' '{"gradable": false, "format_errors": ["The autograder failed to run (exit status '"$status"'). \
Please tell your instructor."], "tests": []}' > "$ROOT/results/results.json"
fi
exit 0
"""

DOCKERFILE = """# The image PrairieLearn grades in: Python and the CPU build of torch (the kata comes in /grade/tests).
# docker build -t YOU/attn-kata-grader . && docker push YOU/attn-kata-grader, then set "image" in info.json.
# In a venv: on a Debian 12 or Ubuntu 24.04 base (python3 from apt) pip refuses the system Python (PEP 668).
FROM python:3.11-slim
ENV VIRTUAL_ENV=/opt/attn-kata PATH=/opt/attn-kata/bin:$PATH ATTN_KATA_PYTHON=/opt/attn-kata/bin/python
RUN python -m venv /opt/attn-kata \\
 && /opt/attn-kata/bin/python -m pip install --no-cache-dir torch --index-url https://download.pytorch.org/whl/cpu \\
 && /opt/attn-kata/bin/python -m pip install --no-cache-dir numpy "safetensors>=0.4" "pytest>=8" "click>=8.1" \\
    "rich>=13" "nbformat>=5" "platformdirs>=3" "watchfiles>=0.21"
# `attn-kata` on PATH (e.g. `attn-kata doctor` in the image), from the kata PrairieLearn mounts in /grade/tests
RUN printf '#!/bin/sh\\nexport PYTHONPATH=/grade/tests/kata${PYTHONPATH:+:$PYTHONPATH}\\nexec %s -m grader "$@"\\n' \\
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
        from grader.i18n import _

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
    from grader import i18n
    from grader.learner.api import default_lang

    lang = lang or default_lang()
    with i18n.using(lang):
        return _run(Path(root), lang)


def _run(root: Path, lang: str) -> Path:
    from grader.i18n import _
    from grader.instructor.batch import screen
    from grader.instructor.discovery import locate
    from grader.render import reporters

    results = root / "results" / "results.json"
    student = root / "student"
    found = locate(student) if student.is_dir() else None
    target = found.path if found is not None else None
    if target is None:
        reason = _("No submission found: write attention.py, or upload a .ipynb notebook or the .py files of your "
                   "exercises/ folder.")
        if found is not None and found.status not in ("", "empty"):
            reason += " " + _("({reason})").format(reason=found.reason)
        _write(results, reporters.not_gradable(reason))
        return results
    status, problem = screen(target)
    if status:  # nothing runs: empty, unreadable, a syntax error in every file, too large
        _write(results, reporters.not_gradable(problem))
        return results
    if not defines_a_step_name(target):  # the untouched starter file (imports, a comment): no attempt spent on it
        _write(results, reporters.not_gradable(_("nothing to grade yet: {path} defines none of the chapter's "
                                                 "functions and classes ({names}, …)").format(
            path=target.name, names=", ".join(n for s in STEPS[:3] for n in s.names))))
        return results
    try:
        from grader.grading import forked
        from grader.grading.cases_key import per_submission
        from grader.settings import resolve_secret

        # hidden cases drawn from this upload's content: feedback read off one attempt is no use in the next
        course = resolve_secret(None)
        secret = per_submission(course, student)
        # one upload per container: the strong sandbox of that context, checked before any of its code runs; in a
        # trusted process forked from the zygote, as a batch grades: torch is imported once per container
        report = forked.grade(target, lang=lang, secret=secret,
                              config={"context": "container", "require_strong": bool(course)})
        doc = reporters.prairielearn(report, lang)
    except Exception as exc:  # the grader's own failure, not the student's: no attempt used, never a 0
        doc = reporters.not_gradable(_("The autograder failed ({error}). Please tell your instructor.").format(
            error=f"{type(exc).__name__}: {exc}"))
    _write(results, doc)
    return results


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


def _write(path: Path, doc: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(doc, ensure_ascii=False, indent=2))
