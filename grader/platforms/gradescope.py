"""Gradescope: build the autograder zip, and grade the one submission inside Gradescope's container.

Gradescope unzips the autograder into /autograder/source, runs setup.sh once when it builds the image,
then for every submission copies run_autograder to /autograder/run_autograder and runs it; the student's
files are in /autograder/submission, and /autograder/results/results.json is what it reads back.
`AUTOGRADER_ROOT` replaces /autograder (tests run the whole thing in a temporary folder).
"""

from __future__ import annotations

import json
import time
import zipfile
from pathlib import Path
from typing import Any

from grader.files import write_atomic, writing
from grader.instructor.discovery import locate
from grader.settings import IMPORT_ROOT, KATA_ROOT, grader_version, resolve_secret

ROOT = IMPORT_ROOT  # a checkout's root; from an installed wheel, site-packages (the kata then in grader/kata/)
TORCH_VERSION = "2.13.0"

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
# the CPU build of torch: no CUDA wheels in the image
"$VENV/bin/python" -m pip install "torch=={TORCH_VERSION}" --index-url https://download.pytorch.org/whl/cpu
"$VENV/bin/python" -m pip install -e "$SRC/kata"
mkdir -p "${{ATTN_KATA_BIN_DIR:-/usr/local/bin}}"
ln -sf "$VENV/bin/attn-kata" "${{ATTN_KATA_BIN_DIR:-/usr/local/bin}}/attn-kata"  # `attn-kata doctor` in the image
"$VENV/bin/python" -c "import torch, grader.grading.engine; print('torch', torch.__version__, 'attn-kata ready')"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission (copied to $ROOT/run_autograder).
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SRC="$ROOT/source"
PY="${ATTN_KATA_PYTHON:-$ROOT/venv/bin/python}"  # setup.sh's venv
[ -x "$PY" ] || PY=python3
export AUTOGRADER_ROOT="$ROOT"
export PYTHONPATH="$SRC/kata${PYTHONPATH:+:$PYTHONPATH}"
export ATTN_KATA_SOLUTIONS="$SRC/kata/solutions"
if [ -z "${ATTN_KATA_SECRET:-}" ] && [ -f "$SRC/secret.txt" ]; then
    ATTN_KATA_SECRET="$(cat "$SRC/secret.txt")"
    export ATTN_KATA_SECRET
fi
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
cd "$SRC/kata" || exit 1
"$PY" -m grader gradescope run --root "$ROOT"
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then
    # the grader itself failed: still give Gradescope a result it can show
    printf '%s\\n' '{"score": 0, "output": "The autograder failed to run (exit status '"$status"'). \
Please tell your instructor.", "tests": [], "stdout_visibility": "visible"}' > "$ROOT/results/results.json"
fi
exit 0
"""

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
    with writing(out, "wb") as f, zipfile.ZipFile(f, "w") as zf:
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
    return locate(folder).path if folder.is_dir() else None


def _write(path: Path, doc: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(doc, ensure_ascii=False, indent=2))


def run_autograder(*, root: str | Path = "/autograder", lang: str | None = None) -> Path:
    """Grade ROOT/submission and write ROOT/results/results.json (Gradescope's format); never raises.

    `lang`: the students' language (default: ATTN_KATA_LANG or the locale, see grader.learner.api.default_lang)."""
    from grader import i18n
    from grader.learner.api import default_lang

    lang = lang or default_lang()
    with i18n.using(lang):
        return _run_autograder(Path(root), lang)


def _run_autograder(root: Path, lang: str) -> Path:
    from grader.grading import forked
    from grader.grading.cases_key import per_submission
    from grader.i18n import _
    from grader.render import reporters

    results = root / "results" / "results.json"
    start = time.monotonic()
    found = locate(root / "submission") if (root / "submission").is_dir() else None
    target = found.path if found is not None else None
    if target is None:
        output = _("No submission found: upload a .ipynb notebook, a .py file, or the files of your exercises/ "
                   "folder.")
        if found is not None and found.status not in ("", "empty"):
            output += " " + _("({reason})").format(reason=found.reason)
        _write(results, {"score": 0, "output": output, "tests": [], "stdout_visibility": "visible"})
        return results
    from grader.instructor.batch import screen

    status, problem = screen(target)
    if status:  # nothing runs: the one verdict every platform gives (batch, PrairieLearn): not graded, once
        _write(results, reporters.gradescope_not_gradable(problem))
        return results
    try:
        # hidden cases drawn from this upload's content: feedback read off one attempt is no use in the next
        course = resolve_secret(None)
        # one upload per container: the strong sandbox of that context, checked before any of its code runs
        # in a trusted process forked from the zygote, as a batch grades: torch is imported once per container
        report = forked.grade(target, lang=lang, secret=per_submission(course, root / "submission"),
                              config={"context": "container", "require_strong": bool(course)})
        doc = reporters.gradescope(report, time.monotonic() - start)
        doc["output"] = _("Graded {path}").format(
            path=target.relative_to(root / "submission") if target != root / "submission" else ".")
    except Exception as exc:  # the grader's own failure, not the student's
        doc = {"score": 0, "output": _("The autograder failed ({error}). Please tell your instructor.").format(
            error=f"{type(exc).__name__}: {exc}"), "tests": [], "stdout_visibility": "visible"}
    _write(results, doc)
    return results
