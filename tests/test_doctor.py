"""`attn-kata doctor` claims a layer only when an attack inside a real worker confirms it, and instructor
grading refuses to run where a layer it needs is missing. Layers are switched off on purpose
(`skip_layers`, a fault injection the trusted side passes to the worker) to show each row can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.grading import engine
from grader.instructor.doctor import LAYERS, diagnose, missing_required
from grader.pool.session import WeakSandbox

pytestmark = pytest.mark.sandbox  # run in every set-up by .ci/setups.sh
ROOT = Path(__file__).resolve().parent.parent
REQUIRED = {layer.name for layer in LAYERS if layer.required}
SECCOMP_ROWS = ("its uid's files outside its folder keep mode, owner, times, xattrs (seccomp)",
                "no file locks, taken or read (seccomp)", "no tty input or inode-flag ioctls (seccomp)",
                "no System V or POSIX IPC at all (seccomp)")
PROCESSES = "cannot change another process's limits or scheduling (PID namespace or seccomp)"


@pytest.fixture(scope="module")
def rows() -> list[tuple[str, bool, bool, str]]:
    return diagnose()


def test_every_claimed_layer_is_verified_by_an_attack(rows: list[tuple[str, bool, bool, str]],
                                                      lacks_by_design: frozenset[str]) -> None:
    assert [r[0] for r in rows] == [layer.name for layer in LAYERS]
    for name, claimed, verified, _ in rows:
        if claimed:
            assert verified, f"{name}: claimed by the worker but the attack got through"
    active = {name for name, claimed, verified, _ in rows if claimed and verified}
    assert {"session", "private dir", "clean env", "memory limit (RLIMIT_AS)", "no core dumps"} <= active
    # this machine (and CI's) offers everything instructor grading needs, but what a grader that is not root
    # lacks by design (tests/conftest.py: its workers get no private tmpfs; such a host refuses a secret)
    assert active >= REQUIRED - lacks_by_design, missing_required(rows)
    assert set(missing_required(rows)) == lacks_by_design & REQUIRED


@pytest.mark.parametrize(("skip", "lost"), [
    (["landlock"], {"kata files unreadable (Landlock)", "writes only in its own folder (Landlock)",
                    "other processes invisible (PID namespace, /proc hidden)"}),
    # and uid 0 kept: a worker that becomes nobody has none left (setuid() takes them); a grader that is not root
    # has none to give its worker, so nothing is lost there
    (["capabilities", "user"], {"no capabilities"} if os.geteuid() == 0 else set()),
    # what Landlock does not mediate, whatever the uid: only the seccomp filter refuses it
    # and, where no PID namespace hides the grader (a grader that is not root), its limits and scheduling
    (["seccomp"], {"no grader socket is reachable", *SECCOMP_ROWS, *([] if os.geteuid() == 0 else [PROCESSES])}),
    # a worker without a tmpfs writes no file at all (Landlock): both must be off for the disk to fill
    (["tmpfs", "landlock"], {"disk use capped (private tmpfs, or no file writes)", "kata files unreadable (Landlock)"}),
    # and seccomp off: it refuses System V and POSIX IPC too (all a grader that is not root has)
    (["ipc", "seccomp"], {"nothing shared with other workers (IPC namespace, no keyrings)"}),
    # and uid 0 kept: a nobody worker's RLIMIT_NPROC caps its processes as well (and a non-root grader's worker,
    # which keeps its uid: RLIMIT_NPROC holds there whatever is skipped)
    (["cgroup", "user"], {"memory capped for the whole process tree (memory cgroup)",
                          *(["process count capped (pids cgroup or RLIMIT_NPROC)"] if os.geteuid() == 0 else [])}),
    (["landlock", "capabilities", "user"], {"the secret is unreachable", "kata files unreadable (Landlock)"}),
    # a root grader's worker kept at uid 0 (what no mount namespace and a root-only Python leave); a non-root
    # grader's keeps its uid anyway, and only seccomp then stops a chmod of the grader's files
    (["user", "seccomp"], {"owns nothing outside its folder (another uid, or seccomp)", "no grader socket is reachable",
                           *(["not running as root"] if os.geteuid() == 0 else [])}),
])
def test_a_layer_left_off_is_reported_missing(skip: list[str], lost: set[str]) -> None:
    """Planted regressions: with a layer off, its attack gets through and the row says so. Only the attacks of the
    rows it must lose run (diagnose's `only`; each attack is its row's alone): every row is attacked with every layer
    on by the module's `rows` and by the CLI's run. Where nothing is lost (a grader that is not root), every row."""
    rows = diagnose(config={"skip_layers": skip}, only=lost or None)
    assert {r[0] for r in rows} == (lost or {layer.name for layer in LAYERS})
    inactive = {name for name, claimed, verified, _ in rows if not (claimed and verified)}
    assert lost <= inactive
    assert set(missing_required(rows)) == inactive & REQUIRED


@pytest.mark.strong_gate  # the refusal itself: never under tests/conftest.py's waiver
def test_grading_with_a_secret_refuses_a_weak_sandbox(tmp_path: Path, lacks_by_design: frozenset[str]) -> None:
    sub = ROOT / "solutions" / "step01_dot_scores.py"
    with pytest.raises(WeakSandbox, match="Landlock"):
        engine.grade(sub, secret="k", steps=["dot_scores"],
                     config={"require_strong": True, "skip_layers": ["landlock"]})
    # a secret alone requires it too (every instructor path), before any of the submission runs
    with pytest.raises(WeakSandbox, match="Landlock"):
        engine.grade(sub, secret="k", steps=["dot_scores"], config={"skip_layers": ["landlock"]})
    report = engine.grade(sub, secret="k", steps=["dot_scores"],
                          config={"skip_layers": ["landlock"], "require_strong": False})
    assert report.steps[0].status == "passed"  # what --allow-weak-sandbox does
    if lacks_by_design:  # a grader that is not root: refused with every layer it can set up, and it says why
        with pytest.raises(WeakSandbox, match=r"private tmpfs\) \(needs run the batch as root"):
            engine.grade(sub, secret="k", steps=["dot_scores"], config={"require_strong": True})
        return
    report = engine.grade(sub, secret="k", steps=["dot_scores"], config={"require_strong": True})
    assert report.steps[0].status == "passed"


@pytest.mark.strong_gate  # the refusal itself: never under tests/conftest.py's waiver
def test_doctor_cli_prints_the_table_and_passes_with_a_secret(lacks_by_design: frozenset[str]) -> None:
    out = subprocess.run([sys.executable, "-m", "grader", "doctor", "--secret", "doctor-key-1234"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "400"})
    # exit 1 exactly where a needed row is missing: a grader that is not root lacks its workers' tmpfs
    missing = REQUIRED & lacks_by_design
    assert out.returncode == (1 if missing else 0), out.stdout + out.stderr
    if missing:
        assert "missing for instructor grading (--secret): " + "; ".join(sorted(missing)) in out.stdout, out.stdout
    assert "worker confinement" in out.stdout
    assert "attack tried" in out.stdout
    assert "doctor-key-1234" not in out.stdout + out.stderr


def test_grade_cli_with_a_secret_never_prints_it(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "grader", "grade", str(ROOT / "solutions"), "--format", "json",
                          "--secret", "grade-key-98765"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["score"] == report["max_score"]
    assert "grade-key-98765" not in out.stdout + out.stderr


def test_seccomp_rows_hold_whatever_the_uid(rows: list[tuple[str, bool, bool, str]]) -> None:
    """The filter is installed for every worker (root's kept uid 0, nobody, a grader's own uid): its rows are
    active in every set-up, not only where the capabilities could all be dropped."""
    active = {name for name, claimed, verified, _ in rows if claimed and verified}
    assert set(SECCOMP_ROWS) <= active, rows


WRITER = """
import os

