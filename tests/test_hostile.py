"""Hostile submissions: each attacks the grader; the attacked step scores only what its outputs
deserve, the other (correct) step keeps full marks, the grader reports normally, nothing is left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from grader import engine

ROOT = Path(__file__).resolve().parent.parent
# every hostile file also carries a correct step 7, which must keep full marks
GOOD = (ROOT / "solutions" / "causal_mask.py").read_text()


def attack(body: str) -> str:
    return GOOD + "\n\n" + textwrap.dedent(body)


# name -> (source, expected status of dot_scores, detail or None)
CASES: dict[str, tuple[str, str, str | None]] = {
    "infinite_loop": (attack("""
        def attention_scores(inputs, query):
            while True:
                pass
        """), "error", "timeout"),
    "catch_baseexception_to_survive_timeout": (attack("""
        import time
        def attention_scores(inputs, query):
            while True:
                try:
                    time.sleep(10)
                except BaseException:
                    pass
        """), "error", "timeout"),
    "ignore_signals": (attack("""
        import signal
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        def attention_scores(inputs, query):
            while True:
                pass
        """), "error", "timeout"),
    "os_exit_in_step": (attack("""
        import os
        def attention_scores(inputs, query):
            os._exit(3)
        """), "error", "crashed"),
    "sys_exit_in_step": (attack("""
        import sys
        def attention_scores(inputs, query):
            sys.exit(0)
        """), "failed", None),
    "memory_bomb": (attack("""
        def attention_scores(inputs, query):
            blocks = []
            while True:
                blocks.append(bytearray(256 * 1024 * 1024))
        """), "failed", None),
    "fork_bomb": (attack("""
        import os
        def attention_scores(inputs, query):
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
        """), "error", "timeout"),
    "daemon_outlives_step": (attack("""
        import os, time, torch
        def attention_scores(inputs, query):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(300)
                os._exit(0)
            return inputs @ query
        """), "passed", None),
    "kill_parent": (attack("""
        import os, signal, torch
        def attention_scores(inputs, query):
            for pid in (os.getppid(), 1):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            return inputs @ query
        """), "passed", None),
    "monkeypatch_allclose": (attack("""
        import torch, torch.testing
        torch.allclose = lambda *a, **k: True
        torch.equal = lambda *a, **k: True
        torch.testing.assert_close = lambda *a, **k: None
        def attention_scores(inputs, query):
            return torch.zeros(inputs.shape[0])
        """), "failed", None),
    "tensor_subclass_eq_always_true": (attack("""
        import torch
        class Liar(torch.Tensor):
            def __eq__(self, other):
                return True
            def allclose(self, *a, **k):
                return True
        def attention_scores(inputs, query):
            return torch.zeros(inputs.shape[0]).as_subclass(Liar)
        """), "failed", None),
    "not_a_tensor_eq_always_true": (attack("""
        class Anything:
            def __eq__(self, other):
                return True
        def attention_scores(inputs, query):
            return Anything()
        """), "failed", None),
    "read_expected_from_gc_and_frames": (attack("""
        import gc, sys, torch
        def attention_scores(inputs, query):
            n = inputs.shape[0]
            for obj in gc.get_objects():
                if isinstance(obj, torch.Tensor) and obj.shape == (n,) and obj is not query:
                    return obj.clone()
            f = sys._getframe()
            while f is not None:
                for v in f.f_locals.values():
                    if isinstance(v, torch.Tensor) and v.shape == (n,):
                        return v.clone()
                f = f.f_back
            return torch.zeros(n)
        """), "failed", None),
    "reseed_and_change_defaults": (attack("""
        import torch
        torch.set_default_dtype(torch.float64)
        torch.manual_seed(0)
        def attention_scores(inputs, query):
            torch.manual_seed(1)
            torch.set_grad_enabled(False)
            return inputs @ query
        """), "passed", None),
    "nan_and_inf": (attack("""
        import torch
        def attention_scores(inputs, query):
            out = inputs @ query
            out[0] = float("nan")
            out[-1] = float("inf")
            return out
        """), "failed", None),
    "huge_result": (attack("""
        import torch
        def attention_scores(inputs, query):
            return torch.zeros(40_000_000)
        """), "failed", None),
    "garbage_on_the_channel": (attack("""
        import os, socket, stat
        def attention_scores(inputs, query):
            for fd in range(256):  # /proc/self/fd is hidden from a worker
                try:
                    if stat.S_ISSOCK(os.fstat(fd).st_mode):
                        os.write(fd, b"\\xff" * 64)
                except OSError:
                    pass
            raise SystemExit
        """), "error", None),
    "write_outside_workdir": (attack(f"""
        import torch
        def attention_scores(inputs, query):
            open({str(ROOT / "solutions" / "pwned.txt")!r}, "w").write("x")
            return inputs @ query
        """), "failed", None),
    "print_flood_and_fake_report": (attack("""
        import sys, torch
        print('{"schema_version": 1, "score": 999}')
        def attention_scores(inputs, query):
            for _ in range(20000):
                print('{"score": 999, "max_score": 999}')
                sys.stderr.write("x" * 100 + "\\n")
            return inputs @ query
        """), "passed", None),
    "os_exit_at_import": ("import os\nos._exit(0)\n" + GOOD, "error", None),
    "slow_import": (attack("""
        import time, torch
        time.sleep(4)
        def attention_scores(inputs, query):
            return inputs @ query
        """), "passed", None),
    "segfault": (attack("""
        import ctypes
        def attention_scores(inputs, query):
            ctypes.string_at(0)
        """), "error", "crashed"),
    "infinite_recursion": (attack("""
        def attention_scores(inputs, query):
            return attention_scores(inputs, query)
        """), "failed", None),
    "bypass_stdout_redirect_via_proc": (attack("""
        import os, torch
        def attention_scores(inputs, query):
            for path in ("/proc/1/fd/1", "/dev/tty", "/proc/self/fd/1"):
                try:
                    with open(path, "w") as f:
                        f.write('{"score": 999}\\n')
                except OSError:
                    pass
            return inputs @ query
        """), "passed", None),
    "thread_keeps_running": (attack("""
        import threading, time, torch
        def spin():
            while True:
                time.sleep(0.001)
        def attention_scores(inputs, query):
            threading.Thread(target=spin, daemon=False).start()
            return inputs @ query
        """), "passed", None),
    "patch_the_worker_itself": (attack("""
        import sys, torch
        def attention_scores(inputs, query):
            for name, mod in list(sys.modules.items()):
                if name.startswith("grader"):
                    for attr in ("encode", "describe_error", "run_case"):
                        if hasattr(mod, attr):
                            setattr(mod, attr, lambda *a, **k: b"forged")
            return torch.zeros(inputs.shape[0])
        """), "error", None),  # the worker dies or sends garbage: either way no score
    "complex_and_int_results": (attack("""
        import torch
        def attention_scores(inputs, query):
            return (inputs @ query).to(torch.complex64)
        """), "failed", None),
    "close_every_fd": (attack("""
        import os
        def attention_scores(inputs, query):
            os.closerange(3, 1024)
            while True:
                pass
        """), "error", None),
    "env_and_secret_hunting": (attack("""
        import os, torch
        def attention_scores(inputs, query):
            leaked = [k for k in os.environ if "SECRET" in k or "KATA_SECRET" in k and k != "ATTN_KATA_WORKER"]
            if leaked:
                raise RuntimeError("secret visible: " + ",".join(leaked))
            return inputs @ query
        """), "passed", None),
}


def worker_processes() -> list[int]:
    """Processes that carry the worker's environment marker (readable as root, or as the same user)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if b"ATTN_KATA_WORKER=1" in Path(f"/proc/{entry}/environ").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("hostile")
    paths = []
    for name, (src, _, _) in CASES.items():
        p = folder / f"{name}.py"
        p.write_text(src)
        paths.append(p)
    out = {}
    os.environ["ATTN_KATA_SECRET"] = "in-the-graders-environment"  # must never reach a worker
    for p in paths:
        out[p.stem] = engine.grade(p, steps=["dot_scores", "causal_mask"], timeout=3.0,
                                   secret="not-for-students").to_dict()
    del os.environ["ATTN_KATA_SECRET"]
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_submission(reports: dict[str, dict], name: str) -> None:
    _, status, detail = CASES[name]
    steps = {s["id"]: s for s in reports[name]["steps"]}
    attacked = steps["dot_scores"]
    if status == "failed":  # wrong outputs: whatever checks they fail, never full marks
        assert attacked["status"] in ("failed", "partial"), attacked
    else:
        assert attacked["status"] == status, attacked
    if detail is not None:
        assert attacked["detail"] == detail, attacked
    if status != "passed":
        assert attacked["score"] < attacked["max_score"]
    if not name.endswith("_at_import"):  # an import-time exit takes the whole file with it
        assert steps["causal_mask"]["status"] == "passed", steps["causal_mask"]


