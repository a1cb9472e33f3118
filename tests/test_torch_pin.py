"""One torch pin (issue 38): grader/torch_pin.py defines it; every tracked file that names a torch version names
that one (or pyproject.toml's floor, the oldest torch the grader supports), and the generated builds install it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from grader.torch_pin import TORCH_CPU_INDEX, TORCH_PIN

ROOT = Path(__file__).resolve().parent.parent
# `torch`, a comparison, a version: "torch" "==" "2.13.0" written together (the operators are split so that this
# file does not match itself)
VERSION = re.compile(r"\btorch\s*(" + "==|>=|<=|~=|!=|<|>" + r")\s*([0-9][0-9A-Za-z.+*]*)")


def tracked_text() -> dict[str, str]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    texts = {}
    for name in names.decode().split("\0"):
        path = ROOT / name
        if not name or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        texts[name] = data.decode("utf-8", errors="replace")
    return texts


def floor() -> str:
    found = re.findall(r'"torch>=([0-9.]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert len(found) == 1, "pyproject.toml declares torch's floor once"
    return found[0]


def test_every_file_names_the_one_pin() -> None:
    allowed = {("==", TORCH_PIN), (">=", floor())}
    wrong = [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for name, text in tracked_text().items() for m in VERSION.finditer(text)
             if (m.group(1), m.group(2).rstrip(".")) not in allowed]
    assert not wrong, f"torch versions other than the pin {TORCH_PIN} (grader/torch_pin.py):\n" + "\n".join(wrong)


def test_the_install_lines_name_the_pin() -> None:
    texts = tracked_text()
    line = f"pip install torch=={TORCH_PIN} --index-url {TORCH_CPU_INDEX}"
    for name in ("README.md", "CONTRIBUTING.md", ".github/workflows/learner.yml", ".github/workflows/release.yml"):
        assert line in texts[name], name
    # .ci/run reads the pin from grader/torch_pin.py rather than naming it
    run = texts[".ci/run"]
    assert "grader/torch_pin.py" in run and "torch==$TORCH_PIN" in run


def test_the_generated_builds_install_the_pin() -> None:
    from grader.platforms import classroom, gradescope, prairielearn

    assert f'"torch=={TORCH_PIN}"' in gradescope.SETUP_SH and f'"torch=={TORCH_PIN}"' in prairielearn.DOCKERFILE
    workflow = classroom.workflow(install="attention-kata")
    assert f"pip install torch=={TORCH_PIN} --index-url {TORCH_CPU_INDEX}" in workflow
    for build in (gradescope.SETUP_SH, prairielearn.DOCKERFILE):
        assert "--retries 1 --timeout 15" in build  # fail fast where the source cannot be reached
        assert "TORCH_INDEX_URL" in build and "TORCH_FIND_LINKS" in build and "PIP_INDEX_URL" in build


def torch_block(tmp_path: Path) -> Path:
    """setup.sh's torch lines, run by a real pip (a dry run that ignores this venv's torch, no dependencies)."""
    import sys

    from grader.platforms.gradescope import SETUP_SH

    lines = SETUP_SH.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("TORCH_INDEX_URL="))
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    shim = venv / "bin" / "python"
    shim.write_text(f'#!/usr/bin/env bash\n[ "$1 $2 $3" = "-m pip install" ] && shift 3\n'
                    f'exec {sys.executable} -m pip install --dry-run --ignore-installed --no-deps "$@"\n')
    shim.chmod(0o755)
    script = tmp_path / "torch.sh"
    script.write_text("set -euo pipefail\nVENV=" + str(venv) + "\n" + "\n".join(lines[start:end + 1]) + "\n")
    return script


def pip_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "HOME": str(tmp_path), **extra}  # no machine's pip set-up


def test_setup_fails_fast_with_a_message_where_the_source_cannot_be_reached(tmp_path: Path) -> None:
    import time

    script = torch_block(tmp_path)
    began = time.monotonic()
    proc = subprocess.run(["bash", str(script)], env=pip_env(tmp_path, TORCH_INDEX_URL="http://127.0.0.1:9/simple"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert f"could not install torch=={TORCH_PIN} from http://127.0.0.1:9/simple" in proc.stderr
    assert "TORCH_FIND_LINKS=DIR" in proc.stderr and "PIP_INDEX_URL" in proc.stderr
    assert time.monotonic() - began < 60  # one retry, not pip's minutes of back-off


def test_setup_takes_a_local_wheel_where_the_index_cannot_be_reached(tmp_path: Path) -> None:
    import pytest

    wheels = [w for d in ("/opt/wheels",) for w in Path(d).glob(f"torch-{TORCH_PIN}+cpu-*.whl")] \
        if Path("/opt/wheels").is_dir() else []
    if not wheels:
        pytest.skip(f"no torch-{TORCH_PIN}+cpu wheel on this machine to stand for a local one")
    local = tmp_path / "wheels"
    local.mkdir()
    (local / wheels[0].name).symlink_to(wheels[0])
    script = torch_block(tmp_path)
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=120,
                          env=pip_env(tmp_path, TORCH_INDEX_URL="http://127.0.0.1:9/simple",
                                      TORCH_FIND_LINKS=str(local)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"torch-{TORCH_PIN}+cpu" in proc.stdout
