"""Hostile submissions that need more than a per-step score (the attacks themselves are data, tests/attacks/, graded
by tests/test_attacks.py): the leftover detector proven with a planted daemon, the grader's own stdout, the zygote's
protocol, import-time exits, submitted config files, the secret's effect, retries, pid reuse, a command that exits
while its worker is still dying."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from machine import scaled
from procs import descendants, leftovers  # noqa: F401 - tests/procs.py
from test_attacks import source_of  # the attacks as data (tests/attacks/)

from grader.grading import engine

pytestmark = pytest.mark.sandbox  # run in every set-up by .ci/setups.sh
ROOT = Path(__file__).resolve().parent.parent
# every hostile file also carries a correct step 7, which must keep full marks
GOOD = (ROOT / "solutions" / "step07_causal_mask.py").read_text()


def attack(body: str) -> str:
    return GOOD + "\n\n" + textwrap.dedent(body)


def test_the_leftover_detector_finds_a_daemon_when_killing_is_off(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The leftover detector (tests/test_attacks.py::test_nothing_left_running_or_written) can fail: with the PID
    namespace and the zygote's reaping switched off (a fault injection), the daemon of `daemon_outlives_step`
    survives its worker, and the detector sees it."""
    from grader.pool import zygote

    p = tmp_path / "daemon.py"
    p.write_text(source_of("daemon_outlives_step"))
    monkeypatch.setenv("ATTN_KATA_TEST_FAULTS", "no_pidns,no_reaping")
    zygote.zygote(fresh=True)
    try:
        engine.grade(p, steps=["dot_scores"])
        deadline = time.monotonic() + scaled(30)
        while not leftovers() and time.monotonic() < deadline:
            time.sleep(0.1)
        found = leftovers()
        assert found, "the planted daemon was not found: the detector proves nothing"
    finally:
        for pid in leftovers():  # only our own descendants
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        monkeypatch.delenv("ATTN_KATA_TEST_FAULTS")
        zygote.zygote(fresh=True)
    # and with the faults off again, the same submission leaves nothing
    engine.grade(p, steps=["dot_scores"])
    deadline = time.monotonic() + scaled(30)
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers() == {}


def test_worker_output_never_reaches_json_stdout(tmp_path: Path) -> None:
    """The grader's real stdout: exactly one JSON document, nothing the worker wrote (it tries /dev/tty, its
    own fd 1 and every /proc/PID/fd/1 it can name)."""
    for case in ("print_flood_and_fake_report", "bypass_stdout_redirect_via_proc"):
        p = tmp_path / f"{case}.py"
        p.write_text(source_of(case))
        proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(p), "--format", "json", "--step",
                               "dot_scores"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)  # exactly one JSON document
        assert doc["score"] == doc["max_score"] == 5.0
        assert "999" not in proc.stdout and "999" not in proc.stderr


def test_a_stalled_request_does_not_hold_the_zygote() -> None:
    """Half a request line, then the grader goes away: the zygote is not stuck reading it, and exits."""
    from grader.pool.zygote import Zygote

    z = Zygote()
    z.status(1)  # waits for the zygote to be up
    z.conn.sendall(b"spa")
    z.conn.close()
    assert z.proc is not None
    assert z.proc.wait(timeout=60) == 0


def test_import_time_exit_is_a_report_entry(tmp_path: Path) -> None:
    p = tmp_path / "exits.py"
    p.write_text("import sys\nsys.exit(1)\n" + GOOD)
    report = engine.grade(p, steps=["dot_scores", "causal_mask"])
    statuses = {s.id: (s.status, s.detail) for s in report.steps}
    # a file that does not import is "error" for the steps it should define, with the line
    assert statuses["causal_mask"] == ("error", "import_error")
    assert statuses["dot_scores"] == ("error", "import_error")
    assert "SystemExit" in report.steps[1].message and "line 2" in report.steps[1].message


