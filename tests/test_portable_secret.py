"""The portable backend never holds a secret, whatever is waived (issue 35): its worker runs unconfined as the
grader's user, and could read the key from its ancestors' environment and command line. The waiver
(--allow-weak-sandbox, ATTN_KATA_ALLOW_WEAK_SANDBOX=1) names the Linux sandbox's layers it waives
(grader.sandbox.policy.WAIVABLE) and applies to nothing else; no refusal suggests a flag that cannot help.
Each attack has its honest twin: the same submission without a secret grades there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import settings
from grader.grading import engine
from grader.learner import api
from grader.pool.session import WeakSandbox
from grader.sandbox import policy

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "tests" / "platform" / "sim.py"
SOLUTION = ROOT / "solutions" / "step01_dot_scores.py"
WAIVER = "ATTN_KATA_ALLOW_WEAK_SANDBOX"


@pytest.fixture
def portable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("ATTN_KATA_BACKEND", "portable")
    settings.backend.cache_clear()
    yield
    monkeypatch.delenv("ATTN_KATA_BACKEND")
    settings.backend.cache_clear()


def _tattler(tmp_path: Path) -> tuple[Path, Path]:
    """A submission that, if it ever ran, would leave a file behind (and print whatever key it could find)."""
    marker = tmp_path / "ran.txt"
    sub = tmp_path / "sub.py"
    sub.write_text(f"import os\nopen({str(marker)!r}, 'w').write(os.environ.get('ATTN_KATA_SECRET', 'ran'))\n"
                   + SOLUTION.read_text(encoding="utf-8"), encoding="utf-8")
    return sub, marker


@pytest.mark.parametrize("waiver", ["none", "flag", "env", "both", "require_strong_false"])
@pytest.mark.parametrize("via", ["argument", "environment"])
def test_a_secret_is_refused_on_the_portable_backend_whatever_is_waived(
        portable: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, waiver: str, via: str) -> None:
    sub, marker = _tattler(tmp_path)
    if waiver in ("env", "both"):
        monkeypatch.setenv(WAIVER, "1")
    secret: str | None = "course-key-35"
    if via == "environment":
        monkeypatch.setenv("ATTN_KATA_SECRET", "course-key-35")
        secret = None
    def attempt() -> object:
        if waiver == "require_strong_false":
            return engine.grade(sub, secret=secret, steps=["dot_scores"], config={"require_strong": False})
        return api.grade_report(path=sub, secret=secret, steps=["dot_scores"],
                                allow_weak_sandbox=waiver in ("flag", "both"))

    with pytest.raises(WeakSandbox, match="portable backend") as refused:
        attempt()
    message = str(refused.value)
    assert "--allow-weak-sandbox" not in message and WAIVER not in message  # no flag that cannot help
    assert "course-key-35" not in message
    assert not marker.exists()  # refused before a line of the submission ran


@pytest.mark.parametrize("waiver", ["none", "flag", "env"])
def test_the_honest_twin_without_a_secret_grades_on_the_portable_backend(
        portable: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, waiver: str) -> None:
    monkeypatch.delenv("ATTN_KATA_SECRET", raising=False)
    if waiver == "env":
        monkeypatch.setenv(WAIVER, "1")
    report = api.grade_report(path=SOLUTION, steps=["dot_scores"], allow_weak_sandbox=waiver == "flag")
    assert report.sandbox["backend"] == "portable"
    assert report.score == report.max_score > 0
    assert "settings" not in report.to_dict()  # no key, no fingerprint


def test_the_waiver_names_only_the_linux_layers() -> None:
    assert not policy.PORTABLE_HOLDS_SECRET
    assert set(policy.WAIVABLE) == {n.name for n in policy.NEEDS if n.layers}
    assert all(layer for n in policy.NEEDS if n.name in policy.WAIVABLE for layer in n.layers)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_the_cli_refuses_a_waived_secret_under_a_simulated_system(tmp_path: Path, how: str) -> None:
    sub, marker = _tattler(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_KATA_")}
    env |= {"ATTN_KATA_LANG": "en", "OMP_NUM_THREADS": "1", "COLUMNS": "120", "ATTN_KATA_NO_DAEMON": "1"}
    args = ["grade", str(sub), "--format", "json", "--step", "dot_scores", "--secret", "course-key-35"]
    if how == "flag":
        args.append("--allow-weak-sandbox")
    else:
        env[WAIVER] = "1"
    out = subprocess.run([sys.executable, str(SIM), "darwin", "-m", "grader", *args], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0, out.stdout
    assert "portable backend" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert "--allow-weak-sandbox" not in out.stderr
    assert "course-key-35" not in out.stdout + out.stderr
    assert not marker.exists()
    honest = subprocess.run([sys.executable, str(SIM), "darwin", "-m", "grader", "grade", str(SOLUTION),
                             "--format", "json", "--step", "dot_scores"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert honest.returncode == 0, honest.stderr
    assert json.loads(honest.stdout)["sandbox"]["backend"] == "portable"


def test_single_grade_with_a_secret_records_the_key_fingerprint(tmp_path: Path) -> None:
    """`attn-kata grade --secret` reports record which key graded them (its fingerprint, never the key), as a
    batch's reports do; without a key, nothing. Graded with the waiver where this set-up lacks a layer."""
    from grader.settings import key_fingerprint

    if settings.backend() != "linux":
        pytest.skip("a secret is graded on the Linux backend only")
    shutil.copy(SOLUTION, tmp_path / "sub.py")
    report = api.grade_report(path=tmp_path / "sub.py", secret="course-key-35", steps=["dot_scores"],
                              allow_weak_sandbox=True)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["settings"]["key_fingerprint"] == key_fingerprint("course-key-35") != "none"
    assert data["settings"]["steps"] == "dot_scores" and data["settings"]["timeout"] > 0
    assert "course-key-35" not in json.dumps(data)
    text = api.grade(path=tmp_path / "sub.py", fmt="json", secret="course-key-35", steps=["dot_scores"],
                     allow_weak_sandbox=True, to_terminal=False)
    assert json.loads(text)["settings"]["key_fingerprint"] == key_fingerprint("course-key-35")
