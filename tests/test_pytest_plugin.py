"""`pytest --kata` (grader/platforms/pytest_plugin.py), run as a learner would: `python -m pytest` in a workspace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader import checks
from grader.registry import BY_ID, STEPS

ROOT = Path(__file__).resolve().parent.parent
MINE = "def test_mine():\n    assert sum([1, 2]) == 3\n"
NODE = "exercises/step07_causal_mask.py::test_causal_mask[future positions get exactly zero weight]"


def check_names() -> dict[str, list[str]]:
    checks.load_all()
    return {s.id: [c.name for c in checks.CHECKS[s.id]] for s in STEPS}


@pytest.fixture
def env(tmp_path: Path):  # type: ignore[no-untyped-def]
    """The learner's environment, with a daemon (if `attn-kata grade` starts one) of this test's own, stopped after."""
    e = {**os.environ, "ATTN_KATA_LANG": "en", "ATTN_KATA_RUNTIME_DIR": str(tmp_path / "run")}
    for k in ("ATTN_KATA_SECRET", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        e.pop(k, None)
    (tmp_path / "run").mkdir(mode=0o700)
    yield e
    subprocess.run([sys.executable, "-m", "grader", "daemon", "stop"], env=e, capture_output=True, timeout=60)


def workspace(tmp_path: Path, *, solved: bool, ini: str = "") -> Path:
    """A learner's folder: exercises/ (stubs, or the reference with a wrong mask and dropout not started), their
    own test, a pytest.ini."""
    ws = tmp_path / "kata"
    (ws / "exercises").mkdir(parents=True)
    for s in STEPS:
        src = ROOT / ("solutions" if solved else "exercises") / s.file
        shutil.copyfile(src, ws / "exercises" / s.file)
    if solved:
        mask = ws / "exercises" / "step07_causal_mask.py"
        mask.write_text(mask.read_text().replace("diagonal=1", "diagonal=0"))
        shutil.copyfile(ROOT / "exercises" / "step08_dropout.py", ws / "exercises" / "step08_dropout.py")
    (ws / "test_mine.py").write_text(MINE)
    (ws / "pytest.ini").write_text("[pytest]\n" + ini)
    return ws


def pytest_run(ws: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=600)


def junit(path: Path) -> dict[str, tuple[bool, str]]:
    """node id -> (passed, failure message) from pytest's junit XML."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        failure = case.find("failure")
        file = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        out[f"{file}::{case.get('name')}"] = (failure is None, "" if failure is None else failure.text or "")
    return out


