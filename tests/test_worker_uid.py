"""A worker never runs as a uid that owns anything outside its work dir (issue 23), in every set-up.

A root grader's worker becomes `nobody`, even where Python lives under a 0700 /root (this machine's pyenv): in
its own mount namespace it opens the way there (grader.sandbox.confine._open_the_way) without changing the real
file system. A grader that is not root leaves its worker its own uid (nothing else is possible): the need is then
met by seccomp (`seccomp_no_file_changes`) or grading with a secret refuses. Landlock grants a fixed list of
/etc's files, never /etc/shadow, SSH host keys or TLS private keys. Each attack's step must score exactly what
its honest twin scores; a planted regression (`skip_layers`: the uid kept, seccomp off) shows each test can fail.
Runs in .ci/setups.sh's set-ups too (root with a world-readable Python, a non-root user): no test skips there,
each asserts what that set-up must give."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.grading import engine
from grader.pool.session import WeakSandbox
from grader.sandbox import confine

pytestmark = pytest.mark.sandbox

ROOT = Path(__file__).resolve().parent.parent
IS_ROOT = os.geteuid() == 0
NOBODY = confine.NOBODY
TWINS = {
    "full": "import torch\ndef attention_scores(inputs, query):\n    return inputs @ query\n",
    "zeros": "import torch\ndef attention_scores(inputs, query):\n    return torch.zeros(inputs.shape[0])\n",
}
# right answers only where the worker is not root, owns its work dir and its log, and has no way back to root
UID_CHECK = textwrap.dedent("""
    import os, torch
    def attention_scores(inputs, query):
        me = os.geteuid()
        mine = os.stat(".").st_uid == me and os.stat("output.log").st_uid == me
        if 0 in os.getresuid() or 0 in os.getresgid() or not mine:
            return torch.zeros(inputs.shape[0])
        return inputs @ query
""")


def _grade(tmp: Path, name: str, src: str, **kwargs: Any) -> dict:
    p = tmp / f"{name}.py"
    p.write_text(src)
    return engine.grade(p, steps=["dot_scores"], timeout=30, **kwargs).to_dict()


def _step(report: dict) -> dict:
    return report["steps"][0]


def _same_as(report: dict, twin: dict) -> bool:
    a, b = _step(report), _step(twin)
    return a["score"] == b["score"] and [c["passed"] for c in a["checks"]] == [c["passed"] for c in b["checks"]]


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("twins")
    return {k: _grade(tmp, f"twin_{k}", v) for k, v in TWINS.items()}


def test_the_worker_is_never_root(tmp_path: Path, twins: dict[str, dict]) -> None:
    report = _grade(tmp_path, "uid_check", UID_CHECK)
    assert _same_as(report, twins["full"]), _step(report)
    layers = set(report["sandbox"]["layers"])
    assert "unprivileged_user" in layers
    # root: nobody, whoever owns Python (a root-only pyenv included); otherwise the grader's own uid
    assert ("owns_nothing_outside" in layers) == IS_ROOT, layers
    if IS_ROOT:
        # planted regression: the uid kept (what no mount namespace and a root-only Python would leave)
        kept = _grade(tmp_path, "uid_check_kept", UID_CHECK, config={"skip_layers": ["user"]})
        assert _same_as(kept, twins["zeros"]), _step(kept)
        assert not {"unprivileged_user", "owns_nothing_outside"} & set(kept["sandbox"]["layers"])


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder anyone may search, outside every work dir, holding a program and a file of this user's."""
    folder = Path(tempfile.mkdtemp(prefix="attn-kata-uid-test-"))
    folder.chmod(0o755)
    (folder / "program").write_bytes(b"#!/bin/sh\n")
    (folder / "program").chmod(0o755)
    (folder / "data.txt").write_text("kept")
    (folder / "data.txt").chmod(0o644)
    os.utime(folder / "data.txt", (1_000_000_000, 1_000_000_000))
    try:
        yield folder
    finally:
        for p in (folder, folder / "program", folder / "data.txt"):
            if p.exists():
                p.chmod(0o700 if p.is_dir() else 0o600)
        for p in (folder / "program", folder / "data.txt"):
            p.unlink(missing_ok=True)
        folder.rmdir()


