"""The kata wherever learners are (issue 24): macOS and Windows simulated (tests/platform/sim.py removes the
Linux-only names Python lacks there before the grader is imported), and the portable worker backend scoring the
fixture corpus exactly as the Linux backend does (every kind of outcome of every step that the corpus shows)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_fixtures import graded  # tests/test_fixtures.py

from grader.grading import engine
from grader.pool.session import WeakSandbox
from grader.registry import STEPS
from grader.report import Report
from grader.settings import backend

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "tests" / "platform" / "sim.py"
FIXTURES = ROOT / "tests" / "fixtures"


def _attn(system: str, cwd: Path, *args: str, stdin: str = "", runtime: Path | None = None
          ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_KATA_")}
    env |= {"ATTN_KATA_LANG": "en", "OMP_NUM_THREADS": "1", "COLUMNS": "120"}
    if runtime is not None:  # the warm daemon, in a runtime folder of the test's own
        env["ATTN_KATA_RUNTIME_DIR"] = str(runtime)
    else:
        env["ATTN_KATA_NO_DAEMON"] = "1"
    return subprocess.run([sys.executable, str(SIM), system, "-m", "grader", *args], cwd=cwd, env=env,
                          input=stdin, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("system", ["darwin", "win32"])
def test_the_learners_loop_on_a_simulated_system(system: str, tmp_path: Path) -> None:
    version = _attn(system, tmp_path, "--version")
    assert version.returncode == 0 and "attn-kata" in version.stdout, version.stderr
    assert _attn(system, tmp_path, "init", "ws").returncode == 0
    ws = tmp_path / "ws"
    listed = _attn(system, ws, "list")
    assert listed.returncode == 0 and "dot_scores" in listed.stdout, listed.stderr
    stub = _attn(system, ws, "check", "dot_scores")
    assert stub.returncode == 1 and "not started" in stub.stdout, stub.stdout + stub.stderr
    assert "Traceback" not in stub.stdout + stub.stderr
    stub_file = next(ws.glob("*dot_scores.py"))
    shutil.copy(ROOT / "solutions" / "step01_dot_scores.py", stub_file)
    solved = _attn(system, ws, "check", "dot_scores")
    assert solved.returncode == 0, solved.stdout + solved.stderr
    if system == "darwin":  # the warm daemon runs there (its peer checked with getpeereid), on the portable backend
        runtime = tmp_path / "run"
        runtime.mkdir(mode=0o700)
        try:
            for _ in range(2):
                warm = _attn(system, ws, "check", "dot_scores", runtime=runtime)
                assert warm.returncode == 0, warm.stdout + warm.stderr
            status = _attn(system, ws, "daemon", "status", runtime=runtime)
            assert status.returncode == 0 and "2 command(s) served" in status.stdout, status.stdout
        finally:
            _attn(system, ws, "daemon", "stop", runtime=runtime)
    hint = _attn(system, ws, "hint", "softmax")
    assert hint.returncode == 0 and "hint 1/3" in hint.stdout, hint.stdout + hint.stderr
    graded = _attn(system, ws, "grade", ".", "--format", "json", "--step", "dot_scores")
    assert graded.returncode == 0, graded.stderr
    report = json.loads(graded.stdout)  # exactly one JSON document on stdout
    assert report["score"] == report["max_score"] == 5
    assert report["sandbox"]["backend"] == "portable"
    # watch: graded once at start, then `q` typed; it never needs select() on a console or inotify of its own
    watched = _attn(system, ws, "watch", "dot_scores", stdin="q\n")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "dot_scores" in watched.stdout and "Traceback" not in watched.stderr


@pytest.mark.parametrize("system", ["darwin", "win32"])
def test_a_secret_is_refused_on_the_portable_backend_with_the_reason(system: str, tmp_path: Path) -> None:
    sub = tmp_path / "sub.py"
    shutil.copy(ROOT / "solutions" / "step01_dot_scores.py", sub)
    out = _attn(system, tmp_path, "grade", str(sub), "--format", "json", "--secret", "course-key")
    assert out.returncode != 0
    assert "portable backend" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert "course-key" not in out.stdout + out.stderr


def _corpus() -> list[Path]:
    return sorted([*FIXTURES.glob("buggy/*.py"), *FIXTURES.glob("correct/*.py"), FIXTURES / "correct" / "workspace"])


def _verdicts(report: Report) -> dict[str, list]:
    return {s.id: [s.status, s.score, s.detail, sorted(c.name for c in s.checks if not c.passed)] for s in report.steps}


SCORES = """
import json, sys
from grader.grading import engine
out = {}
for path in sys.argv[1:]:
    r = engine.grade(path).worded("en")
    out[path] = {"backend": r.sandbox.get("backend"),
                 "steps": {s.id: [s.status, s.score, s.detail, sorted(c.name for c in s.checks if not c.passed)]
                           for s in r.steps}}
