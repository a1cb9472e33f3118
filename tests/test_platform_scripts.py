"""The platforms' scripts on today's images (issue 25): Gradescope's setup.sh on an externally managed Python
(Debian 12, Ubuntu 24.04: pip refuses the system Python), `attn-kata` on PATH, one verdict for an unreadable upload
on every platform, and PrairieLearn's untouched starter file not counted as an attempt."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from test_gradescope import gradescope_tree  # tests/test_gradescope.py: the same layout

ROOT = Path(__file__).resolve().parent.parent

# python3 as Debian 12 ships it (PEP 668): pip refuses to install outside a venv; `-m venv DIR` makes a venv whose
# python is this same script (so the venv's pip works), with an `attn-kata` entry point as pip would install it
EXTERNALLY_MANAGED_PYTHON = r"""#!/usr/bin/env bash
echo "$0 $*" >> "$FAKE_LOG"
here="$(cd "$(dirname "$0")" && pwd)"
case "$1" in
  -c) exit 0 ;;
  -m)
    case "$2" in
      venv) mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && printf 'home = /usr/bin\n' > "$3/pyvenv.cfg" \
              && printf '#!/bin/sh\n' > "$3/bin/attn-kata" && chmod +x "$3/bin/attn-kata"; exit 0 ;;
      pip) if [ -f "$here/../pyvenv.cfg" ]; then exit 0; fi
           echo "error: externally-managed-environment" >&2; exit 1 ;;
    esac ;;
esac
exit 0
"""


def test_gradescope_setup_installs_into_a_venv_on_an_externally_managed_python(tmp_path: Path,
                                                                              autograder_zip: Path) -> None:
    root = gradescope_tree(tmp_path, autograder_zip)
    fake, log = tmp_path / "fakebin", tmp_path / "calls.log"
    fake.mkdir()
    (fake / "python3").write_text(EXTERNALLY_MANAGED_PYTHON)
    (fake / "apt-get").write_text("#!/bin/sh\necho \"apt-get $*\" >> \"$FAKE_LOG\"\nexit 1\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "FAKE_LOG": str(log), "AUTOGRADER_ROOT": str(root),
           "ATTN_KATA_BIN_DIR": str(tmp_path / "usr-local-bin"), "HOME": str(tmp_path)}
    system_pip = subprocess.run([str(fake / "python3"), "-m", "pip", "install", "x"], env=env, capture_output=True,
                                text=True, timeout=30)
    assert system_pip.returncode == 1 and "externally-managed-environment" in system_pip.stderr  # as Debian 12
    log.unlink()
    setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True,
                           timeout=60)
    assert setup.returncode == 0, setup.stderr[-2000:]
    calls = log.read_text().splitlines()
    pips = [c for c in calls if " -m pip " in c]
    assert len(pips) == 3 and all(c.startswith(f"{root}/venv/bin/python -m pip install") for c in pips), calls
    assert any("torch==" in c and "download.pytorch.org/whl/cpu" in c for c in pips)
    assert not any(c.startswith("apt-get") for c in calls)  # python3 and venv were there: nothing to install
    link = tmp_path / "usr-local-bin" / "attn-kata"
    assert link.is_symlink() and Path(os.readlink(link)) == root / "venv" / "bin" / "attn-kata"  # on PATH


def test_run_autograder_uses_setups_venv(tmp_path: Path, autograder_zip: Path) -> None:
    """Without ATTN_KATA_PYTHON: the venv setup.sh made, never the image's python3 (which lacks the packages)."""
    root = gradescope_tree(tmp_path, autograder_zip)
    (root / "venv" / "bin").mkdir(parents=True)
    venv_python = root / "venv" / "bin" / "python"  # stands for setup.sh's venv: this one's python, packages and all
    venv_python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    venv_python.chmod(0o755)
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\necho 'not this python' >&2\nexit 7\n")
    (fake / "python3").chmod(0o755)
    shutil.copy(ROOT / "solutions" / "step01_dot_scores.py", root / "submission" / "dot_scores.py")
    env = {"PATH": f"{fake}:/usr/bin:/bin", "AUTOGRADER_ROOT": str(root), "HOME": str(tmp_path),
           "ATTN_KATA_NO_DAEMON": "1"}
    proc = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=300, cwd=root)
    assert proc.returncode == 0 and "not this python" not in proc.stderr, proc.stderr[-2000:]
    res = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert res["score"] == 5 and res["tests"], res.get("output")  # dot_scores passes: 5 points