def test_submitted_conftest_ini_and_torch_py_are_ignored(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    for f in (ROOT / "solutions").glob("*.py"):
        (sub / f.name).write_text(f.read_text())
    (sub / "conftest.py").write_text("raise SystemExit('conftest loaded')\n")
    (sub / "pytest.ini").write_text("[pytest]\naddopts = --collect-only\n")
    (sub / "torch.py").write_text("raise ImportError('shadow torch')\n")
    (sub / "sitecustomize.py").write_text("raise SystemExit('sitecustomize loaded')\n")
    report = engine.grade(sub)
    assert report.score == report.max_score


def test_same_secret_same_report_and_secret_changes_inputs(tmp_path: Path) -> None:
    p = tmp_path / "partial.py"
    p.write_text(GOOD + "\nimport torch\ndef attention_scores(inputs, query):\n    return (inputs @ query) * 1.001\n")
    a = engine.grade(p, secret="k1").to_dict()
    b = engine.grade(p, secret="k1").to_dict()
    assert json.dumps(a) == json.dumps(b)
    from grader import checks

    one, two = checks.plans("k1"), checks.plans("k2")
    assert not one["dot_scores"]["random"].inputs["inputs"].equal(two["dot_scores"]["random"].inputs["inputs"])


def test_infrastructure_error_is_retried_then_raised_never_a_zero(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    from grader.pool import zygote
    from grader.pool.session import InfrastructureError

    calls = []

    def broken_spawn(self: object, fd: int) -> int:
        calls.append(fd)
        raise OSError("zygote unavailable")

    monkeypatch.setattr(zygote.Zygote, "spawn", broken_spawn)
    p = tmp_path / "ok.py"
    p.write_text(GOOD)
    with pytest.raises(InfrastructureError):
        engine.grade(p, steps=["causal_mask"])
    assert len(calls) == 2  # retried once with a fresh zygote


def test_killing_a_finished_worker_never_hits_the_process_that_reused_its_pid() -> None:
    """The worker exits and the zygote reaps it; the pid goes to another process (forced here through
    ns_last_pid); the grader's kill of the old worker must not reach the newcomer."""
    from grader.pool.session import Worker
    from grader.pool.zygote import zygote

    w = Worker([("idle", "idle.py", GOOD)], {})
    w.confined(60)
    w.hello(60)
    pid = w.pid
    w.sock.shutdown(socket.SHUT_WR)  # end of its requests: the worker exits by itself
    deadline = time.monotonic() + 60
    while zygote().status(pid) == "none" and time.monotonic() < deadline:
        time.sleep(0.05)
    newcomer = None
    for _ in range(50):  # another process may take the pid first: try again
        try:
            Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
        except OSError:
            pytest.skip("this kernel does not let us choose the next pid (needs root)")
        proc = subprocess.Popen(["sleep", "60"])
        if proc.pid == pid:
            newcomer = proc
            break
        proc.kill()
        proc.wait()
    assert newcomer is not None, "could not make a process reuse the worker's pid"
    try:
        w.kill()
        time.sleep(0.2)
        assert newcomer.poll() is None, "the grader killed the process that reused the worker's pid"
    finally:
        newcomer.kill()
        newcomer.wait()


SLOW_EXIT = """
import ctypes, mmap, os, time
if os.fork() == 0:  # a child that would outlive grading
    ctypes.CDLL(None).prctl(15, {name!r}.encode(), 0, 0, 0)  # PR_SET_NAME: how the test finds it
    time.sleep(300)
    os._exit(0)
# many touched, unmergeable mappings: the worker's exit after SIGKILL takes long to tear them down, so the grader
# exits (and the zygote sees it go) before the worker is a zombie it could reap (red team 14, finding 1)
_maps = []
for i in range(30000):
    m = mmap.mmap(-1, 8192, prot=mmap.PROT_READ | mmap.PROT_WRITE | (mmap.PROT_EXEC if i % 2 else 0))
    m[0] = 1
    m[4096] = 1
    _maps.append(m)
_big = mmap.mmap(-1, 600 << 20)
for i in range(0, 600 << 20, 4096):
    _big[i] = 1

def attention_scores(inputs, query):
    return inputs @ query
"""


def _named(name: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if entry.isdigit() and Path(f"/proc/{entry}/comm").read_text().strip() == name:
                found.append(int(entry))
    return found


def test_nothing_a_worker_started_outlives_the_command(tmp_path: Path) -> None:
    """`attn-kata grade` exits while its worker is still dying: the zygote, told the grader is gone, kills the
    worker's process group before it goes itself. Where there is no PID namespace (a grader that is not root)
    nothing else would end the child, which init would adopt."""
    name = "kata-" + os.urandom(4).hex()
    p = tmp_path / "slow_exit.py"
    p.write_text(SLOW_EXIT.format(name=name))
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(p), "--format", "json", "--step",
                           "dot_scores", "--no-daemon"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["steps"][0]["status"] == "passed"
    deadline = time.monotonic() + scaled(10)  # the group's kill is immediate; its delivery, not quite
    while _named(name) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _named(name)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert left == [], "a child the submission forked outlived grading"
