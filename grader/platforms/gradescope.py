"""Gradescope: build the autograder zip, and grade the one submission inside Gradescope's container.

Gradescope unzips the autograder into /autograder/source, runs setup.sh once when it builds the image,
then for every submission copies run_autograder to /autograder/run_autograder and runs it; the student's
files are in /autograder/submission, and /autograder/results/results.json is what it reads back.
`AUTOGRADER_ROOT` replaces /autograder (tests run the whole thing in a temporary folder).

One module: the zip (`build`), the grading of one upload (`run_autograder`, its script `RUN_AUTOGRADER`; the part
PrairieLearn shares is grader.platforms.container), Gradescope's results.json (`document`, `not_gradable`) and
`attn-kata gradescope build|run` (`gradescope_group`, added by grader.cli).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from grader.cli_args import cannot_write, need_output, secret_value
from grader.files import writing
from grader.i18n import _
from grader.platforms.container import FAILED, Graded, grade_upload, in_language, run_command, run_script, write_results
from grader.settings import IMPORT_ROOT, KATA_ROOT, grader_version
from grader.torch_pin import PIP_FAIL_FAST, TORCH_CPU_INDEX, TORCH_PIN

if TYPE_CHECKING:
    from grader.report import Report

ROOT = IMPORT_ROOT  # a checkout's root; from an installed wheel, site-packages (the kata then in grader/kata/)
TORCH_VERSION = TORCH_PIN  # grader/torch_pin.py: the one pin

SETUP_SH = f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image. Everything goes into a venv
# ($ROOT/venv): Debian 12 and Ubuntu 24.04 images mark their Python externally managed (PEP 668), so pip refuses
# to install into it; `attn-kata` is then linked onto PATH.
set -euxo pipefail
export DEBIAN_FRONTEND=noninteractive
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SRC="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
VENV="$ROOT/venv"
if ! command -v python3 >/dev/null || ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
    apt-get update
    apt-get install -y --no-install-recommends python3 python3-venv
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip
# the CPU build of torch, the pinned version: no CUDA wheels in the image. Its source (docs/platforms.md):
# TORCH_INDEX_URL (PyTorch's CPU index unless set; set it empty to use pip's own PIP_INDEX_URL or pip.conf),
# TORCH_FIND_LINKS (a folder or page holding the wheel), and pip's own PIP_INDEX_URL, PIP_EXTRA_INDEX_URL and
# PIP_FIND_LINKS, which pip reads from the environment. One retry of 15 s, then a message, not minutes of retries.
TORCH_INDEX_URL="${{TORCH_INDEX_URL-{TORCH_CPU_INDEX}}}"
TORCH_SOURCE=()
if [ -n "$TORCH_INDEX_URL" ]; then TORCH_SOURCE+=(--index-url "$TORCH_INDEX_URL"); fi
if [ -n "${{TORCH_FIND_LINKS:-}}" ]; then TORCH_SOURCE+=(--find-links "$TORCH_FIND_LINKS"); fi
"$VENV/bin/python" -m pip install {PIP_FAIL_FAST} "torch=={TORCH_VERSION}" \
    ${{TORCH_SOURCE[@]+"${{TORCH_SOURCE[@]}}"}} || {{
    echo "setup.sh: could not install torch=={TORCH_VERSION} from ${{TORCH_INDEX_URL:-the configured index}}" \
         "${{TORCH_FIND_LINKS:+or $TORCH_FIND_LINKS}}" >&2
    echo "setup.sh: give it a source this image can reach: TORCH_INDEX_URL=URL (a mirror)," \
         "TORCH_FIND_LINKS=DIR (a folder with the wheel), or PIP_INDEX_URL / PIP_FIND_LINKS (docs/platforms.md)" >&2
    exit 1
}}
"$VENV/bin/python" -m pip install -e "$SRC/kata"
mkdir -p "${{ATTN_KATA_BIN_DIR:-/usr/local/bin}}"
ln -sf "$VENV/bin/attn-kata" "${{ATTN_KATA_BIN_DIR:-/usr/local/bin}}/attn-kata"  # `attn-kata doctor` in the image
"$VENV/bin/python" -c "import torch, grader.grading.engine; print('torch', torch.__version__, 'attn-kata ready')"
"""

