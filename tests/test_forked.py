"""One submission graded in a trusted process forked from the zygote (grader/grading/forked.py), as a batch grades:
the command that grades (`grade`, `check --no-daemon`, Gradescope's and PrairieLearn's run) never imports torch, so
a cold grade pays for one torch import (the zygote's), and its report is byte for byte the one the trusted side
gives in-process (a process that has imported torch already, as the warm daemon has, grades there)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.grading import forked
from grader.report import CheckResult, Report, StepResult

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
# after the command: did this process import torch? (atexit runs after click's sys.exit)
PROBE = ("import atexit, sys; atexit.register(lambda: sys.stderr.write('\\ntorch imported: %s\\n' % "
         "('torch' in sys.modules)))\n")


def _kata(args: list[str], *, preload_torch: bool = False, env: dict[str, str] | None = None,
          cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`attn-kata ARGS` in a fresh process; `preload_torch`: torch imported first, so the trusted side runs
    in-process (forked.wanted)."""
    code = PROBE + ("import torch\n" if preload_torch else "") + "from grader.cli import main; main()"
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "ATTN_KATA_LANG": "", **(env or {})}
    return subprocess.run([sys.executable, "-c", code, "--no-daemon", "--lang", "en", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=600)


def _torch_imported(run: subprocess.CompletedProcess) -> bool:
    line = [x for x in run.stderr.splitlines() if x.startswith("torch imported: ")][-1]
    return line.endswith("True")


@pytest.mark.parametrize(("path", "secret"), [
    ("solutions", "forked-a"),
    ("tests/fixtures/buggy/ca_mask_after_softmax.py", "forked-a"),
    ("tests/fixtures/buggy/ca_mask_after_softmax.py", "forked-b"),
    ("tests/fixtures/buggy/all_loops.py", ""),
])
def test_a_cold_grade_forks_its_trusted_side_and_reports_the_same_bytes(path: str, secret: str) -> None:
    args = ["grade", path, "--format", "json", "--allow-weak-sandbox"]
    env = {"ATTN_KATA_SECRET": secret}
    cold = _kata(args, env=env)
    warm = _kata(args, env=env, preload_torch=True)
    assert cold.returncode == warm.returncode == 0, cold.stderr + warm.stderr
    assert not _torch_imported(cold), "the command imported torch: the trusted side did not move to the fork"
    assert _torch_imported(warm)
    assert cold.stdout == warm.stdout  # byte for byte
    assert json.loads(cold.stdout)["steps"]


def test_a_step_that_kills_the_worker_of_a_cold_grade_leaves_the_rest_graded(tmp_path: Path) -> None:
    """A cold grade's zygote becomes its grading process after forking one worker; when a step kills that worker,
    the steps after it are graded in a worker of a fresh zygote (the grading process never forks): the report is
    the in-process one, byte for byte."""
    sub = tmp_path / "sub"
    shutil.copytree(ROOT / "solutions", sub, ignore=shutil.ignore_patterns("__pycache__"))
    first = sub / "step01_dot_scores.py"
    head = "def attention_scores(inputs: torch.Tensor, query: torch.Tensor) -> torch.Tensor:\n"
    assert head in first.read_text()
    first.write_text(first.read_text().replace(head, head + "    import os\n\n    os._exit(3)\n", 1))
    args = ["grade", str(sub), "--format", "json", "--step", "dot_scores", "--step", "softmax", "--step",
            "causal_mask"]
    cold, warm = _kata(args), _kata(args, preload_torch=True)
    assert cold.returncode == warm.returncode == 0, cold.stderr + warm.stderr
    assert not _torch_imported(cold)
    assert cold.stdout == warm.stdout
    steps = {s["id"]: s for s in json.loads(cold.stdout)["steps"]}
    assert steps["dot_scores"]["status"] == "error" and "exited with status 3" in steps["dot_scores"]["message"]
    assert steps["softmax"]["status"] == steps["causal_mask"]["status"] == "passed"


@pytest.mark.parametrize("fmt", ["gradescope", "prairielearn", "table"])
def test_every_format_but_the_pictures_grades_without_torch_in_the_command(fmt: str) -> None:
    args = ["grade", "tests/fixtures/buggy/ca_mask_after_softmax.py", "--format", fmt, "--step", "causal_attention"]
    cold, warm = _kata(args), _kata(args, preload_torch=True)
    assert cold.returncode == warm.returncode == 0, cold.stderr + warm.stderr
    assert not _torch_imported(cold)
    if fmt == "gradescope":  # its wall clock aside
        cold_doc, warm_doc = json.loads(cold.stdout), json.loads(warm.stdout)
        assert cold_doc.pop("execution_time") >= 0 and warm_doc.pop("execution_time") >= 0
        assert cold_doc == warm_doc
    else:
        assert cold.stdout == warm.stdout


@pytest.mark.parametrize("fixture", ["ca_mask_after_softmax", "mask_fill_zero"])
def test_the_pictures_come_from_the_grading_process_too(tmp_path: Path, fixture: str) -> None:
    """--html (and a table on a terminal) draws the attention weights: the matrices come back from the grading
    process as plain data (forked.PlainMatrix), the command still never imports torch, and the HTML report is
    the one drawn from the in-process tensors, byte for byte (its date aside)."""
    pages = {}
    for preload in (False, True):
        page = tmp_path / f"report-{preload}.html"
        run = _kata(["grade", f"tests/fixtures/buggy/{fixture}.py", "--format", "json", "--html", str(page)],
                    preload_torch=preload)
        assert run.returncode == 0, run.stderr
        assert _torch_imported(run) is preload
        pages[preload] = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?( UTC)?", "<date>", page.read_text())
    assert pages[False].count('class="matrix"') >= 2  # the failing steps' heatmaps are there
    assert pages[False] == pages[True]

def test_check_without_the_daemon_forks_its_trusted_side_too(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    init = _kata(["init", str(ws)])
    assert init.returncode == 0, init.stderr
    shutil.copy(ROOT / "solutions" / "step01_dot_scores.py", ws / "step01_dot_scores.py")
    run = _kata(["check", "dot_scores"], cwd=ws)  # a pipe, not a terminal: no heatmaps to draw
    assert run.returncode == 0, run.stdout + run.stderr
    assert not _torch_imported(run)
    assert "5/5" in run.stdout


@pytest.mark.parametrize("platform", ["gradescope", "prairielearn"])
def test_gradescope_and_prairielearn_runs_import_torch_once(tmp_path: Path, platform: str) -> None:
    """Their run grades in a forked grading process; results.json is the in-process one (its wall clock aside)."""
    docs = []
    for preload in (False, True):
        root = tmp_path / f"{platform}-{preload}"
        upload = root / ("submission" if platform == "gradescope" else "student")
        upload.mkdir(parents=True)
        shutil.copy(FIXTURES / "buggy" / "ca_mask_after_softmax.py", upload / "attention.py")
        run = _kata([platform, "run", "--root", str(root)], preload_torch=preload)
        assert run.returncode == 0, run.stderr
        assert _torch_imported(run) is preload
        doc = json.loads((root / "results" / "results.json").read_text())
        doc.pop("execution_time", None)
        docs.append(doc)
    assert docs[0] == docs[1]
    assert docs[0]["tests"] and "autograder failed" not in str(docs[0].get("output", "")), docs[0]


def _descendants_named(name: str, ancestor: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if Path(f"/proc/{entry}/comm").read_text().strip() != name:
                continue
            pid = int(entry)
            while pid > 1:
                stat = Path(f"/proc/{pid}/stat").read_text()
                pid = int(stat.rsplit(")", 1)[1].split()[1])
                if pid == ancestor:
                    out.append(int(entry))
                    break
        except (OSError, ValueError):
            continue
    return out


def _is_zygote(pid: int) -> bool:
    """The zygote or a fork of it, by its command line (the zygote becomes the grading process of a cold grade: its
    name changes, its command line stays)."""
    try:
        return b"grader.pool.zygote" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _holds(pid: int, needle: bytes) -> bool | None:
    """Is `needle` in the writable memory of process `pid`? None: its memory cannot be read from here (a worker is
    not dumpable: only root reads it)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb")  # noqa: SIM115 - closed below
    except OSError:
        return None
    read_any = False
    with mem:
        for line in maps:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if not fields[1].startswith("rw") or hi - lo > 1 << 28:
                continue
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            read_any = True
            if needle in chunk:
                return True
    return False if read_any else None


def _watch_cold_grade(tmp_path: Path, secret: str, look: Any) -> subprocess.CompletedProcess:
    """A cold `grade` of a step that sleeps 2 s, with `look(pid, kind)` called on every process of it meanwhile
    (kind: "zygote" for the zygote, which becomes the grading process, or the process's name)."""
    slow = (ROOT / "solutions" / "step01_dot_scores.py").read_text().replace(
        "    return attn_scores", "    import time\n    time.sleep(2.0)\n    return attn_scores")
    (tmp_path / "slow.py").write_text(slow)
    done = threading.Event()

    def watch() -> None:
        me = os.getpid()
        while not done.is_set():
            for name in ("attn-grade", "attn-worker", "python", "python3"):
                for pid in _descendants_named(name, me):
                    look(pid, "zygote" if name != "attn-worker" and _is_zygote(pid) else name)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run = _kata(["grade", str(tmp_path / "slow.py"), "--step", "dot_scores", "--format", "json",
                     "--allow-weak-sandbox"], env={"ATTN_KATA_SECRET": secret})
    finally:
        done.set()
        watcher.join()
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["steps"][0]["status"] == "passed"
    return run


def test_the_secret_reaches_the_grading_process_only_never_the_zygote(tmp_path: Path) -> None:
    """The zygote (and so every worker it forks) is started without the secret, in its arguments or environment;
    the grading process (the zygote itself, after it forked its worker) learns it over its own socket. Read from
    /proc while a slow submission keeps them all alive."""
    secret = "forked-term-key-" + "5309"
    seen: dict[str, list[bytes]] = {"zygote": [], "attn-worker": []}

    def look(pid: int, kind: str) -> None:
        for what in ("environ", "cmdline"):
            with contextlib.suppress(OSError, KeyError):  # a worker of another uid
                seen[kind].append(Path(f"/proc/{pid}/{what}").read_bytes())

    _watch_cold_grade(tmp_path, secret, look)
    assert seen["zygote"] and seen["attn-worker"], "the processes were not seen: this proves nothing"
    for name, found in seen.items():
        assert not any(secret.encode() in blob for blob in found), f"the secret is in the {name}'s environment"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a worker is not dumpable, only root reads its memory")
def test_a_cold_grades_worker_is_forked_before_the_secret_exists_in_its_parent(tmp_path: Path) -> None:
    """A cold grade's zygote forks the worker, then becomes the grading process and learns the secret: the secret
    is in the grading process's memory (the search can find it), never in the worker's."""
    secret = "forked-memory-key-" + "7731"
    found: dict[str, list[bool | None]] = {"attn-grade": [], "attn-worker": []}
    zygote_kinds: set[bool] = set()  # was each grading process seen the zygote itself (its command line)?

    def look(pid: int, kind: str) -> None:
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{pid}/comm").read_text().strip() if kind == "zygote" else kind
            if name in found and len(found[name]) < 3:
                if name == "attn-grade":
                    zygote_kinds.add(kind == "zygote")
                found[name].append(_holds(pid, secret.encode()))

    _watch_cold_grade(tmp_path, secret, look)
    assert True in found["attn-grade"], f"the search never found the secret in the grading process: {found}"
    assert zygote_kinds == {True}, "the grading process is not the zygote itself"
    assert found["attn-worker"] and None not in found["attn-worker"], found
    assert True not in found["attn-worker"], "the secret is in the worker's memory"


def test_a_grading_process_that_cannot_start_is_an_infrastructure_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.pool import zygote
    from grader.pool.errors import InfrastructureError

    def refuse(self: zygote.Zygote, fd: int, entry: str) -> int:
        raise OSError("refused")

    monkeypatch.setattr(forked, "wanted", lambda: True)
    monkeypatch.setattr(zygote.Zygote, "grader", refuse)
    monkeypatch.setattr(zygote.Zygote, "become", refuse)
    try:
        with pytest.raises(InfrastructureError, match="refused"):
            forked.grade(ROOT / "solutions", steps=["dot_scores"])
    finally:
        zygote.stop()


def test_a_grading_process_grades_when_asked_from_any_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """forked.grade from this test process (which has torch): the same report as engine.grade."""
    from grader.grading import engine
    from grader.pool import zygote

    monkeypatch.setattr(forked, "wanted", lambda: True)
    try:
        there = forked.grade(FIXTURES / "buggy" / "ca_mask_after_softmax.py", steps=["causal_attention"],
                             secret="forked-c")
    finally:
        zygote.stop()
    here = engine.grade(FIXTURES / "buggy" / "ca_mask_after_softmax.py", steps=["causal_attention"],
                        secret="forked-c")
    assert json.dumps(there.to_dict()) == json.dumps(here.to_dict())


def test_a_report_survives_the_grading_processs_wire() -> None:
    """What a grading process sends (to_data, ASCII JSON: a lone surrogate as an escape) is the same report again
    where it arrives (from_data), byte for byte in its JSON."""
    rep = Report("näive\udcff.py", [
        StepResult("softmax", "2. softmax", 1, 3.0, "partial",
                   [CheckResult("rows sum to 1", 1, 1, True), CheckResult("dim", 0.0, 2.0, False, "dim=0 \udc80 ✗")],
                   "wrong_answer", "", [{"id": "softmax_dim0", "message": "normalised over the wrong axis"}]),
        StepResult("dot_scores", "1. dot", 0.0, 5.0, "error", [], "crashed", "raised ValueError: x")],
        notes=["a note"], grader_version="0.1.0", flags=[{"where": "a.py:1", "what": "gc"}],
        sandbox={"backend": "linux", "layers": ["pid_namespace"], "strong_required": False})
    doc = rep.to_dict()
    again = Report.from_data(json.loads(forked.encode(rep.to_data())))
    assert json.dumps(again.to_dict()) == json.dumps(doc)
    assert again.score == rep.score and again.max_score == rep.max_score


def _marked(marker: bytes) -> dict[int, tuple[str, int]]:
    """Processes whose environment holds `marker` (readable ones: a worker is not dumpable), and the children of
    those: {pid: (name, parent pid)}."""
    procs: dict[int, tuple[str, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                procs[int(entry)] = (stat[stat.index("(") + 1:stat.rindex(")")], int(stat.rsplit(")", 1)[1].split()[1]))
    marked = set()
    for pid in procs:
        with contextlib.suppress(OSError):
            if marker in Path(f"/proc/{pid}/environ").read_bytes():
                marked.add(pid)
    return {pid: v for pid, v in procs.items() if pid in marked or v[1] in marked}


@contextlib.contextmanager
def _sleeping_cold_grade(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, bytes, dict[int, tuple[str, int]]]]:
    """A cold `grade` whose step sleeps 120 s (its time-out 300 s), once its worker is seen: (the command, the marker
    in its processes' environment, {pid: (name, parent)} of its grading process and worker). Killed at the end."""
    slow = (ROOT / "solutions" / "step01_dot_scores.py").read_text().replace(
        "    return attn_scores", "    import time\n    time.sleep(120)\n    return attn_scores")
    (tmp_path / "slow.py").write_text(slow)
    marker = f"marker-{os.getpid()}-{time.time_ns()}"  # the zygote keeps ATTN_KATA_TEST_FAULTS (unknown: no fault)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ATTN_KATA_TEST_FAULTS": marker}
    proc = subprocess.Popen([sys.executable, "-m", "grader", "--no-daemon", "grade", str(tmp_path / "slow.py"),
                             "--step", "dot_scores", "--format", "json", "--timeout", "300"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = {pid: v for pid, v in _marked(marker.encode()).items() if pid != proc.pid}
            if any(name == "attn-worker" for name, _ in found.values()):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the worker was never seen: this proves nothing")
        assert {name for name, _ in found.values()} == {"attn-grade", "attn-worker"}, found
        yield proc, marker.encode(), found
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_cold_grade_killed_mid_step_leaves_nothing_running(tmp_path: Path) -> None:
    """The command killed while a step runs (a platform's time-out, a second Ctrl-C): the grading process (the
    zygote it became) sees the command's end of its connection close and ends itself and its worker, long before the
    step's time-out (300 s) would have."""
    with _sleeping_cold_grade(tmp_path) as (proc, marker, _found):
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 30
        while (left := _marked(marker)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert left == {}, f"still running after the command was killed: {left}"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _cpu_ticks(pid: int) -> int:
    return sum(int(x) for x in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13])


def test_a_grading_process_killed_outright_takes_its_worker_with_it(tmp_path: Path) -> None:
    """SIGKILL to the grading process (the zygote it became), which can then end nothing itself: its worker dies
    with it (the worker's parent-death signal), whatever the worker was doing."""
    with _sleeping_cold_grade(tmp_path) as (_proc, _marker, found):
        (judge,) = [pid for pid, (name, _) in found.items() if name == "attn-grade"]
        (worker,) = [pid for pid, (name, _) in found.items() if name == "attn-worker"]
        # in the step's sleep (its CPU time still for half a second): set up, confined, the submission imported; a
        # worker killed before that would end anyway, at its channel's end-of-file
        still, last, deadline = 0, -1, time.monotonic() + 60
        while still < 5 and time.monotonic() < deadline:
            now = _cpu_ticks(worker)
            still, last = (still + 1 if now == last else 0), now
            time.sleep(0.1)
        os.kill(judge, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker), "the worker outlived its grading process"


def test_a_grading_process_that_stops_answering_is_ended_not_waited_for(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A grading process that stops answering (SIGSTOP here; a wedged one alike) costs its command the answer's
    time-out (forked.answer_timeout: the submission's budget and a margin; 5 s here), not forever: it is killed,
    its worker with it, and tried once more, then the grade is an infrastructure error."""
    from grader.pool import zygote
    from grader.pool.errors import InfrastructureError

    slow = (ROOT / "solutions" / "step01_dot_scores.py").read_text().replace(
        "    return attn_scores", "    import time\n    time.sleep(120)\n    return attn_scores")
    (tmp_path / "slow.py").write_text(slow)
    monkeypatch.setattr(forked, "wanted", lambda: True)
    monkeypatch.setattr(forked, "answer_timeout", lambda settings: 5.0)
    zygote.stop()  # this process's zygote may have forked workers already: a fresh one becomes the grading process
    stopped: list[int] = []
    done = threading.Event()

    def stop_each_grading_process() -> None:
        while not done.is_set():
            z = zygote.current()
            if isinstance(z, zygote.Zygote) and z.spent and z.proc is not None and z.proc.pid not in stopped:
                stopped.append(z.proc.pid)
                os.kill(z.proc.pid, signal.SIGSTOP)
            time.sleep(0.01)

    stopper = threading.Thread(target=stop_each_grading_process)
    stopper.start()
    t = time.monotonic()
    try:
        with pytest.raises(InfrastructureError, match="died twice"):
            forked.grade(tmp_path / "slow.py", steps=["dot_scores"], timeout=300)
    finally:
        done.set()
        stopper.join()
        zygote.stop()
    assert time.monotonic() - t < 120
    assert len(stopped) == 2, stopped
    for pid in stopped:  # reaped by the command: gone, not stopped somewhere
        assert not Path(f"/proc/{pid}").exists(), pid