print(json.dumps(out))
"""


def _representatives(linux: dict[str, dict[str, list]]) -> list[str]:
    """The fewest fixtures (greedy, in name order) that between them show every outcome the Linux backend gives any
    fixture of the corpus: each step with each status and detail (passed, not started, not implemented, a wrong
    answer or type, a crash, ...). What a backend changes is how the learner's code runs (its process, its limits,
    how its answers travel), never how they are checked: the checks run on the trusted side, the same code on both.
    So a backend that ran every kind of outcome of every step as Linux does runs the rest so too; every fixture is
    graded on Linux by tests/test_fixtures.py (expected.json) and tests/test_secrets.py."""
    kinds = {path: {(sid, v[0], v[2]) for sid, v in steps.items()} for path, steps in linux.items()}
    left, picked = set().union(*kinds.values()), []
    while left:
        best = max(sorted(kinds), key=lambda path: len(kinds[path] & left))
        picked.append(best)
        left -= kinds[best]
    return picked


def test_the_portable_backend_scores_the_fixture_corpus_as_the_linux_one() -> None:
    """Per step, the same status, score, detail and failing checks on both backends: for a set of fixtures that shows
    every outcome of every step the Linux backend gives the whole corpus (_representatives)."""
    if backend() != "linux":
        pytest.skip("needs the Linux backend to compare with")  # not on this machine: check_skips.py refuses it
    paths = [str(p) for p in _corpus()]
    assert len(paths) > 60
    # test_fixtures.graded: the same gradings tests/test_fixtures.py checks (cached, one per fixture in a session)
    linux = {path: _verdicts(graded(path)) for path in paths}
    picked = _representatives(linux)
    steps = {s.id for s in STEPS}
    assert {sid for path in picked for sid, v in linux[path].items() if v[0] == "passed"} == steps
    assert {sid for path in picked for sid, v in linux[path].items() if v[0] in ("failed", "partial")} == steps
    env = {**os.environ, "ATTN_KATA_BACKEND": "portable", "ATTN_KATA_KEEP_WARM": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-c", SCORES, *picked], env=env, capture_output=True, text=True,
                         timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    portable = json.loads(run.stdout)
    differ = []
    for path in picked:
        assert portable[path]["backend"] == "portable"
        if linux[path] != portable[path]["steps"]:
            differ.append((Path(path).name, {k: (linux[path][k], v) for k, v in portable[path]["steps"].items()
                                             if linux[path][k] != v}))
    assert not differ, differ


def test_grading_with_a_secret_refuses_on_the_portable_backend(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    from grader import settings

    monkeypatch.setenv("ATTN_KATA_BACKEND", "portable")
    settings.backend.cache_clear()
    try:
        marker = tmp_path / "ran.txt"
        sub = tmp_path / "sub.py"
        sub.write_text(f"open({str(marker)!r}, 'w').write('ran')\n", encoding="utf-8")
        with pytest.raises(WeakSandbox, match="portable backend"):
            engine.grade(sub, secret="k", steps=["dot_scores"])
        assert not marker.exists()  # refused before a line of the submission ran
    finally:
        monkeypatch.delenv("ATTN_KATA_BACKEND")
        settings.backend.cache_clear()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("system", ["darwin", "win32"])
def test_the_loop_writes_into_a_cp1252_pipe(system: str, lang: str, tmp_path: Path) -> None:
    """Windows writes a pipe or a file in its ANSI code page (`attn-kata check > out.txt`, a CI log): ✓, ≠, √ and
    Chinese must come out, never a UnicodeEncodeError (issue 34). Under both simulations, in both languages."""
    def attn(cwd: Path, *args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_KATA_")}
        env |= {"ATTN_KATA_LANG": lang, "ATTN_KATA_NO_DAEMON": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "100",
                "PYTHONIOENCODING": "cp1252"}
        done = subprocess.run([sys.executable, str(SIM), system, "-m", "grader", *args], cwd=cwd, env=env,
                              capture_output=True, timeout=300)
        text = subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode("utf-8"),
                                           done.stderr.decode("utf-8"))  # UTF-8, whatever the code page
        assert "Traceback" not in text.stdout + text.stderr, text.stdout + text.stderr
        return text

    assert attn(tmp_path, "--version").returncode == 0
    assert attn(tmp_path, "init", "ws").returncode == 0
    ws = tmp_path / "ws"
    listed = attn(ws, "list")
    assert listed.returncode == 0 and "MultiHeadAttentionWrapper" in listed.stdout
    stub = attn(ws, "check", "dot_scores")
    assert stub.returncode == 1 and ("未开始" if lang == "zh" else "not started") in stub.stdout
    shutil.copy(ROOT / "solutions" / "step01_dot_scores.py", next(ws.glob("*dot_scores.py")))
    solved = attn(ws, "check", "dot_scores")
    assert solved.returncode == 0 and ("通过" if lang == "zh" else "passed") in solved.stdout
    hint = attn(ws, "hint", "softmax")
    assert hint.returncode == 0 and ("提示 1/3" if lang == "zh" else "hint 1/3") in hint.stdout
    graded = attn(ws, "grade", ".", "--format", "json", "--step", "dot_scores")
    assert graded.returncode == 0 and json.loads(graded.stdout)["score"] == 5
    doctor = attn(ws, "doctor")
    assert doctor.returncode == 0 and "portable" in doctor.stdout
    assert ("Windows" if system == "win32" else "macOS") in doctor.stdout  # what a learner gets there


@pytest.mark.parametrize("system", ["darwin", "win32"])
def test_watch_reads_single_keys_on_a_simulated_terminal(system: str, tmp_path: Path) -> None:
    """watch on a terminal: Windows' keys through msvcrt.getwch (the simulation's own, over this terminal),
    macOS's through termios; `h` shows a hint without Enter, `q` quits."""
    import pexpect

    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_KATA_")}
    env |= {"ATTN_KATA_LANG": "en", "ATTN_KATA_NO_DAEMON": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "120",
            "NO_COLOR": "1"}  # no colour codes inside the words expected
    assert _attn(system, tmp_path, "init", "ws").returncode == 0
    child = pexpect.spawn(sys.executable, [str(SIM), system, "-m", "grader", "watch", "dot_scores"],
                          cwd=str(tmp_path / "ws"), env=env, encoding="utf-8", timeout=120, dimensions=(40, 120))
    try:
        child.expect("not started")
        child.expect("h: hint")  # the single-key legend: keys are read one by one
        child.send("h")
        child.expect("How similar is each input token to the query")  # hint 1/3's words (styled apart)
        child.send("q")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before