RUN_AUTOGRADER = run_script(
    platform="gradescope", comment="Gradescope runs this for every submission (copied to $ROOT/run_autograder).",
    root_env="AUTOGRADER_ROOT", root_default="/autograder", source="source",
    python='PY="${ATTN_KATA_PYTHON:-$ROOT/venv/bin/python}"  # setup.sh\'s venv\n[ -x "$PY" ] || PY=python3',
    failed_comment="the grader itself failed: still give Gradescope a result it can show",
    failed_json='{"score": 0, "output": "' + FAILED + '", "tests": [], "stdout_visibility": "visible"}')

KATA_FILES = ("pyproject.toml", "README.md", "LICENSE")
SKIP = {"__pycache__", ".pytest_cache", ".ruff_cache", ".attn-kata"}  # caches; a workspace's progress
# built from an installed wheel, which has no pyproject.toml: just enough for setup.sh's `pip install -e`
MINIMAL_PYPROJECT = """[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "attention-kata"
version = "{version}"
dependencies = {dependencies}

[tool.setuptools.packages.find]
include = ["grader*"]

[tool.setuptools.package-data]
grader = ["checks/pytest.ini", "locale/*/LC_MESSAGES/*.mo", "locale/*/LC_MESSAGES/*.po"]
"""


def _kata_tree() -> list[tuple[str, Path]]:
    """(name in the zip, file): the grader package and the reference, laid out as a checkout (kata/grader,
    kata/solutions) whether this runs from a checkout or from an installed wheel."""
    files = []
    for arc, base in (("grader", ROOT / "grader"), ("solutions", KATA_ROOT / "solutions")):
        for f in sorted(base.rglob("*")):
            rel = f.relative_to(base)
            if arc == "grader" and rel.parts[:1] == ("kata",):
                continue  # a wheel's copy of the kata: solutions/ is added once, below kata/
            if f.is_file() and not f.is_symlink() and not SKIP.intersection(rel.parts) and f.suffix != ".pyc":
                files.append((f"kata/{arc}/{rel.as_posix()}", f))
    return files


def _minimal_pyproject() -> bytes:
    from importlib.metadata import PackageNotFoundError, requires

    try:
        deps = [r for r in requires("attention-kata") or [] if "extra" not in r]
    except PackageNotFoundError:
        deps = []
    return MINIMAL_PYPROJECT.format(version=grader_version(), dependencies=json.dumps(deps)).encode()