def attention_scores(inputs, query):
    try:
        with open("scratch.txt", "w") as f:  # in its own work dir
            f.write("x")
        wrote = True
    except OSError:
        wrote = False
    out = inputs @ query
    return out if wrote else out + 1  # a refused write costs the step
"""


def test_without_a_tmpfs_a_graded_worker_writes_no_file_and_a_learners_check_may(tmp_path: Path) -> None:
    """Where no tmpfs can be mounted (a grader that is not root; here one left off), the disk is capped another way
    when it must be (the strong sandbox on a class host): the worker writes no file at all. A learner's own check,
    and a container's grading, keep the work dir writable."""
    sub = tmp_path / "writer.py"
    sub.write_text(WRITER, encoding="utf-8")
    free = engine.grade(sub, steps=["dot_scores"], config={"skip_layers": ["tmpfs"]})
    assert free.steps[0].status == "passed", [c.message for c in free.steps[0].checks]
    graded = engine.grade(sub, steps=["dot_scores"], config={"skip_layers": ["tmpfs"], "require_strong": True})
    assert graded.steps[0].status != "passed"
    assert "landlock_no_file_writes" in graded.to_dict()["sandbox"]["layers"]
    container = engine.grade(sub, steps=["dot_scores"],
                             config={"skip_layers": ["tmpfs"], "require_strong": True, "context": "container"})
    assert container.steps[0].status == "passed"


def test_only_names_layers_that_exist() -> None:
    with pytest.raises(ValueError, match="no such layer"):
        diagnose(only=["no TCP"])  # a prefix is no layer's name: nothing would be attacked
