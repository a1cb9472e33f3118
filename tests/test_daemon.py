"""The warm background grader (grader/daemon), run as a learner runs it: real `attn-kata` processes, a real daemon
of each test's own (its own runtime folder), real sockets, another uid played by a real process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
from machine import scaled

from tests.procs import descendants

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534

# a client that speaks the protocol by hand: argv[1] is the request (JSON), argv[2] a file for its stdout and
# stderr; prints the answer (null: none). BECOME, run after the imports, may change who it is.
RAW = """
import ctypes, json, os, socket, sys
from grader.daemon import paths, protocol
from grader.daemon.fingerprint import fingerprint
doc = json.loads(sys.argv[1])
doc.setdefault("fingerprint", fingerprint())
where = str(paths.for_this_kata().socket)
out = os.open(sys.argv[2], os.O_WRONLY) if len(sys.argv) > 2 else 1
cwd = os.open(".", os.O_RDONLY)
BECOME
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(where)
try:
    protocol.send(conn, doc, [0, out, out, cwd] if doc.get("op") == "run" else [])
    answer, _fds = protocol.receive(conn)
except (BrokenPipeError, ConnectionResetError):  # closed unread: no answer
    answer = None
print("ANSWER", json.dumps(answer))
"""
AS_ME = RAW.replace("BECOME", "")
AS_NOBODY = RAW.replace("BECOME", f"os.setgid({NOBODY}); os.setuid({NOBODY})")
# `nobody` for the kernel's records (effective uid), yet able to reach root's 0700 folder (fsuid 0): only the
# daemon's SO_PEERCRED check stands between it and an answer
AS_SNEAKY_NOBODY = RAW.replace("BECOME", f"os.seteuid({NOBODY}); ctypes.CDLL(None).setfsuid(0)")


@pytest.fixture
def env(tmp_path: Path):  # type: ignore[no-untyped-def]
    """The learner's environment with the daemon on, in a runtime folder of this test's own; afterwards `daemon
    stop` must leave nothing of it running (and anything left is killed, so that no test outlives its daemon)."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    marker = tmp_path / "code.py"  # what its daemon watches instead of grader/ (test_a_code_change_restarts_it)
    marker.write_text("v = 1\n")
    e = {**os.environ, "ATTN_KATA_RUNTIME_DIR": str(run), "ATTN_KATA_LANG": "en", "COLUMNS": "100",
         "ATTN_KATA_DAEMON_FINGERPRINT": str(marker)}
    for k in ("ATTN_KATA_NO_DAEMON", "ATTN_KATA_SECRET", "ATTN_KATA_DAEMON_IDLE"):
        e.pop(k, None)
    yield e
    kata("daemon", "stop", env=e)
    wait_until(lambda: not ours(run), 10)
    left = ours(run)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"left running after `daemon stop`: {left}"