def _file_attack(folder: Path) -> str:
    """What the red team did: a program made setuid, a folder closed to its owner, a file's owner and times."""
    return textwrap.dedent(f"""
        import os, torch
        def attention_scores(inputs, query):
            done = []
            for name, change in (("chmod_suid", lambda: os.chmod({str(folder / "program")!r}, 0o4755)),
                                 ("chmod_dir", lambda: os.chmod({str(folder)!r}, 0)),
                                 ("chown", lambda: os.chown({str(folder / "data.txt")!r}, 4242, 4242)),
                                 ("utime", lambda: os.utime({str(folder / "data.txt")!r}, (0, 0)))):
                try:
                    change()
                    done.append(name)
                except OSError:
                    pass
            return torch.zeros(inputs.shape[0]) if done else inputs @ query
    """)


def _unchanged(folder: Path) -> bool:
    if os.stat(folder).st_mode & 0o7777 != 0o755:
        return False  # closed (chmod 0): a grader that is not root could not even stat what it holds
    st = [os.stat(p) for p in (folder, folder / "program", folder / "data.txt")]
    return ([s.st_mode & 0o7777 for s in st] == [0o755, 0o755, 0o644] and st[2].st_mtime == 1_000_000_000
            and {s.st_uid for s in st} == {os.geteuid()})


@pytest.mark.strong_gate  # the refusal itself: never under tests/conftest.py's waiver
def test_no_file_outside_changes_mode_owner_or_times(tmp_path: Path, twins: dict[str, dict], outside: Path) -> None:
    report = _grade(tmp_path, "file_attack", _file_attack(outside))
    layers = set(report["sandbox"]["layers"])
    guarded = bool({"owns_nothing_outside", "seccomp_no_file_changes"} & layers)
    assert ("owns_nothing_outside" in layers) == IS_ROOT  # root: whatever seccomp does, the uid owns nothing here
    # where a layer stops it the attack changes nothing and scores as the honest twin; where none does, it
    # succeeds (the need is missing, and grading with a secret refuses: below)
    assert _unchanged(outside) == guarded
    assert _same_as(report, twins["full" if guarded else "zeros"]), _step(report)
    if not guarded:
        with pytest.raises(WeakSandbox, match="owns nothing outside"):
            _grade(tmp_path, "file_attack_strong", _file_attack(outside), secret="k", config={"require_strong": True})


def test_planted_regression_a_root_worker_changes_root_files(tmp_path: Path, twins: dict[str, dict],
                                                            outside: Path) -> None:
    """With the uid kept and seccomp off, the same attack gets through (the test above can fail). Not root:
    the worker keeps the grader's uid anyway, and seccomp off leaves it the owner's rights."""
    report = _grade(tmp_path, "file_attack_kept", _file_attack(outside), config={"skip_layers": ["user", "seccomp"]})
    assert not _unchanged(outside)
    assert _same_as(report, twins["zeros"]), _step(report)
    assert "owns_nothing_outside" not in report["sandbox"]["layers"]


SECRET_FILES = ["/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/machine-id", "/etc/ssl/private"]
CANARY_KEY = Path("/etc/ssh/ssh_host_attn-kata-test_key")  # planted as root: 0644, so only Landlock can stop it


@pytest.fixture
def etc_secrets() -> Iterator[list[str]]:
    planted = IS_ROOT and CANARY_KEY.parent.is_dir() and not CANARY_KEY.exists()
    if planted:
        CANARY_KEY.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n")
        CANARY_KEY.chmod(0o644)
    try:
        keys = sorted(str(p) for p in Path("/etc/ssh").glob("ssh_host_*_key"))
        yield [p for p in SECRET_FILES if os.path.exists(p)] + keys
    finally:
        if planted:
            CANARY_KEY.unlink(missing_ok=True)


def _etc_reader(secrets: list[str]) -> str:
    return textwrap.dedent(f"""
        import os, pwd, torch
        def attention_scores(inputs, query):
            read = []
            for path in {secrets!r}:
                try:
                    if os.path.isdir(path):
                        os.listdir(path)
                    else:
                        open(path, "rb").read(1)
                    read.append(path)
                except PermissionError:
                    pass
            pwd.getpwuid(os.geteuid())  # what Python needs of /etc still works (passwd, nsswitch.conf)
            open("/etc/ld.so.cache", "rb").read(1)
            return torch.zeros(inputs.shape[0]) if read else inputs @ query
    """)