def test_collect_only_lists_one_item_per_check_and_the_learners_own_tests(tmp_path: Path, env: dict[str, str]) -> None:
    ws = workspace(tmp_path, solved=False)
    proc = pytest_run(ws, env, "--kata", "--collect-only", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = {line for line in proc.stdout.splitlines() if "::" in line}
    names = check_names()
    expected = {f"exercises/{s.file}::test_{s.id}[{n}]" for s in STEPS for n in names[s.id]}
    assert listed == expected | {"test_mine.py::test_mine"}
    assert len(expected) == sum(len(v) for v in names.values()) == 83  # each check one item, ids unique


def test_off_unless_asked_for_and_on_from_the_ini(tmp_path: Path, env: dict[str, str]) -> None:
    ws = workspace(tmp_path, solved=False)
    off = pytest_run(ws, env, "--collect-only", "-q")
    assert [line for line in off.stdout.splitlines() if "::" in line] == ["test_mine.py::test_mine"]
    (ws / "pytest.ini").write_text("[pytest]\nkata = true\n")
    on = pytest_run(ws, env, "--collect-only", "-q")
    assert sum("::test_causal_mask[" in line for line in on.stdout.splitlines()) == 6


def test_verdicts_and_messages_are_the_graders_in_one_run(tmp_path: Path, env: dict[str, str]) -> None:
    """Every check one item; pass/fail and each failure's message as `attn-kata grade --format json` says, in the
    learner's language; the learner's own test runs too; one grading run for the whole session."""
    ws = workspace(tmp_path, solved=True)
    xml = tmp_path / "junit.xml"
    proc = pytest_run(ws, env, "--kata", "--kata-lang", "zh", f"--junitxml={xml}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "沙箱评分器运行 1 次" in proc.stdout, proc.stdout[-2000:]
    got = junit(xml)
    assert got.pop("test_mine.py::test_mine") == (True, "")
    grade = subprocess.run([sys.executable, "-m", "grader", "--lang", "zh", "grade", str(ws / "exercises"),
                            "--format", "json"], env=env, capture_output=True, text=True, timeout=300)
    report = json.loads(grade.stdout)
    names = check_names()
    want = {}
    for step in report["steps"]:
        for name, c in zip(names[step["id"]], step["checks"], strict=True):
            message = step["message"] if step["status"] in ("not_started", "error") else c["message"]
            want[f"exercises/{BY_ID[step['id']].file}::test_{step['id']}[{name}]"] = (c["passed"], message)
    assert set(got) == set(want)
    assert sum(not ok for ok, _m in got.values()) == sum(not ok for ok, _m in want.values()) > 6
    for node, (ok, message) in want.items():
        assert got[node][0] == ok, node
        if not ok:
            assert message and message in got[node][1], (node, got[node][1])
    mask = got["exercises/step07_causal_mask.py::test_causal_mask[future positions get exactly zero weight]"][1]
    assert "未来位置" in mask  # the check's name and the message, in Chinese
    assert "future positions" not in mask


def test_a_single_node_id_runs_alone(tmp_path: Path, env: dict[str, str]) -> None:
    ws = workspace(tmp_path, solved=True)
    proc = pytest_run(ws, env, "--kata", "-rf", NODE)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed in" in proc.stdout and "passed" not in proc.stdout.splitlines()[-1]
    assert f"FAILED {NODE}" in proc.stdout
    assert "future positions have non-zero weight" in proc.stdout  # the grader's message
    assert "1 step(s) graded in 1 run(s)" in proc.stdout


def test_no_workspace_is_a_one_line_usage_error(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "pytest.ini").write_text("[pytest]\n")
    proc = pytest_run(tmp_path / "empty", env, "--kata")
    assert proc.returncode == 4  # pytest's usage error
    assert "no workspace found" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_a_notebook_workspace_gets_its_checks_under_the_notebook(tmp_path: Path, env: dict[str, str]) -> None:
    """`attn-kata init --notebook`: every step's checks are collected under the notebook, which is what is graded."""
    made = subprocess.run([sys.executable, "-m", "grader", "init", "--notebook", str(tmp_path / "nb")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    nb = next((tmp_path / "nb").glob("*.ipynb"))
    listed = pytest_run(tmp_path / "nb", env, "--kata", "--collect-only", "-q")
    items = [line for line in listed.stdout.splitlines() if "::" in line]
    assert len(items) == 83 and all(line.startswith(f"{nb.name}::test_") for line in items)
    node = f"{nb.name}::test_dot_scores[a single token]"
    proc = pytest_run(tmp_path / "nb", env, "--kata", node)
    assert proc.returncode == 1 and "1 failed" in proc.stdout
    assert "NotImplementedError" in proc.stdout  # the untouched notebook: the grader says the step is not written


def test_when_the_grader_cannot_run_every_kata_item_fails_with_its_reason(tmp_path: Path, env: dict[str, str]) -> None:
    """No verdict is invented: a grading run that fails (here `attn-kata grade` refuses the time-out) fails the
    kata's items with the grader's one line, and the learner's own test still passes."""
    ws = workspace(tmp_path, solved=True)
    proc = pytest_run(ws, env, "--kata", "--kata-timeout", "-1", "-k", "dot_scores or mine", "-rf")
    assert proc.returncode == 1
    assert "5 failed, 1 passed" in proc.stdout
    assert proc.stdout.count("the grader could not grade") >= 5 and "--timeout" in proc.stdout


def test_listing_the_checks_imports_no_torch() -> None:
    """An IDE lists the tests on every save: the names are read from the checks' source (the same names, in the
    same order, as the grader registers: compared with grader.checks above and here), without importing torch."""
    code = ("import sys, json; from grader.platforms.pytest_plugin import check_names; n = check_names(); "
            "print(json.dumps(['torch' in sys.modules, n]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    torch_loaded, names = json.loads(proc.stdout)
    assert not torch_loaded
    assert names == check_names()