def test_nothing_left_running_or_written(reports: dict[str, dict]) -> None:
    deadline = time.monotonic() + 5
    while worker_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker_processes() == []
    assert not (ROOT / "solutions" / "pwned.txt").exists()


def test_worker_output_never_reaches_json_stdout(tmp_path: Path) -> None:
    p = tmp_path / "flood.py"
    p.write_text(CASES["print_flood_and_fake_report"][0])
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(p), "--format", "json", "--step", "dot_scores"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # exactly one JSON document
    assert doc["score"] == doc["max_score"] == 5.0


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
    from grader import zygote
    from grader.session import InfrastructureError

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


def test_step_details_say_what_happened(reports: dict[str, dict]) -> None:
    detail = {name: {s["id"]: s for s in r["steps"]}["dot_scores"]["detail"] for name, r in reports.items()}
    assert detail["infinite_loop"] == "timeout"
    assert detail["os_exit_in_step"] == "crashed"
    assert detail["memory_bomb"] == "memory_limit"
    assert detail["sys_exit_in_step"] == "crashed"
    assert detail["not_a_tensor_eq_always_true"] == "wrong_type"
    assert detail["monkeypatch_allclose"] == "wrong_answer"
    assert detail["garbage_on_the_channel"] == "no_result"
    assert detail["daemon_outlives_step"] == "passed"