def _add(zf: zipfile.ZipFile, arcname: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def build(*, out: str | Path = "autograder.zip", secret: str | None = None) -> Path:
    """Write the autograder zip: setup.sh and run_autograder at the top, the kata under kata/.
    The same sources give the same bytes (fixed timestamps, sorted names)."""
    out = Path(out)
    with writing(out, "wb") as fh, zipfile.ZipFile(fh, "w") as zf:
        _add(zf, "setup.sh", SETUP_SH.encode(), 0o755)
        _add(zf, "run_autograder", RUN_AUTOGRADER.encode(), 0o755)
        for name in KATA_FILES:
            if (ROOT / name).is_file():
                _add(zf, f"kata/{name}", (ROOT / name).read_bytes())
            elif name == "pyproject.toml":
                _add(zf, "kata/pyproject.toml", _minimal_pyproject())
        for arcname, f in _kata_tree():
            _add(zf, arcname, f.read_bytes())
        if secret:
            _add(zf, "secret.txt", secret.encode(), 0o600)
    return out


def find_submission(folder: Path) -> Path | None:
    """What the student uploaded (grader.instructor.discovery.locate): a workspace folder at any depth, else
    the one notebook, else the one .py module; None when there is none or it is ambiguous."""
    from grader.instructor.discovery import locate

    return locate(folder).path if folder.is_dir() else None


def run_autograder(*, root: str | Path = "/autograder", lang: str | None = None) -> Path:
    """Grade ROOT/submission and write ROOT/results/results.json (Gradescope's format); never raises.

    `lang`: the students' language (default: ATTN_KATA_LANG or the locale, see grader.i18n.default_lang)."""
    root = Path(root)

    def grade(lang: str) -> Path:
        return write_results(root, results(grade_upload(root / "submission", lang=lang), root))

    return in_language(lang, grade)


def results(graded: Graded, root: Path) -> dict[str, Any]:
    """What results.json says of one upload: the report, or why there is none (a score of 0 that says why)."""
    if graded.target is None:
        output = _("No submission found: upload a .ipynb notebook, a .py file, or the files of your exercises/ "
                   "folder.")
        if graded.missing:
            output += " " + _("({reason})").format(reason=graded.missing)
        return {"score": 0, "output": output, "tests": [], "stdout_visibility": "visible"}
    if graded.refused:  # nothing ran: the one verdict every platform gives (batch, PrairieLearn): not graded, once
        return not_gradable(graded.refused)
    if graded.error:
        return {"score": 0, "output": _("The autograder failed ({error}). Please tell your instructor.").format(
            error=graded.error), "tests": [], "stdout_visibility": "visible"}
    doc = document(graded.report, graded.elapsed)
    doc["output"] = graded_what(graded.target, root / "submission")
    return doc


def graded_what(target: Path, upload: Path) -> str:
    """results.json's output line: what was graded, as the student uploaded it. A folder (the upload itself, when
    the files lie at its root, or a folder inside it) is named by its first step files."""
    from grader.submission import step_files

    if not target.is_dir():
        return _("Graded {path}").format(path=target.relative_to(upload))
    names = [p.name for p in step_files(target)[0].values()]
    if not names:
        return _("Graded your upload") if target == upload else _("Graded {path}").format(
            path=target.relative_to(upload))
    files = ", ".join(names[:3]) if len(names) <= 3 else _("{files} and {n} more").format(
        files=", ".join(names[:3]), n=len(names) - 3)
    if target == upload:
        return _("Graded your upload ({files})").format(files=files)
    return _("Graded {path}/ ({files})").format(path=target.relative_to(upload), files=files)


def document(report: Report, execution_time: float | None = None, lang: str = "en") -> dict[str, Any]:
    """Gradescope's results.json of a report: one test per check, named by step and check (in the report's
    language already: `lang` is for the signature PrairieLearn's `document` shares). The check's stable id, the same
    in every language, is in the test's `extra_data` (what Gradescope stores without showing it)."""
    from grader.registry import BY_ID

    tests = []
    for s in report.steps:
        number = BY_ID[s.id].number
        for c in s.checks:
            output = c.message if not c.passed else ""
            if s.status in ("not_started", "error") and s.message:
                output = s.message
            tests.append({"name": f"{number}. {s.id}: {c.name}", "score": c.score, "max_score": c.max_score,
                          "status": "passed" if c.passed else "failed", "output": output,
                          "visibility": "visible", "tags": [s.id], "extra_data": {"id": c.id}})
    out: dict[str, Any] = {"score": report.score, "max_score": report.max_score, "tests": tests,
                           "visibility": "visible", "stdout_visibility": "hidden"}
    if execution_time is not None:
        out["execution_time"] = round(execution_time, 3)
    return out


def not_gradable(reason: str) -> dict[str, Any]:
    """Gradescope's results.json for an upload that cannot be graded (empty, unreadable, a syntax error in every
    file): the reason once, no test (Gradescope has no "not gradable": the score is 0, the output says why)."""
    return {"score": 0, "output": _("Not graded: {reason}").format(reason=reason), "tests": [],
            "stdout_visibility": "visible"}


# ---------------------------------------------------------------- `attn-kata gradescope build|run`

@click.group("gradescope")
def gradescope_group() -> None:
    """Gradescope: build the autograder zip, or run inside it."""


@gradescope_group.command("build")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=Path("autograder.zip"),
              show_default=True)
@click.option("--secret", envvar="ATTN_KATA_SECRET", default=None, callback=secret_value,
              help="Bake this key for the hidden cases into the zip (or ATTN_KATA_SECRET).")
def build_command(out: Path, secret: str | None) -> None:
    """The zip Gradescope's autograder setup takes as is (setup.sh, run_autograder, the kata)."""
    need_output(out)
    try:
        path = build(out=out, secret=secret)
    except OSError as exc:
        cannot_write(out, exc)
    click.echo(f"wrote {path}")


gradescope_group.add_command(run_command(
    run=run_autograder, envvar="AUTOGRADER_ROOT", default="/autograder",
    help="What run_autograder calls: grade ROOT/submission, write ROOT/results/results.json."))