@pytest.mark.parametrize("skip", [[], ["user"]], ids=["as_run", "uid_kept"])
def test_etc_secrets_are_unreadable(tmp_path: Path, twins: dict[str, dict], etc_secrets: list[str],
                                    skip: list[str]) -> None:
    """Landlock's /etc is a list of files: a worker gets PermissionError on /etc/shadow and SSH host keys, even
    one that kept uid 0 (their owner) and even a key every user could read."""
    assert "/etc/shadow" in etc_secrets and (not IS_ROOT or str(CANARY_KEY) in etc_secrets)
    report = _grade(tmp_path, "etc_reader", _etc_reader(etc_secrets), config={"skip_layers": skip})
    assert "landlock_filesystem" in report["sandbox"]["layers"]
    assert _same_as(report, twins["full"]), _step(report)


def test_no_grant_covers_etc_secrets() -> None:
    grants = confine.readable_paths()
    etc = [g for g in grants if g == "/etc" or g.startswith("/etc/")]
    allowed = {os.path.realpath(p) for p in confine.ETC}
    assert "/etc" not in grants and set(etc) <= allowed, etc
    for secret in [*SECRET_FILES, "/etc/ssh/ssh_host_ed25519_key", "/etc/pki/tls/private/x.key"]:
        assert not any(secret == g or secret.startswith(g + "/") for g in grants), secret


def test_correct_submissions_keep_full_marks() -> None:
    """The fixtures a root-only Python's nobody worker must still import and run (lazy torch imports included)."""
    for name in ("book_verbatim.py", "mha_sdpa.py", "loops.py"):
        report = engine.grade(ROOT / "tests" / "fixtures" / "correct" / name).to_dict()
        ran = [s for s in report["steps"] if s["status"] != "not_started"]
        assert ran and all(s["status"] == "passed" and s["score"] == s["max_score"] for s in ran), (name, ran)
        assert ("owns_nothing_outside" in report["sandbox"]["layers"]) == IS_ROOT
    assert len(ran) >= 6


OPENER = textwrap.dedent("""
    import json, os, sys
    from grader.sandbox import confine
    base, = sys.argv[1:]
    plan, ok = confine._plan([os.path.join(base, "keep", "lib")], {os.path.join(base, "keep", "lib")})
    out = {"plan": plan, "ok": ok}
    out["opened"] = confine._own_mount_namespace() and confine._open_the_way(confine._recipe(plan))
    os.setgroups([]); os.setgid(confine.NOBODY); os.setuid(confine.NOBODY)
    def attempt(f):
        try:
            return f()
        except OSError as e:
            return type(e).__name__
    out["module"] = attempt(lambda: open(os.path.join(base, "keep", "lib", "mod.py")).read())
    out["listing"] = attempt(lambda: os.listdir(base))
    out["secret"] = attempt(lambda: open(os.path.join(base, "secret.txt")).read())
    out["create"] = attempt(lambda: open(os.path.join(base, "new"), "w").close())
    out["shell"] = attempt(lambda: oct(os.stat(base).st_mode))
    out["nosuid"] = bool(os.statvfs(os.path.join(base, "keep")).f_flag & os.ST_NOSUID)
    print(json.dumps(out))
""")


