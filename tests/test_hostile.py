"""Hostile submissions: each attacks the grader. The attacked step scores exactly what an honest submission
with the same outputs (its *twin*) scores, the other (correct) step keeps full marks, the grader reports
normally, and nothing this test started is left running."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from machine import scaled
from procs import descendants, leftovers  # noqa: F401 - tests/procs.py

from grader.grading import engine

pytestmark = pytest.mark.sandbox  # run in every set-up by .ci/setups.sh
ROOT = Path(__file__).resolve().parent.parent
# every hostile file also carries a correct step 7, which must keep full marks
GOOD = (ROOT / "solutions" / "causal_mask.py").read_text()


def attack(body: str) -> str:
    return GOOD + "\n\n" + textwrap.dedent(body)


# the honest twins: what an attack's outputs deserve, graded as plain code
TWINS = {
    "full": "import torch\ndef attention_scores(inputs, query):\n    return inputs @ query\n",
    "zeros": "import torch\ndef attention_scores(inputs, query):\n    return torch.zeros(inputs.shape[0])\n",
    "raises": "def attention_scores(inputs, query):\n    raise RuntimeError('no')\n",
    "not_a_tensor": "def attention_scores(inputs, query):\n    return None\n",
}

# name -> (source, expected status of dot_scores, detail or None); TWIN says which honest twin's score it gets
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
                try:
                    os.setsid()  # refused: it stays in the worker's process group
                except OSError:
                    pass
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
            right = inputs @ query  # recomputed only to recognise a reference output, if one were here
            for obj in gc.get_objects():
                if isinstance(obj, torch.Tensor) and obj.shape == right.shape and obj is not right:
                    if torch.allclose(obj, right):
                        return obj.clone()
            f = sys._getframe()
            while f is not None:
                for v in f.f_locals.values():
                    if isinstance(v, torch.Tensor) and v.shape == right.shape and v is not right:
                        if torch.allclose(v, right):
                            return v.clone()
                f = f.f_back
            return torch.zeros(inputs.shape[0])
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
            paths = ["/dev/tty", "/proc/self/fd/1", "/dev/stdout"]
            paths += [f"/proc/{pid}/fd/1" for pid in range(1, 70000)]
            for path in paths:
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
    "secret_hunting_by_value": (attack("""
        import gc, os, torch
        SECRETS = (b"not-for-" + b"students", b"in-the-graders-" + b"environment")
        def _found():
            blobs = [("environ", "".join(f"{k}={v}" for k, v in os.environ.items()).encode())]
            for pid in ["self", *range(1, 70000)]:
                for part in ("cmdline", "environ"):
                    try:
                        blobs.append((f"{pid}/{part}", open(f"/proc/{pid}/{part}", "rb").read()))
                    except OSError:
                        pass
            for obj in gc.get_objects():
                if isinstance(obj, (str, bytes)) and len(obj) < 100000:
                    blob = obj.encode(errors="replace") if isinstance(obj, str) else obj
                    if any(s in blob for s in SECRETS) and obj not in SECRETS:
                        blobs.append(("gc", blob))
            return [(where, blob) for where, blob in blobs if any(s in blob for s in SECRETS)]
        def attention_scores(inputs, query):
            hits = _found()
            if hits:  # what a cheat would do: carry it out in a message
                raise RuntimeError(repr(hits)[:400])
            return inputs @ query
        """), "passed", None),
    "reference_from_sys_modules_gc_importlib": (attack("""
        import gc, importlib, sys
        def _steal(name):
            for mod in list(sys.modules.values()):
                if mod is not None and name in getattr(mod, "__dict__", {}) and mod.__name__ != __name__:
                    return mod.__dict__[name]
            for obj in gc.get_objects():
                if isinstance(obj, type) and obj.__name__ == name and obj.__module__ != __name__:
                    return obj
            for mod in ("solutions.dot_scores", "dot_scores", "grader.grading.reference"):
                try:
                    m = importlib.import_module(mod)
                    ns = m.namespace() if hasattr(m, "namespace") else vars(m)
                    if name in ns:
                        return ns[name]
                except Exception:
                    pass
            return None
        def attention_scores(inputs, query):
            f = _steal("attention_scores")
            if f is None:
                raise NotImplementedError
            return f(inputs, query)
        """), "not_started", None),
    "reference_from_linecache_inspect": (attack("""
        import gc, inspect, linecache, types
        def attention_scores(inputs, query):
            for name, entry in list(linecache.cache.items()):
                text = "".join(entry[2]) if len(entry) > 2 else ""
                if "def attention_scores" in text and "linecache" not in text:
                    ns = {}
                    exec(text, ns)
                    return ns["attention_scores"](inputs, query)
            for obj in gc.get_objects():
                if isinstance(obj, types.FunctionType) and obj.__name__ == "attention_scores" \\
                        and obj.__code__ is not attention_scores.__code__:
                    return obj(inputs, query)
            raise NotImplementedError
        """), "not_started", None),
    "reference_from_own_memory": (attack("""
        import ctypes, gc, sys
        NEEDLE = bytes([ord(c) for c in "attn_scores.masked_fill_("])
        def _scan():
            libc = ctypes.CDLL(None)
            class iovec(ctypes.Structure):
                _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
            libc.process_vm_readv.restype = ctypes.c_ssize_t
            step = 1 << 20
            buf = bytearray(step)
            cbuf = (ctypes.c_char * step).from_buffer(buf)
            own = ctypes.addressof(cbuf)
            for base in {id(x) & ~(step - 1) for x in (gc, sys, buf, 1.5)}:
                for i in range(-256, 256):
                    addr = base + i * step
                    local, remote = iovec(own, step), iovec(addr, step)
                    n = libc.process_vm_readv(0, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
                    at = buf.find(NEEDLE, 0, max(n, 0))
                    while at >= 0:
                        if not (own <= addr + at < own + step) and not (id(NEEDLE) <= addr + at < id(NEEDLE) + 64):
                            return addr + at
                        at = buf.find(NEEDLE, at + 1, max(n, 0))
            return None
        def attention_scores(inputs, query):
            where = _scan()
            if where is not None:
                raise RuntimeError(f"reference source in memory at {where:x}")
            raise NotImplementedError
        """), "not_started", None),
    "read_ahead_on_the_channel": (attack("""
        import os, socket, stat
        def attention_scores(inputs, query):
            for fd in range(3, 256):
                try:
                    if stat.S_ISSOCK(os.fstat(fd).st_mode):
                        s = socket.socket(fileno=os.dup(fd))
                        data = s.recv(1 << 24, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                        if b"register_buffer" in data or b"reference/" in data:
                            raise RuntimeError("a reference reached the worker early")
                except (OSError, BlockingIOError):
                    pass
            raise NotImplementedError
        """), "not_started", None),
    "disk_filler": (attack("""
        import os, torch
        def attention_scores(inputs, query):
            i = 0
            try:
                while i < 2000:
                    with open(f"fill{i}", "wb") as f:
                        f.write(bytes(8 << 20))
                    i += 1
            except OSError:
                pass
            return inputs @ query
        """), "passed", None),
    "prints_20_mb_at_import": (attack("""
        import torch
        for _ in range(20):
            print("x" * (1 << 20))
        def attention_scores(inputs, query):
            print("y" * (1 << 20))
            return inputs @ query
        """), "passed", None),
    "chattr_immutable_in_workdir": (attack("""
        import fcntl, os, struct, torch
        def attention_scores(inputs, query):
            try:  # refused where a graded worker may write no file (no tmpfs of its own)
                os.makedirs("keep/inner", exist_ok=True)
                for path in ("keep/inner/f", "keep/f"):
                    open(path, "w").close()
            except OSError:
                pass
            for path in ("keep/inner", "keep", "keep/f", "keep/inner/f"):
                try:
                    fd = os.open(path, os.O_RDONLY)
                    flags = struct.unpack("l", fcntl.ioctl(fd, 0x80086601, struct.pack("l", 0)))[0]
                    fcntl.ioctl(fd, 0x40086602, struct.pack("l", flags | 0x10))  # FS_IMMUTABLE_FL
                    os.close(fd)
                except OSError:
                    pass
            return inputs @ query
        """), "passed", None),
    # answers near the channel's cap: a batch's grading process keeps a chunk's answers until it judges them, and
    # 13 such uploads took one past 4 GB; a step's answers far larger than the reference's are let go on arrival
    "answers_far_larger_than_the_step": (attack("""
        import torch
        def attention_scores(inputs, query):
            return torch.zeros(1400, 1400, dtype=torch.float64)
        """), "failed", "wrong_type"),
}


# what each attacked step must score: the score of its honest twin (TWINS), "full", or "zero"
TWIN: dict[str, str | None] = {
    "infinite_loop": "zero", "catch_baseexception_to_survive_timeout": "zero", "ignore_signals": "zero",
    "answers_far_larger_than_the_step": "zero",
    "os_exit_in_step": "zero", "sys_exit_in_step": "raises", "memory_bomb": "raises", "fork_bomb": "zero",
    "daemon_outlives_step": "full", "kill_parent": "full", "monkeypatch_allclose": "zeros",
    "tensor_subclass_eq_always_true": "zeros", "not_a_tensor_eq_always_true": "not_a_tensor",
    "read_expected_from_gc_and_frames": "zeros", "reseed_and_change_defaults": "full",
    "nan_and_inf": None,  # not an attack on the grader: its outputs are simply wrong in two places
    "huge_result": "zero", "garbage_on_the_channel": "zero", "write_outside_workdir": "raises",
    "print_flood_and_fake_report": "full", "os_exit_at_import": "zero", "slow_import": "full",
    "segfault": "zero", "infinite_recursion": "raises", "bypass_stdout_redirect_via_proc": "full",
    "thread_keeps_running": "full", "patch_the_worker_itself": "zero", "complex_and_int_results": "not_a_tensor",
    "close_every_fd": "zero", "secret_hunting_by_value": "full",
    "reference_from_sys_modules_gc_importlib": "zero", "reference_from_linecache_inspect": "zero",
    "reference_from_own_memory": "zero", "read_ahead_on_the_channel": "zero",
    "chattr_immutable_in_workdir": "full", "disk_filler": "full", "prints_20_mb_at_import": "full",
}
SECRETS = ("not-for-students", "in-the-graders-environment")
TIMEOUT = 8.0  # per step: the infinite loops cost this much each; generous for a loaded 2-core machine
# the memory bomb touches the worker's whole 1 GiB allowance before it fails: on the 2-core VM that took 1.8 to
# over 10 s (the host backs fresh pages slowly at times), so within 8 s it was sometimes a time-out, not a
# memory_limit. It gets the time to reach its limit; a time-out would still be contained, but not what it tests
TIMEOUTS = {"memory_bomb": 30.0}


def _temp_worker_dirs() -> set[str]:
    """This process's workers' directories (named after it: other graders on the machine have their own)."""
    return {p.name for p in Path(tempfile.gettempdir()).glob(f"attn-kata-worker-{os.getpid()}-*")}


# what needs a layer that a set-up lacks by design (tests/conftest.py): never run there (the disk filler would write
# 16 GB to the shared disk of a grader that is not root, which mounts its workers no tmpfs)
NEEDS = {"disk_filler": "disk use capped (private tmpfs, or no file writes)"}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory, lacks_by_design: frozenset[str]) -> dict[str, dict]:
    from grader.pool import zygote

    folder = tmp_path_factory.mktemp("hostile")
    before = _temp_worker_dirs()
    zyg = zygote.zygote()
    out = {}
    os.environ["ATTN_KATA_SECRET"] = SECRETS[1]  # must never reach a worker
    try:
        for name, src in [*CASES.items(), *((f"twin_{k}", v) for k, v in TWINS.items())]:
            if NEEDS.get(name) in lacks_by_design:
                continue
            p = folder / f"{name}.py"
            p.write_text(src[0] if isinstance(src, tuple) else attack(src))
            out[name] = engine.grade(p, steps=["dot_scores", "causal_mask"], timeout=TIMEOUTS.get(name, TIMEOUT),
                                     secret=SECRETS[0]).to_dict()
    finally:
        del os.environ["ATTN_KATA_SECRET"]
    out["_zygote_kept"] = {"same": zygote.zygote() is zyg and zyg.alive()}  # type: ignore[dict-item]
    out["_new_dirs"] = {"dirs": sorted(_temp_worker_dirs() - before)}  # type: ignore[dict-item]
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_submission(reports: dict[str, dict], name: str) -> None:
    if name not in reports:
        pytest.skip(f"needs '{NEEDS[name]}', which a grader that is not root lacks by design (attn-kata doctor: not "
                    "active; grading with a secret refuses here)")
    _, status, detail = CASES[name]
    steps = {s["id"]: s for s in reports[name]["steps"]}
    attacked = steps["dot_scores"]
    if status == "failed":  # wrong outputs: whatever checks they fail, never full marks
        assert attacked["status"] in ("failed", "partial"), attacked
    else:
        assert attacked["status"] == status, attacked
    if detail is not None:
        assert attacked["detail"] == detail, attacked
    twin = TWIN[name]
    if twin == "full":
        assert attacked["score"] == attacked["max_score"], attacked
    elif twin == "zero":
        assert attacked["score"] == 0, attacked
    elif twin is not None:  # exactly what an honest submission with the same outputs gets
        honest = {s["id"]: s for s in reports[f"twin_{twin}"]["steps"]}["dot_scores"]
        assert attacked["score"] == honest["score"], (attacked, honest)
        assert [c["passed"] for c in attacked["checks"]] == [c["passed"] for c in honest["checks"]]
    else:
        assert attacked["score"] < attacked["max_score"]
    if not name.endswith("_at_import"):  # an import-time exit takes the whole file with it
        assert steps["causal_mask"]["score"] == steps["causal_mask"]["max_score"], steps["causal_mask"]
    text = json.dumps(reports[name])
    assert not any(secret in text for secret in SECRETS), "a secret reached the report"


def test_every_case_has_a_twin() -> None:
    assert set(TWIN) == set(CASES)
    assert {t for t in TWIN.values() if t not in (None, "full", "zero")} <= set(TWINS)


def test_the_zygote_survives_every_attack(reports: dict[str, dict]) -> None:
    """kill_parent and the rest never take the zygote down (a silent restart would hide it)."""
    assert reports["_zygote_kept"]["same"]


def test_nothing_left_running_or_written(reports: dict[str, dict]) -> None:
    deadline = time.monotonic() + scaled(30)  # a guard against hangs, not a speed bound
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers() == {}
    assert not (ROOT / "solutions" / "pwned.txt").exists()
    assert reports["_new_dirs"]["dirs"] == []  # chattr +i left nothing undeletable behind


def test_the_leftover_detector_finds_a_daemon_when_killing_is_off(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The detector above can fail: with the PID namespace and the zygote's reaping switched off (a fault
    injection), the daemon of `daemon_outlives_step` survives its worker, and the detector sees it."""
    from grader.pool import zygote

    p = tmp_path / "daemon.py"
    p.write_text(CASES["daemon_outlives_step"][0])
    monkeypatch.setenv("ATTN_KATA_TEST_FAULTS", "no_pidns,no_reaping")
    zygote.zygote(fresh=True)
    try:
        engine.grade(p, steps=["dot_scores"])
        deadline = time.monotonic() + 30
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
    deadline = time.monotonic() + 30
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers() == {}


def test_worker_output_never_reaches_json_stdout(tmp_path: Path) -> None:
    """The grader's real stdout: exactly one JSON document, nothing the worker wrote (it tries /dev/tty, its
    own fd 1 and every /proc/PID/fd/1 it can name)."""
    for case in ("print_flood_and_fake_report", "bypass_stdout_redirect_via_proc"):
        p = tmp_path / f"{case}.py"
        p.write_text(CASES[case][0])
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


def test_a_worker_holds_no_socket_but_its_channel(reports: dict[str, dict]) -> None:
    """The fds a worker inherits: its channel only (no zygote connection, nothing to command)."""
    src = attack("""
        import os, stat, torch
        def attention_scores(inputs, query):
            socks = [fd for fd in range(1024) if _is_sock(fd)]
            return torch.tensor([float(len(socks))] * inputs.shape[0])
        def _is_sock(fd):
            try:
                return stat.S_ISSOCK(os.fstat(fd).st_mode)
            except OSError:
                return False
        """)
    import torch

    from grader.checks import Case
    from grader.grading.engine import request
    from grader.pool.session import Worker
    from grader.registry import BY_ID

    w = Worker([("probe_fds", "probe_fds.py", src)], {})
    try:
        w.confined(60)
        w.hello(60)
        case = Case("call", {"inputs": torch.zeros(2, 2), "query": torch.zeros(2)},
                    {"fn": "attention_scores", "args": ["inputs", "query"], "consts": [], "grad": False, "repeat": 1})
        tensors, _ = w.ask(request(BY_ID["dot_scores"], {"probe": case}), 60)
    finally:
        w.close()
    assert tensors["probe/out"].tolist() == [1.0, 1.0]


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


def test_step_details_say_what_happened(reports: dict[str, dict]) -> None:
    detail = {name: {s["id"]: s for s in reports[name]["steps"]}["dot_scores"]["detail"]
              for name in CASES if name in reports}  # (NEEDS: not run where a layer it needs is lacking)
    assert detail["infinite_loop"] == "timeout"
    assert detail["os_exit_in_step"] == "crashed"
    assert detail["memory_bomb"] == "memory_limit"
    assert detail["sys_exit_in_step"] == "crashed"
    assert detail["not_a_tensor_eq_always_true"] == "wrong_type"
    assert detail["monkeypatch_allclose"] == "wrong_answer"
    assert detail["garbage_on_the_channel"] == "no_result"
    assert detail["daemon_outlives_step"] == "passed"


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
    deadline = time.monotonic() + 10  # the group's kill is immediate; its delivery, not quite
    while _named(name) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _named(name)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert left == [], "a child the submission forked outlived grading"