def test_the_prairielearn_image_uses_a_venv_and_puts_the_command_on_path() -> None:
    from grader.platforms import prairielearn as pl

    lines = pl.DOCKERFILE.splitlines()
    installs = [line for line in lines if "pip install" in line]
    assert installs and all("/opt/attn-kata/bin/python -m pip install" in line for line in installs)
    assert "python -m venv /opt/attn-kata" in pl.DOCKERFILE and "ATTN_KATA_PYTHON=/opt/attn-kata/bin/python" in \
        pl.DOCKERFILE
    assert "/usr/local/bin/attn-kata" in pl.DOCKERFILE and "-m grader" in pl.DOCKERFILE


UNREADABLE = '{"cells": [{"cell_type": "code", "source": 7}], "nbformat": 4, "nbformat_minor": 5}'


def test_an_unreadable_upload_gets_one_verdict_on_every_platform(tmp_path: Path, autograder_zip: Path) -> None:
    """Gradescope showed "Graded" 0/79 with 79 copies of the error where batch and PrairieLearn said not gradable:
    now every platform says not graded, with the one reason, once."""
    env = {**os.environ, "ATTN_KATA_NO_DAEMON": "1", "ATTN_KATA_PYTHON": sys.executable, "ATTN_KATA_LANG": "en"}
    env.pop("ATTN_KATA_SECRET", None)
    # batch: its status and reason
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "bob.ipynb").write_text(UNREADABLE)
    subprocess.run([sys.executable, "-m", "grader", "batch", str(klass), "--out", str(tmp_path / "out"), "-q"],
                   cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    row = next(csv.DictReader(io.StringIO((tmp_path / "out" / "gradebook.csv").read_text(encoding="utf-8"))))
    assert row["status"] == "unreadable"
    reason = row["reason"]
    assert reason
    # Gradescope, in its container
    root = gradescope_tree(tmp_path, autograder_zip)
    (root / "submission" / "bob.ipynb").write_text(UNREADABLE)
    proc = subprocess.run(["bash", str(root / "run_autograder")], env={**env, "AUTOGRADER_ROOT": str(root)},
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 0, proc.stderr
    gradescope = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert gradescope["score"] == 0 and gradescope["tests"] == [] and gradescope["output"] == f"Not graded: {reason}"
    # PrairieLearn (grade --format prairielearn is its run on one file)
    one = tmp_path / "bob.ipynb"
    one.write_text(UNREADABLE)
    pl = json.loads(subprocess.run([sys.executable, "-m", "grader", "grade", str(one), "--format", "prairielearn"],
                                   cwd=ROOT, env=env, capture_output=True, text=True, timeout=300).stdout)
    assert pl["gradable"] is False and pl["format_errors"] == [reason]
    for doc in (gradescope, pl):
        assert json.dumps(doc, ensure_ascii=False).count(reason) <= 2  # once (PrairieLearn: format_errors, message)


def pl_root(tmp_path: Path) -> Path:
    question = tmp_path / "question"
    proc = subprocess.run([sys.executable, "-m", "grader", "--lang", "en", "prairielearn", "build", str(question)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ATTN_KATA_NO_DAEMON": "1"})
    assert proc.returncode == 0, proc.stderr
    root = tmp_path / "grade"
    shutil.copytree(question / "tests", root / "tests")
    (root / "student").mkdir()
    shutil.copy(question / "attention.py", root / "student" / "attention.py")  # what the editor starts with
    return root


def pl_run(root: Path) -> dict:
    env = {**os.environ, "PL_GRADE_ROOT": str(root), "ATTN_KATA_PYTHON": sys.executable, "ATTN_KATA_NO_DAEMON": "1"}
    env.pop("ATTN_KATA_SECRET", None)
    (root / "results" / "results.json").unlink(missing_ok=True)
    proc = subprocess.run(["bash", str(root / "tests" / "run.sh")], env=env, capture_output=True, text=True,
                          timeout=300, cwd=root)
    assert proc.returncode == 0, proc.stderr
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def test_prairielearns_untouched_starter_file_costs_no_attempt(tmp_path: Path) -> None:
    root = pl_root(tmp_path)
    untouched = pl_run(root)
    assert untouched["gradable"] is False and "defines none of the chapter's" in untouched["format_errors"][0]
    starter = (root / "student" / "attention.py").read_text(encoding="utf-8")
    solved = starter + "\n" + (ROOT / "solutions" / "step01_dot_scores.py").read_text(encoding="utf-8")
    (root / "student" / "attention.py").write_text(solved, encoding="utf-8")
    attempt = pl_run(root)
    assert attempt["gradable"] is True and attempt["score"] > 0
    wrong = starter + "\ndef attention_scores(inputs, query):\n    return inputs[:, 0]\n"  # wrong, but an attempt
    (root / "student" / "attention.py").write_text(wrong, encoding="utf-8")
    assert pl_run(root)["gradable"] is True