def test_the_mount_view_opens_only_the_way(tmp_path: Path) -> None:
    """A folder nobody cannot search (a 0700 /root): in the worker's mount view, a read-only root-owned shell
    holds only the child on the way, the rest is absent, and the real folder keeps its mode."""
    base = Path(tempfile.mkdtemp(prefix="attn-kata-view-test-"))  # 0700, this user's
    try:
        (base / "keep" / "lib").mkdir(parents=True)
        (base / "keep" / "lib" / "mod.py").write_text("x = 1\n")
        (base / "secret.txt").write_text("root's")
        for p in (base / "keep", base / "keep" / "lib"):
            p.chmod(0o755)
        (base / "keep" / "lib" / "mod.py").chmod(0o644)
        (base / "secret.txt").chmod(0o644)
        out = subprocess.run([sys.executable, "-c", OPENER, str(base)], capture_output=True, text=True, cwd=ROOT,
                             timeout=120)
        if not IS_ROOT:  # no mount namespace, no setuid: what a non-root grader's worker could never do
            assert out.returncode != 0 and "PermissionError" in out.stderr, out.stderr
            return
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
        assert got["plan"] == [[str(base), ["keep"]]] and got["ok"] and got["opened"], got
        assert got["module"] == "x = 1\n" and got["listing"] == ["keep"], got
        assert got["secret"] == "FileNotFoundError" and got["create"] in ("OSError", "PermissionError"), got
        assert got["shell"] == oct(stat.S_IFDIR | 0o755) and got["nosuid"], got
        # the real file system is as it was, and nothing was mounted here
        assert stat.S_IMODE(os.stat(base).st_mode) == 0o700 and (base / "secret.txt").read_text() == "root's"
        assert str(base) not in Path("/proc/self/mountinfo").read_text()
    finally:
        for p in sorted(base.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        base.rmdir()


NO_SYS_ADMIN = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(24, 21, 0, 0, 0)  # PR_CAPBSET_DROP CAP_SYS_ADMIN: root's capabilities after the exec lack it
    if len(sys.argv) > 1:
        os.execv(sys.executable, [sys.executable, "-c", sys.argv[1]])
""")
GRADE_WITHOUT_SYS_ADMIN = textwrap.dedent("""
    import json, sys
    from grader.grading import engine
    from grader.pool.session import WeakSandbox
    r = engine.grade(%r, steps=["dot_scores"], timeout=30).to_dict()
    try:
        engine.grade(%r, steps=["dot_scores"], timeout=30, secret="k", config={"require_strong": True})
        refused = ""
    except WeakSandbox as e:
        refused = str(e)
    print(json.dumps({"score": r["steps"][0]["score"], "layers": r["sandbox"]["layers"], "refused": refused}))
""")


@pytest.mark.strong_gate  # the refusal itself: never under tests/conftest.py's waiver
def test_without_a_mount_namespace(tmp_path: Path) -> None:
    """Docker's default capabilities keep CAP_SETUID but not CAP_SYS_ADMIN: no mount namespace. A world-readable
    Python still lets the worker become nobody; a root-only one cannot be opened, so it keeps uid 0, says so,
    and grading with a secret refuses with the reason."""
    sub = tmp_path / "uid_check.py"
    sub.write_text(UID_CHECK)
    code = GRADE_WITHOUT_SYS_ADMIN % (str(sub), str(sub))
    out = subprocess.run([sys.executable, "-c", NO_SYS_ADMIN, code], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    plan, importable = confine.view_plan()
    nobody_possible = IS_ROOT and importable and not plan
    if not IS_ROOT or nobody_possible:  # a world-readable Python, or no root at all: as everywhere else
        assert got["score"] == 5.0 and "unprivileged_user" in got["layers"], got
        assert ("owns_nothing_outside" in got["layers"]) == IS_ROOT, got
    else:
        assert got["score"] == 0 and not {"unprivileged_user", "owns_nothing_outside"} & set(got["layers"]), got
        assert "never root" in got["refused"], got  # seccomp may stop its chmods: uid 0 is refused all the same
        assert ("owns nothing outside" in got["refused"]) == ("seccomp_no_file_changes" not in got["layers"]), got


def test_capabilities_are_gone_after_the_uid_change() -> None:
    """setuid() clears the permitted and effective sets but not the bounding set, and takes CAP_SETPCAP, which
    emptying it needs: the worker empties it first (capabilities.drop_bounding)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            from grader.sandbox import capabilities
            if IS_ROOT:
                capabilities.drop_bounding()
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            ok = capabilities.drop_all() and capabilities.bounding_set() == 0
        finally:
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    # not root: the bounding set it was given stays (emptying it needs CAP_SETPCAP), no exec can use it under
    # no_new_privs, and the need is met by the uid (session.REQUIRED_LAYERS: "no capabilities")
    assert got == (b"1" if IS_ROOT else b"0")