def kata(*args: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def wait_until(condition, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + scaled(seconds)  # tests/machine.py: bounds written for the idle CI machine
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def daemons(run: Path) -> list[int]:
    """The daemons started for this runtime folder (found by their environment: they are not our children)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
                name = Path(f"/proc/{entry}/comm").read_text().strip()
            except OSError:
                continue
            if name == "attn-daemon" and f"ATTN_KATA_RUNTIME_DIR={run}".encode() in environ:
                found.append(int(entry))
    return found


def ours(run: Path) -> list[int]:
    """Those daemons and everything below them (zygote, workers)."""
    return [p for d in daemons(run) for p in (d, *descendants(d))]


def daemon_pid(e: dict[str, str]) -> int | None:
    status = kata("daemon", "status", env=e)
    return int(status.stdout.split("pid ")[1].split(",")[0]) if status.returncode == 0 else None


def served(e: dict[str, str]) -> int:
    return int(kata("daemon", "status", env=e).stdout.split(", ")[1].split()[0])


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def workspace(tmp_path: Path, name: str, source: str = "exercises", **files: str) -> Path:
    ws = tmp_path / name
    shutil.copytree(ROOT / source, ws, ignore=shutil.ignore_patterns("__pycache__", ".attn-kata"))
    for file, text in files.items():
        (ws / file).write_text(text)
    return ws


def same(a: subprocess.CompletedProcess[str], b: subprocess.CompletedProcess[str]) -> None:
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


def test_the_result_is_identical_with_and_without_it(env: dict[str, str], tmp_path: Path) -> None:
    buggy = (ROOT / "tests" / "fixtures" / "buggy" / "mask_fill_zero.py").read_text()
    stubs, bug = workspace(tmp_path, "stubs"), workspace(tmp_path, "bug", **{"step07_causal_mask.py": buggy})
    solved = workspace(tmp_path, "solved", "solutions")
    runs = [("check", "dot_scores", "--path", str(stubs)), ("check", "--path", str(solved)),
            ("grade", "solutions", "--format", "json"), ("grade", str(stubs), "--format", "json"),
            ("--lang", "zh", "check", "causal_mask", "--path", str(bug)),
            ("check", "no_such_step"), ("list", "--path", str(solved))]
    for n, args in enumerate(runs, start=1):
        warm = kata(*args, env=env)
        assert served(env) == n, args  # it really was the daemon that answered
        same(warm, kata("--no-daemon", *args, env=env))
    # progress is written the same way: the daemon's check of one copy, this process's check of another
    twin = workspace(tmp_path, "twin", "solutions")
    kata("check", "--path", str(twin), env={**env, "ATTN_KATA_NO_DAEMON": "1"})
    same(kata("list", "--path", str(solved), env=env), kata("--no-daemon", "list", "--path", str(twin), env=env))
    assert "passed (5/5)" in kata("list", "--path", str(solved), env=env).stdout


def test_in_a_terminal_too_colours_width_and_heatmaps(env: dict[str, str], tmp_path: Path) -> None:
    buggy = (ROOT / "tests" / "fixtures" / "buggy" / "mask_fill_zero.py").read_text()
    ws = workspace(tmp_path, "ws", **{"step07_causal_mask.py": buggy})
    outputs = []
    for extra in ([], ["--no-daemon"]):
        child = pexpect.spawn(sys.executable, ["-m", "grader", *extra, "check", "causal_mask", "--path", str(ws)],
                              cwd=str(ROOT), encoding="utf-8", timeout=120, dimensions=(50, 133),
                              env={**env, "TERM": "xterm-256color", "COLUMNS": ""})
        outputs.append(child.read())
        child.close()
        assert child.exitstatus == 1
    assert "\x1b[" in outputs[0] and "yours" in outputs[0]  # colours and the failing weights' heatmap
    assert outputs[0] == outputs[1]
    assert served(env) == 1


def test_the_client_imports_no_torch(env: dict[str, str], tmp_path: Path) -> None:
    kata("daemon", "start", env=env)  # `list` alone never starts it (issue 25: answered in ~0.1 s without)
    kata("list", env=env)
    probe = tmp_path / "modules.json"
    code = ("import atexit, json, sys\n"
            f"atexit.register(lambda: open({str(probe)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
            "sys.argv = ['attn-kata', 'check', 'dot_scores', '--path', sys.argv[1]]\n"
            "from grader.cli import main\nmain()\n")
    done = subprocess.run([sys.executable, "-c", code, str(workspace(tmp_path, "ws"))], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "not started" in done.stdout
    modules = set(json.loads(probe.read_text()))
    assert served(env) == 2
    assert not {"torch", "numpy", "rich", "grader.grading.engine", "grader.pool.zygote"} & modules


@pytest.mark.skipif(sys.platform != "linux", reason="the Linux backend's zygote")
def test_the_daemon_itself_never_imports_torch(env: dict[str, str], tmp_path: Path) -> None:
    """Issue 28: torch is imported once, by the zygote. The daemon maps no libtorch; every check goes to one grading
    process it keeps (forked from the zygote: the reference's results stay warm), which, killed, is replaced by the
    next check, with the same output."""
    ws = workspace(tmp_path, "ws", "solutions")
    first = kata("check", "--path", str(ws), env=env)
    pid = daemon_pid(env)
    assert pid is not None and first.returncode == 0, first.stdout + first.stderr

    def graders() -> list[int]:
        return [p for p, name in descendants(pid).items() if name == "attn-grade"]

    assert "libtorch" not in Path(f"/proc/{pid}/maps").read_text()
    assert "attn-zygote" in descendants(pid).values() and len(graders()) == 1
    resident = graders()[0]
    same(first, kata("check", "--path", str(ws), env=env))
    assert graders() == [resident]  # the same process served the second check
    os.kill(resident, signal.SIGKILL)
    same(first, kata("check", "--path", str(ws), env=env))
    assert len(graders()) == 1 and graders() != [resident] and served(env) == 3
    assert "libtorch" not in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="playing another user (nobody) needs root")
def test_another_user_cannot_connect(env: dict[str, str], tmp_path: Path) -> None:
    kata("daemon", "start", env=env)
    kata("list", env=env)
    pid = daemon_pid(env)
    sock = next((tmp_path / "run" / "attn-kata").glob("*.sock"))
    assert sock.stat().st_mode & 0o777 == 0o600 and sock.parent.stat().st_mode & 0o777 == 0o700
    request = json.dumps({"op": "run", "argv": ["--lang", "en", "list"], "prog": "attn-kata", "env": env})
    # a plain other user: the 0700 folder stops it before the socket
    out = tmp_path / "theirs.txt"
    out.write_text("")
    out.chmod(0o666)
    plain = subprocess.run([sys.executable, "-c", AS_NOBODY, request, str(out)], env=env, cwd=str(ROOT),
                           capture_output=True, text=True, timeout=60)
    assert "PermissionError" in plain.stderr and "ANSWER" not in plain.stdout
    # one that reaches the socket anyway: the daemon reads its uid from the kernel and answers nothing
    sneaky = subprocess.run([sys.executable, "-c", AS_SNEAKY_NOBODY, request, str(out)], env=env, cwd=str(ROOT),
                            capture_output=True, text=True, timeout=60)
    assert sneaky.returncode == 0, sneaky.stderr
    assert "ANSWER null" in sneaky.stdout and out.read_text() == ""
    assert f"refused a connection of uid {NOBODY}" in next((tmp_path / "run" / "attn-kata").glob("*.log")).read_text()
    assert daemon_pid(env) == pid and served(env) == 1  # still there, and it ran nothing for them
    # the same request from this user is answered: the refusal above is about the uid, nothing else
    mine = subprocess.run([sys.executable, "-c", AS_ME, request, str(out)], env=env, cwd=str(ROOT),
                          capture_output=True, text=True, timeout=60)
    assert 'ANSWER {"exit": 0}' in mine.stdout and "dot_scores" in out.read_text()


def test_it_never_serves_a_secret_or_batch(env: dict[str, str], tmp_path: Path) -> None:
    secret = kata("grade", "solutions", "--format", "json", env={**env, "ATTN_KATA_SECRET": "s3cret"})
    assert secret.returncode == 0
    assert daemon_pid(env) is None  # graded in-process; no daemon was even started
    kata("daemon", "start", env=env)
    kata("list", env=env)
    assert kata("grade", "exercises", "--secret", "s3cret", "--format", "json", env=env).returncode == 0
    assert served(env) == 1
    for argv, extra in ((["batch", "exercises", "--out", str(tmp_path / "o")], {}),
                        (["grade", "exercises", "--secret", "x"], {}),
                        (["grade", "exercises"], {"ATTN_KATA_SECRET": "x"})):
        request = {"op": "run", "argv": ["--lang", "en", *argv], "prog": "attn-kata", "env": {**env, **extra}}
        raw = subprocess.run([sys.executable, "-c", AS_ME, json.dumps(request)], env=env, cwd=str(ROOT),
                             capture_output=True, text=True, timeout=60)
        assert '"refused"' in raw.stdout, (argv, raw.stdout, raw.stderr)
    assert served(env) == 1 and not (tmp_path / "o").exists()


def test_a_stale_socket_is_replaced(env: dict[str, str], tmp_path: Path) -> None:
    import socket

    folder = tmp_path / "run" / "attn-kata"
    folder.mkdir(mode=0o700)
    key = subprocess.run([sys.executable, "-c", "from grader.daemon import paths; print(paths.for_this_kata().socket)"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(key)  # a socket file nobody listens on: what a killed daemon leaves
    dead.close()
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with pytest.raises(ConnectionRefusedError):
        probe.connect(key)
    assert kata("daemon", "start", env=env).returncode == 0
    assert kata("list", env=env).returncode == 0
    assert daemon_pid(env) is not None
    probe.connect(key)  # someone answers there now
    probe.close()


def test_a_killed_daemon_is_restarted_by_the_next_check(env: dict[str, str], tmp_path: Path) -> None:
    ws = workspace(tmp_path, "ws")
    first = kata("check", "dot_scores", "--path", str(ws), env=env)
    pid = daemon_pid(env)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not ours(tmp_path / "run"), 10)  # its zygote follows it
    again = kata("check", "dot_scores", "--path", str(ws), env=env)
    same(first, again)
    assert daemon_pid(env) not in (None, pid) and served(env) == 1


def test_a_daemon_killed_mid_check_falls_back_to_grading_in_process(env: dict[str, str], tmp_path: Path) -> None:
    slow = "import time\ntime.sleep(3)\n" + (ROOT / "solutions" / "step01_dot_scores.py").read_text()
    ws = workspace(tmp_path, "ws", **{"step01_dot_scores.py": slow})
    kata("daemon", "start", env=env)
    kata("list", env=env)
    pid = daemon_pid(env)
    client = subprocess.Popen([sys.executable, "-m", "grader", "check", "dot_scores", "--path", str(ws)], env=env,
                              cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_until(lambda: "attn-worker" in descendants(pid).values(), 60)  # it is grading now
    os.kill(pid, signal.SIGKILL)
    out, err = client.communicate(timeout=300)
    expected = kata("--no-daemon", "check", "dot_scores", "--path", str(ws), env=env)
    assert client.returncode == expected.returncode == 0
    assert (out, err) == (expected.stdout, expected.stderr)


def test_a_client_gone_mid_check_takes_the_daemon_and_its_workers_with_it(env: dict[str, str], tmp_path: Path) -> None:
    slow = "import time\ntime.sleep(30)\n"
    ws = workspace(tmp_path, "ws", **{"step01_dot_scores.py": slow})
    kata("daemon", "start", env=env)
    kata("list", env=env)
    pid = daemon_pid(env)
    client = subprocess.Popen([sys.executable, "-m", "grader", "check", "dot_scores", "--path", str(ws)], env=env,
                              cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_until(lambda: "attn-worker" in descendants(pid).values(), 60)
    client.send_signal(signal.SIGINT)  # Ctrl-C
    _out, err = client.communicate(timeout=60)
    assert client.returncode == 130 and "interrupted" in err
    assert wait_until(lambda: not ours(tmp_path / "run"), 10)


def test_a_code_change_restarts_it(env: dict[str, str], tmp_path: Path) -> None:
    marker = Path(env["ATTN_KATA_DAEMON_FINGERPRINT"])  # stands for a file of grader/: both are watched the same way
    ws = workspace(tmp_path, "ws")
    first = kata("check", "dot_scores", "--path", str(ws), env=env)
    old = daemon_pid(env)
    marker.write_text("v = 22\n")
    again = kata("check", "dot_scores", "--path", str(ws), env=env)  # the daemon says it is out of date: a new one
    same(first, again)
    new = daemon_pid(env)
    assert new not in (None, old) and wait_until(lambda: not alive(old), 10)  # type: ignore[arg-type]
    marker.write_text("v = 333\n")  # and one that is idle notices by itself
    assert wait_until(lambda: not alive(new), 10)  # type: ignore[arg-type]


def test_the_fingerprint_covers_the_grader_and_the_solutions(monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.daemon import fingerprint
    from grader.settings import KATA_ROOT

    monkeypatch.delenv("ATTN_KATA_DAEMON_FINGERPRINT", raising=False)
    assert {ROOT / "grader", KATA_ROOT / "solutions"} <= set(fingerprint.roots())
    assert str(ROOT / "grader" / "daemon" / "server.py") in fingerprint._files(ROOT / "grader")


def test_it_stops_when_idle_and_on_request(env: dict[str, str], tmp_path: Path) -> None:
    assert kata("daemon", "status", env=env).returncode == 1
    kata("daemon", "start", env={**env, "ATTN_KATA_DAEMON_IDLE": "3"})
    kata("list", env={**env, "ATTN_KATA_DAEMON_IDLE": "3"})
    idle = daemons(tmp_path / "run")
    assert idle and wait_until(lambda: not ours(tmp_path / "run"), 10)
    assert not list((tmp_path / "run" / "attn-kata").glob("*.sock"))
    kata("daemon", "start", env=env)
    kata("list", env=env)
    status = kata("daemon", "status", env=env)
    assert status.returncode == 0 and "running" in status.stdout
    stopped = kata("daemon", "stop", env=env)
    assert "stopped" in stopped.stdout and stopped.returncode == 0
    assert wait_until(lambda: not ours(tmp_path / "run"), 10)
    assert kata("daemon", "status", env=env).returncode == 1
    assert kata("daemon", "stop", env=env).returncode == 0


def test_no_daemon_and_the_environment_bypass_it(env: dict[str, str], tmp_path: Path) -> None:
    for how in (["--no-daemon", "check"], ["check", "--no-daemon"]):
        assert kata(*how, "dot_scores", "--path", str(tmp_path), env=env).returncode == 1
    assert kata("list", env={**env, "ATTN_KATA_NO_DAEMON": "1"}).returncode == 0
    assert daemon_pid(env) is None


def test_watch_starts_it_for_the_checks_that_follow(env: dict[str, str], tmp_path: Path) -> None:
    ws = workspace(tmp_path, "ws")
    child = pexpect.spawn(sys.executable, ["-m", "grader", "watch", "--path", str(ws)], cwd=str(ROOT),
                          encoding="utf-8", timeout=120, dimensions=(50, 133), env={**env, "TERM": "xterm-256color"})
    child.expect("watching")
    child.sendline("q")
    child.expect(pexpect.EOF)
    assert wait_until(lambda: daemon_pid(env) is not None, 30)
    assert kata("check", "dot_scores", "--path", str(ws), env=env).returncode == 1
    assert served(env) == 1


def test_list_never_starts_it_and_a_start_says_so(env: dict[str, str], tmp_path: Path) -> None:
    """Issue 25: the first `list` took 9.7 s because it started the daemon; it never does (nor hint, solution,
    init), and answers alike with one running."""
    ws = workspace(tmp_path, "ws")
    alone = kata("list", "--path", str(ws), env=env)
    assert alone.returncode == 0 and "dot_scores" in alone.stdout
    for args in (("hint", "dot_scores", "--path", str(ws)), ("solution", "dot_scores", "--path", str(ws)),
                 ("init", str(tmp_path / "fresh"))):
        kata(*args, env=env)
    assert daemon_pid(env) is None and not daemons(tmp_path / "run")
    started = kata("daemon", "start", env=env)
    assert started.returncode == 0 and "running" in started.stdout and daemon_pid(env) is not None
    again = kata("daemon", "start", env=env)  # one runs: it is the same one
    assert again.returncode == 0 and len(daemons(tmp_path / "run")) == 1
    kata("hint", "dot_scores", "--path", str(ws), env=env)  # revealed a hint: list shows the same either way
    same(kata("list", "--path", str(ws), env=env), alone)
    assert served(env) == 1
