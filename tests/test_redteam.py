"""Red-team regressions: submissions that attack the grader from inside a worker, run through the real grader
(engine.grade, or the CLI in a subprocess). Each asserts what the attacked step deserves, that honest steps and
honest classmates keep full marks, that the secret never appears in any output, and that nothing this test started
is left behind. Attacks that currently succeed are marked xfail(strict=True): the gap is recorded, and the test
turns red the day the gap is closed, so that its marker is removed.

An attack judged by its per-step scores alone against an honest twin is data (tests/attacks/, graded by
tests/test_attacks.py). Those here stay code because each needs more: the channel's messages read by the grader,
a batch of classmates, System V IPC keys and the keyring made and looked for outside the sandbox, symlinks and a
terminal of the grader's, forged facts whose check message is asserted, the book's answer computed from the
reference at run time, limits on a worker's process tree and what a killed grader leaves."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from procs import descendants, leftovers  # noqa: F401 - tests/procs.py

from grader.grading import engine

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
GOOD = (SOLUTIONS / "step07_causal_mask.py").read_text()  # every attack file also carries a correct step 7
SECRET = "s3cr3t-XYZ-" + secrets.token_hex(6)

# the worker's channel, found without gc (a stale socket object inherited from the zygote has a closed fd),
# and a raw message written on it: a length-prefixed safetensors blob whose metadata is `doc_text`
CHANNEL = '''
import json as _json, os as _os, stat as _stat, struct as _struct

def _channel_fd():
    for fd in range(3, 256):
        try:
            if _stat.S_ISSOCK(_os.fstat(fd).st_mode):
                return fd
        except OSError:
            pass
    return -1

def _send_raw(doc_text):
    head = _json.dumps({"__metadata__": {"kata": doc_text}}).encode()
    head += b" " * (-len(head) % 8)
    payload = _struct.pack("<Q", len(head)) + head
    data = _struct.pack(">Q", len(payload)) + payload
    fd = _channel_fd()
    while data:
        data = data[_os.write(fd, data):]
'''


def honest_source(tag: str = "") -> str:
    """The reference of every step as one learner file (the wrapper's import of CausalAttention dropped)."""
    parts = []
    for f in sorted(SOLUTIONS.glob("*.py")):
        text = f.read_text()
        parts.append("\n".join(ln for ln in text.splitlines() if not re.match(r"from \w+ import", ln)))
    return f"# {tag}\n" + "\n\n".join(parts) + "\n"


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ATTN_KATA_SECRET"}
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env)


def cli_grade(path: Path, *steps: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    args = ["grade", str(path), "--format", "json", "--secret", SECRET]
    for s in steps:
        args += ["--step", s]
    proc = cli(*args)
    assert SECRET not in proc.stdout and SECRET not in proc.stderr
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        doc = None
    return proc, doc


def steps_of(doc: dict) -> dict[str, dict]:
    return {s["id"]: s for s in doc["steps"]}


def assert_nothing_left_running() -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = leftovers()
        if not left:
            return
        time.sleep(0.1)
    raise AssertionError(f"left running: {left}")


# ---------------------------------------------------------------- the channel: messages the grader must survive


def test_deeply_nested_json_on_the_channel_costs_one_step(tmp_path: Path) -> None:
    p = tmp_path / "deepjson.py"
    p.write_text(CHANNEL + GOOD + textwrap.dedent("""
        def attention_scores(inputs, query):
            _send_raw("[" * 200000 + "]" * 200000)
            _os._exit(0)
        """))
    proc, doc = cli_grade(p, "dot_scores", "causal_mask")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert doc is not None
    steps = steps_of(doc)
    assert steps["dot_scores"]["score"] == 0 and steps["dot_scores"]["status"] == "error"
    assert steps["causal_mask"]["status"] == "passed"
    assert_nothing_left_running()


def test_an_open_json_string_on_the_channel_costs_one_step_not_the_grader(tmp_path: Path) -> None:
    """Red team 15: a header of `"` and 150,000 escaped quotes, a JSON string never closed. The trusted side's
    bracket count (channel.json_depth) blanked strings with a pattern that needed the closing quote, so it failed
    at every escaped quote, each time scanning to the end: quadratic, about 5 minutes of the grading process for
    these 300 kB (64 MiB are allowed), with no time-out there; the grade never ended. Now the step is an error at
    once, and scores what its honest twin that returns nothing scores; the other step keeps full marks."""
    bomb = textwrap.dedent("""
        import struct as _struct, sys as _sys
        _HEAD = b'"' + b'\\\\"' * 150_000
        def attention_scores(inputs, query):
            _sys.modules["grader.sandbox.channel"].encode = lambda *a, **k: _struct.pack("<Q", len(_HEAD)) + _HEAD
            return inputs @ query
        """)
    twin = "\ndef attention_scores(inputs, query):\n    raise ValueError('no answer')\n"
    got: dict[str, dict[str, dict]] = {}
    for name, code in (("bomb", bomb), ("twin", twin)):
        p = tmp_path / f"{name}.py"
        p.write_text(GOOD + code)
        t0 = time.monotonic()
        proc, doc = cli_grade(p, "dot_scores", "causal_mask")
        assert proc.returncode == 0 and doc is not None, proc.stderr[-2000:]
        got[name] = steps_of(doc)
        assert time.monotonic() - t0 < 150, f"{name}: {time.monotonic() - t0:.0f} s"
    assert got["bomb"]["dot_scores"]["status"] == "error"
    assert got["bomb"]["dot_scores"]["score"] <= got["twin"]["dot_scores"]["score"] == 0
    assert got["bomb"]["causal_mask"]["status"] == got["twin"]["causal_mask"]["status"] == "passed"
    assert_nothing_left_running()


def test_malformed_hello_is_the_submissions_error(tmp_path: Path) -> None:
    p = tmp_path / "hello.py"
    # the layers the worker really has (grader.sandbox.confine.LAYERS, filled before any learner code ran), so that only
    # the malformed `errors` entry is new
    p.write_text(CHANNEL + textwrap.dedent("""
        from grader.sandbox import confine as _sandbox
        _send_raw(_json.dumps({"names": {}, "errors": {"submission": "boom"}, "layers": dict(_sandbox.LAYERS)}))
        _os._exit(0)
        """))
    proc, doc = cli_grade(p)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert doc is not None and doc["score"] == 0
    assert_nothing_left_running()


FORGED_HELLO_NO_LAYERS = CHANNEL + textwrap.dedent("""
    _send_raw(_json.dumps({"names": {}, "errors": {}}))  # a hello that claims no sandbox layer at all
    _os._exit(0)
    """)


def test_forged_hello_without_layers_is_not_an_infrastructure_error(tmp_path: Path) -> None:
    p = tmp_path / "nolayers.py"
    p.write_text(FORGED_HELLO_NO_LAYERS)
    proc, doc = cli_grade(p)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert doc is not None and doc["score"] == 0


def _batch(folder: Path, out: Path) -> subprocess.CompletedProcess:
    # tests/conftest.py's waiver where a non-root set-up lacks a layer by design (batch reads only its flag)
    waived = ["--allow-weak-sandbox"] if os.environ.get("ATTN_KATA_ALLOW_WEAK_SANDBOX") == "1" else []
    proc = cli("batch", str(folder), "--out", str(out), "--secret", SECRET, "--jobs", "2", *waived)
    assert SECRET not in proc.stdout and SECRET not in proc.stderr
    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f
    return proc


def _gradebook(out: Path) -> dict[str, dict[str, str]]:
    import csv

    with open(out / "gradebook.csv", newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def test_batch_one_forged_hello_does_not_stop_the_class(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.py").write_text(honest_source("alice"))
    (subs / "bob.py").write_text(honest_source("bob"))
    (subs / "mallory.py").write_text(FORGED_HELLO_NO_LAYERS)
    proc = _batch(subs, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-2000:]
    book = _gradebook(tmp_path / "out")
    assert book["alice"]["total"] == book["alice"]["max_score"]
    assert book["bob"]["total"] == book["bob"]["max_score"]
    assert book["mallory"]["total"] == "0"
    assert_nothing_left_running()


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
def test_batch_hostile_classmate_changes_no_other_score(tmp_path: Path) -> None:
    """Eve hunts the secret (environ, gc containers, every /proc/PID/cmdline and environ she can name), and tries to
    write into OUT (a fake report for alice, a new file): she earns nothing, alice and bob keep full marks."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "alice.py").write_text(honest_source("alice"))
    (subs / "bob.py").write_text(honest_source("bob"))
    reversed_secret = SECRET[::-1]  # the needle is built at run time: the source itself never holds the secret
    (subs / "eve.py").write_text(GOOD + textwrap.dedent(f"""
        import gc, os
        def attention_scores(inputs, query):
            needle = {reversed_secret!r}[::-1]
            out = {str(out)!r}
            for target in (out + "/reports/alice.json", out + "/pwned.txt", out + "/gradebook.csv"):
                try:
                    with open(target, "w") as f:
                        f.write('{{"score": 0}}')
                except OSError:
                    pass
            hits = [k for k, v in os.environ.items() if needle in k or needle in v]
            for obj in gc.get_objects():
                items = obj.items() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
                try:
                    for x in items:
                        for y in (x if isinstance(x, tuple) else (x,)):
                            if isinstance(y, (str, bytes)) and y is not needle and needle in (
                                    y if isinstance(y, str) else y.decode("latin-1")):
                                hits.append("gc")
                except Exception:
                    pass
            for pid in range(1, 300):
                for part in ("cmdline", "environ"):
                    try:
                        if needle.encode() in open(f"/proc/{{pid}}/{{part}}", "rb").read():
                            hits.append(part)
                    except OSError:
                        pass
            if not hits:
                raise RuntimeError("nothing found")
            return inputs @ query
        """))
    proc = _batch(subs, out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    book = _gradebook(out)
    assert book["alice"]["total"] == book["alice"]["max_score"] == book["bob"]["total"]
    assert book["eve"]["dot_scores"] == "0" and book["eve"]["causal_mask"] == "6"
    eve = json.loads((out / "reports" / "eve.json").read_text())
    assert steps_of(eve)["dot_scores"]["detail"] == "crashed"
    assert not (out / "pwned.txt").exists()
    assert json.loads((out / "reports" / "alice.json").read_text())["score"] == float(book["alice"]["max_score"]) > 0
    assert_nothing_left_running()


# ---------------------------------------------------------------- the reference of a step still being judged

KEY = secrets.randbelow(1 << 30) + (1 << 30)  # this run's System V key / key description: no other run's
CA_SOURCE_LEN = len((SOLUTIONS / "step09_causal_attention.py").read_bytes())
_SYS = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(platform.machine(), (-1, -1))  # add_key, keyctl

IPC = f'''
import ctypes, zlib
_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
_libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
_libc.syscall.restype = ctypes.c_long
KEY, ADD_KEY, KEYCTL = {KEY}, {_SYS[0]}, {_SYS[1]}
DESC = b"attn-kata-redteam-%d" % KEY

def put(how, data):
    data = zlib.compress(data)
    if how == "shm":
        sid = _libc.shmget(KEY, 1 << 16, 0o1666)
        addr = _libc.shmat(sid, None, 0)
        blob = len(data).to_bytes(4, "little") + data
        ctypes.memmove(addr, blob, len(blob))
    elif how == "msgq":
        q = _libc.msgget(KEY, 0o1666)
        buf = ctypes.create_string_buffer(8 + len(data))
        ctypes.memmove(ctypes.addressof(buf), (1).to_bytes(8, "little") + data, 8 + len(data))
        _libc.msgsnd(q, buf, len(data), 0o4000)
    elif how == "keyring":
        _libc.syscall(ADD_KEY, b"user", DESC, data, len(data), -4)  # the user keyring of the worker's uid

def get(how):
    if how == "shm":
        sid = _libc.shmget(KEY, 0, 0)
        if sid < 0:
            return None
        addr = _libc.shmat(sid, None, 0o10000)
        n = int.from_bytes(ctypes.string_at(addr, 4), "little")
        return zlib.decompress(ctypes.string_at(addr + 4, n))
    if how == "msgq":
        q = _libc.msgget(KEY, 0)
        if q < 0:
            return None
        buf = ctypes.create_string_buffer(8 + 8192)
        n = _libc.msgrcv(q, buf, 8192, 0, 0o4000)
        return zlib.decompress(buf.raw[8:8 + n]) if n > 0 else None
    if how == "keyring":
        kid = _libc.syscall(KEYCTL, 10, -4, b"user", DESC, 0)  # KEYCTL_SEARCH
        if kid < 0:
            return None
        buf = ctypes.create_string_buffer(1 << 16)
        n = _libc.syscall(KEYCTL, 11, kid, buf, 1 << 16)  # KEYCTL_READ
        return zlib.decompress(buf.raw[:n]) if n > 0 else None
'''


def _remove_ipc(how: str) -> None:
    """Remove what the planter left (this test process is the trusted side, running as the worker's uid or root)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if how == "shm" and (sid := libc.shmget(KEY, 0, 0)) >= 0:
        libc.shmctl(sid, 0, None)  # IPC_RMID
    if how == "msgq" and (q := libc.msgget(KEY, 0)) >= 0:
        libc.msgctl(q, 0, None)
    if how == "keyring" and _SYS[1] > 0:
        kid = libc.syscall(_SYS[1], 10, -4, b"user", b"attn-kata-redteam-%d" % KEY, 0)
        if kid >= 0:
            libc.syscall(_SYS[1], 9, kid, -4)  # KEYCTL_UNLINK


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
@pytest.mark.parametrize("how", ["shm", "msgq", "keyring"])
def test_reference_cannot_reach_a_later_worker_through_ipc(tmp_path: Path, how: str) -> None:
    if how == "keyring" and _SYS[0] < 0:
        pytest.skip("no add_key syscall number for this machine")
    planter, consumer = tmp_path / "planter.py", tmp_path / "consumer.py"
    planter.write_text(IPC + textwrap.dedent(f"""
        import linecache, torch, torch.nn as nn
        class MultiHeadAttentionWrapper(nn.Module):  # honest, but it takes a copy of what phase 2 brought
            def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
                super().__init__()
                for key, entry in list(linecache.cache.items()):
                    if "causal_attention" in str(key) and len(entry) > 2:
                        put({how!r}, "".join(entry[2]).encode())
                self.heads = nn.ModuleList([CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
                                            for _ in range(num_heads)])
            def forward(self, x):
                return torch.cat([h(x) for h in self.heads], dim=-1)
        """))
    consumer.write_text(IPC + textwrap.dedent(f"""
        _stolen = get({how!r})
        if _stolen:
            exec(compile(_stolen.decode(), "stolen", "exec"))
        else:
            class CausalAttention:
                def __init__(self, *args, **kwargs):
                    raise RuntimeError("not written")
        """))
    try:
        planted = engine.grade(planter, steps=["multihead_wrapper"], secret=SECRET)
        assert planted.steps[0].status == "passed"
        got = engine.grade(consumer, steps=["causal_attention"], secret=SECRET)
        step = got.steps[0]
        assert step.score == 0.0 and step.status in ("error", "failed"), (step.status, step.score)
    finally:
        _remove_ipc(how)
    assert_nothing_left_running()


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
def test_symlinked_files_in_a_submitted_folder_are_not_followed(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "causal_attention.py").symlink_to(SOLUTIONS / "step09_causal_attention.py")
    private = tmp_path / "private.txt"
    private.write_text(f"normalize_by_sum = 1\nthe key is {SECRET} here\n")
    (sub / "softmax.py").symlink_to(private)
    (sub / "causal_mask.py").write_text(GOOD)
    args = ["grade", str(sub), "--format", "json", "--secret", SECRET]
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert SECRET not in proc.stdout + proc.stderr
    steps = steps_of(json.loads(proc.stdout))
    assert steps["causal_attention"]["score"] == 0
    assert steps["causal_mask"]["status"] == "passed"


# ---------------------------------------------------------------- facts a worker reports about itself

MODULE_CA = textwrap.dedent("""
    import torch, torch.nn as nn

    class CausalAttention(nn.Module):
        def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
            super().__init__()
            self.d_out = d_out
            self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.dropout = nn.Dropout(dropout)
            self.mask = torch.triu(torch.ones(context_length, context_length), diagonal=1)  # not a buffer
        def forward(self, x):
            b, num_tokens, d_in = x.shape
            keys, queries, values = self.W_key(x), self.W_query(x), self.W_value(x)
            attn_scores = queries @ keys.transpose(1, 2)
            attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
            attn_weights = self.dropout(torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1))
            return attn_weights @ values
    """)
FORGE = textwrap.dedent("""
    import grader.worker.probes as _probes  # already in the worker's sys.modules: no file access needed
    _real = _probes._structure
    def _forged(module):
        s = _real(module)
        if isinstance(getattr(module, "mask", None), torch.Tensor):
            s["buffers"] = {**s["buffers"], "mask": [list(module.mask.shape), str(module.mask.dtype)]}
        return s
    _probes._structure = _forged
    """)


# the same lie told by the module itself: its buffers as named_buffers() reports them
OVERRIDE = textwrap.dedent("""
    def _named_buffers(self, *args, **kwargs):
        yield from nn.Module.named_buffers(self, *args, **kwargs)
        yield "mask", self.mask
    CausalAttention.named_buffers = _named_buffers
    """)


def _twin_and_forged(tmp_path: Path, code: str, forge: str, step: str) -> tuple[Any, Any]:
    """(the honest twin's step result, the forger's): the same code, the second with `forge` appended. The twin
    must lack the property (partial) for the comparison to say anything."""
    twin, forged = tmp_path / "twin.py", tmp_path / "forged.py"
    twin.write_text(code)
    forged.write_text(code + forge)
    want = engine.grade(twin, steps=[step]).steps[0]
    got = engine.grade(forged, steps=[step]).steps[0]
    assert want.status == "partial"
    assert got.score == want.score, (got.score, want.score)
    return want, got


@pytest.mark.parametrize("forge", [FORGE, OVERRIDE], ids=["patched_probe", "named_buffers_override"])
def test_forged_structure_facts_earn_nothing(tmp_path: Path, forge: str) -> None:
    """A module whose outputs are right and whose mask is a plain attribute, claiming a registered buffer: the
    point is judged by what a moved module computes (common.moves_with_the_module), which no claim changes. Before
    that check, the forged claim earned the point (it was a strict xfail)."""
    _want, got = _twin_and_forged(tmp_path, MODULE_CA, forge, "causal_attention")
    buffer = next(c for c in got.checks if "registered buffer" in c.name)
    assert not buffer.passed and "does not move with the module" in buffer.message, buffer.message


GPT2_768 = textwrap.dedent("""
    def gpt2_attention(dropout=0.0):
        return MultiHeadAttention(768, 768, 768, dropout, num_heads=12)  # context_length 768, not 1024
    """)
FORGE_1024 = textwrap.dedent("""
    import grader.worker.probes as _probes
    _real = _probes._structure
    def _forged(module):
        s = _real(module)
        s["buffers"] = {n: [[1024, 1024], d] for n, (_shape, d) in s["buffers"].items()}
        return s
    _probes._structure = _forged
    """)


def test_a_forged_mask_size_earns_nothing(tmp_path: Path) -> None:
    """Step 14: the mask's size is the one sign of context_length 1024 on a short sequence; claiming it (the
    outputs are right, only the mask is 768 × 768) earns nothing, as the moved module's output shows."""
    _twin_and_forged(tmp_path, GPT2_768, FORGE_1024, "gpt2_size")


# facts believed through a case they do not touch: one head (step 10's `one`), one token (step 14's `default`)
SHARED_HEADS = textwrap.dedent("""
    import torch, torch.nn as nn
    class MultiHeadAttentionWrapper(nn.Module):
        def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
            super().__init__()
            head = CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
            self.heads = nn.ModuleList([head] * num_heads)  # one head, num_heads times
        def forward(self, x):
            return torch.cat([head(x) for head in self.heads], dim=-1)
    """)
FORGE_UNIQUE = textwrap.dedent("""
    import grader.worker.probes as _probes
    _real = _probes._structure
    def _forged(module):
        s = _real(module)
        s["n_unique_params"] = len(list(module.named_parameters(remove_duplicate=False)))
        return s
    _probes._structure = _forged
    """)
GPT2_64_HEADS = textwrap.dedent("""
    def gpt2_attention(dropout=0.0):
        return MultiHeadAttention(768, 768, 1024, dropout, num_heads=64)  # 64 heads of 12, not 12 of 64
    """)
FORGE_HEADS = textwrap.dedent("""
    import grader.worker.probes as _probes
    _real = _probes._structure
    def _forged(module):
        s = _real(module)
        s["attrs"] = {**s["attrs"], "num_heads": 12, "head_dim": 64}
        return s
    _probes._structure = _forged
    """)


@pytest.mark.parametrize(("step", "code", "forge"), [("multihead_wrapper", SHARED_HEADS, FORGE_UNIQUE),
                                                      ("gpt2_size", GPT2_64_HEADS, FORGE_HEADS)],
                         ids=["shared_heads", "gpt2_64_heads"])
def test_facts_vouched_by_a_case_they_do_not_touch_earn_nothing(tmp_path: Path, step: str, code: str,
                                                                 forge: str) -> None:
    """A wrong module whose one-head (or one-token) case is right, claiming the property it lacks. Step 14's claim
    earned the size point until the facts had to be shown by the case they describe (common.shown_by); step 10's
    shared heads were already refused where the grader's weights are loaded by role, before any fact is read."""
    _twin_and_forged(tmp_path, code, forge, step)


def test_loops_moved_into_helpers_or_lambdas_are_still_loops(tmp_path: Path) -> None:
    p = tmp_path / "loops.py"
    p.write_text(textwrap.dedent("""
        import torch
        def _rows(inputs):
            return torch.stack([inputs @ q for q in inputs])
        def _context(attn_weights, inputs):
            out = torch.zeros(attn_weights.shape[0], inputs.shape[1])
            for i in range(attn_weights.shape[0]):
                out[i] = attn_weights[i] @ inputs
            return out
        def all_attention_scores(inputs):
            return _rows(inputs)
        all_attention_weights = lambda attn_scores: torch.stack([torch.softmax(r, dim=0) for r in attn_scores])
        def all_context_vectors(attn_weights, inputs):
            return _context(attn_weights, inputs)
        """))
    step = engine.grade(p, steps=["all_tokens"]).steps[0]
    loops = next(c for c in step.checks if "loop" in c.name.lower())
    assert not loops.passed
    assert step.score == step.max_score - 1


# ---------------------------------------------------------------- limits and what a worker leaves behind


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
def test_memory_limit_holds_for_the_workers_process_tree(tmp_path: Path) -> None:
    p = tmp_path / "memtree.py"
    p.write_text(GOOD + textwrap.dedent("""
        import os, time, torch
        N, MB = 4, 48
        def attention_scores(inputs, query):
            r, w = os.pipe()
            kids = []
            for _ in range(N):
                pid = os.fork()
                if pid == 0:
                    try:
                        block = bytearray(MB << 20)
                        for i in range(0, len(block), 4096):
                            block[i] = 1
                        os.write(w, b"1")
                        time.sleep(3)
                    finally:
                        os._exit(0)
                kids.append(pid)
            os.close(w)
            got, deadline = b"", time.time() + 5
            while len(got) < N and time.time() < deadline:
                chunk = os.read(r, N)
                if not chunk:
                    break
                got += chunk
            time.sleep(0.3)
            # what the tree holds at once: children that filled their block and are still alive (the cgroup's
            # OOM killer may end one after it reported)
            alive = sum(os.waitpid(pid, os.WNOHANG)[0] == 0 for pid in kids)
            for pid in kids:
                try:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                except OSError:
                    pass
            if min(len(got), alive) * MB <= 100:
                raise MemoryError("the tree was held to its limit")
            return inputs @ query  # the right answer only when the tree held 4 x 48 MB under a 100 MB cap
        """))
    report = engine.grade(p, steps=["dot_scores", "causal_mask"], config={"limits": {"memory_bytes": 64 << 20,
                                                                                 "tree_memory_bytes": 100 << 20}})
    steps = {s.id: s for s in report.steps}
    assert steps["causal_mask"].status == "passed"
    if os.geteuid() != 0 and "memory_cgroup" not in report.to_dict()["sandbox"]["layers"]:
        assert_nothing_left_running()
        pytest.skip("no memory cgroup for a grader that is not root: attn-kata doctor reports 'memory capped for the "
                    "whole process tree (memory cgroup)' not active (each process keeps its RLIMIT_AS)")
    assert steps["dot_scores"].score == 0, steps["dot_scores"]
    assert_nothing_left_running()


def _dirs_with(marker: str) -> list[Path]:
    import tempfile

    found = []
    for d in Path(tempfile.gettempdir()).glob("attn-kata-worker-*"):
        try:
            if (d / marker).exists():
                found.append(d)
        except OSError:
            pass
    return found


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
def test_a_deep_tree_in_the_workdir_is_removed_without_crashing(tmp_path: Path) -> None:
    marker = "redteam-" + secrets.token_hex(6)
    p = tmp_path / "deepdir.py"
    p.write_text(GOOD + textwrap.dedent(f"""
        import os, torch
        def attention_scores(inputs, query):
            if not os.path.exists({marker!r}):  # once per worker: the step calls this many times
                os.mkdir({marker!r})  # the chain's root: it outlives a removal that gives up part-way
                fd = os.open({marker!r}, os.O_RDONLY)
                for _ in range(3000):
                    os.mkdir("d", dir_fd=fd)
                    nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
                    os.close(fd)
                    fd = nfd
                os.close(fd)
            return inputs @ query
        """))
    try:
        report = engine.grade(p, steps=["dot_scores", "causal_mask"])
        assert {s.id: s.status for s in report.steps} == {"dot_scores": "passed", "causal_mask": "passed"}
        assert _dirs_with(marker) == []
    finally:
        for d in _dirs_with(marker):
            subprocess.run(["rm", "-rf", "--one-file-system", str(d)], check=False)
    assert_nothing_left_running()


def test_forged_facts_need_right_outputs(tmp_path: Path) -> None:
    """What the fact gate holds: forged facts on a module whose outputs are all wrong earn nothing."""
    forged = tmp_path / "forged.py"
    forged.write_text(textwrap.dedent("""
        import sys, torch, torch.nn as nn
        for name, mod in list(sys.modules.items()):
            if name.startswith("grader") and hasattr(mod, "_structure"):
                real = mod._structure
                def _structure(module, real=real):
                    s = real(module)
                    s["buffers"]["mask"] = [[64, 64], "torch.float32"]
                    return s
                mod._structure = _structure
        class CausalAttention(nn.Module):  # builds the book's layers, computes nothing right
            def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
                super().__init__()
                self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
                self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
                self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
            def forward(self, x):
                return self.W_value(x) * 0
        """))
    step = engine.grade(forged, steps=["causal_attention"], secret=SECRET).steps[0]
    buffer_check = next(c for c in step.checks if "buffer" in c.name)
    assert not buffer_check.passed, buffer_check
    assert step.score == 0, step


# ---------------------------------------------------------------- what vouches for a property: work, and whose

def _book_answer() -> list:
    """CausalAttention's output on the book's example, as a learner can print it from the book's own code."""
    import torch

    from grader.checks import book_inputs
    from grader.grading import reference

    torch.manual_seed(123)
    ca = reference.namespace()["CausalAttention"](3, 2, 6, 0.0).eval()
    return ca(torch.stack((book_inputs(), book_inputs()))).detach()[0].tolist()


CA_SHELL = '''
import torch, torch.nn as nn
class CausalAttention(nn.Module):  # the book's layers and buffer; forward below
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out, bias=qkv_bias) for _ in range(3))
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
'''
ZERO_FORWARD = '''
    def forward(self, x):
        return torch.zeros(*x.shape[:2], self.d_out)
'''
# (step, attack, its honest twin): the twin does the same work and no more, and the attack must not outscore it.
# The others are data (tests/attacks/, tests/test_attacks.py); this one stays code: its source carries the book's
# printed answer, computed here from the reference (_book_answer), which no file in the test tree may hold
VOUCHING: dict[str, tuple[str, str, str]] = {
    # the book's printed answer for the book's example, zeros elsewhere: the example is public, so right outputs
    # there prove nothing (Case.public); zeros do "see no future", and the buffer is there
    "lookup_table_of_the_books_example": ("causal_attention", CA_SHELL + '''
    def forward(self, x):
        if (x.shape[1], self.d_out) == (6, 2):
            return torch.tensor(BOOK).expand(x.shape[0], 6, 2).clone()
        return torch.zeros(*x.shape[:2], self.d_out)
''' + "BOOK = {book}\n", CA_SHELL + ZERO_FORWARD),
}


@pytest.mark.parametrize("name", list(VOUCHING))
def test_a_property_counts_only_on_hidden_work_of_its_own_function(tmp_path: Path, name: str) -> None:
    step, attack_src, twin_src = VOUCHING[name]
    attack, twin = tmp_path / "attack.py", tmp_path / "twin.py"
    attack.write_text(attack_src.format(book=_book_answer()) if "{book}" in attack_src else attack_src)
    twin.write_text(twin_src)
    got, want = (engine.grade(p, steps=[step], secret=SECRET).steps[0] for p in (attack, twin))
    assert got.score == want.score, [(c.name, c.passed, c.message) for c in got.checks]


def test_the_honest_twins_of_the_vouching_attacks_get_full_marks(tmp_path: Path) -> None:
    p = tmp_path / "honest.py"
    p.write_text(honest_source("honest"))
    from test_attacks import NAMES, expected  # the vouching attacks that are data (tests/attacks/)

    steps = sorted({step for step, _a, _t in VOUCHING.values()} | {s for n in NAMES for s in expected(n)["steps"]})
    report = engine.grade(p, steps=steps, secret=SECRET)
    assert all(s.score == s.max_score for s in report.steps), [(s.id, s.score) for s in report.steps]
    # a dropout whose random draws differ from the reference's never shows equal outputs: its proof of work vouches
    other = tmp_path / "bernoulli.py"
    other.write_text("import torch\ndef dropout_attention(attn_weights, p, training=True):\n"
                     "    if not training or p == 0:\n        return attn_weights\n"
                     "    return attn_weights * torch.bernoulli(torch.full_like(attn_weights, 1 - p)) / (1 - p)\n")
    step = engine.grade(other, steps=["dropout"], secret=SECRET).steps[0]
    assert step.score == step.max_score, [(c.name, c.message) for c in step.checks if not c.passed]


def test_which_cases_are_public_does_not_depend_on_the_secret() -> None:
    """Case.public is a property of the plan: the book's example under every secret, a drawn size under none (a
    drawn size that came out equal under the re-drawing once made causal_mask's own case public under the secret
    "not-for-students", and cost the reference itself a point)."""
    from grader import checks

    first = {s: {c for c, case in cs.items() if case.public} for s, cs in checks.plans("term 1").items()}
    assert first["causal_mask"] == {"mask1"} and first["dot_scores"] == {"book"}
    for i in range(60):
        plans = checks.plans(f"another term {i}")
        assert {s: {c for c, case in cs.items() if case.public} for s, cs in plans.items()} == first, i
    step = engine.grade(SOLUTIONS / "step07_causal_mask.py", steps=["causal_mask"], secret="not-for-students").steps[0]
    assert step.score == step.max_score, [(c.name, c.message) for c in step.checks if not c.passed]


CA_NO_DROPOUT = CA_SHELL + '''
        self.p = dropout
    def weights(self, x):
        n = x.shape[1]
        s = self.W_query(x) @ self.W_key(x).transpose(1, 2)
        s = s.masked_fill(self.mask.bool()[:n, :n], -torch.inf)
        return torch.softmax(s / self.W_key.weight.shape[0] ** 0.5, dim=-1)
    def forward(self, x):  # dropout is never applied
        return self.weights(x) @ self.W_value(x)
'''
FORGED_DROPOUT = '''
import grader.worker.probes as _probes
def _forward(self, x):  # training mode: every weight kept and doubled, a "dropout" that drops nothing
    w = self.weights(x)
    return (w * 2 if self.training and self.p > 0 else w) @ self.W_value(x)
CausalAttention.forward = _forward
def _dropout_average(ns, inputs, *, cls, ctor, copies):  # the statistics a real dropout would show, made up
    m = _probes._build(ns, cls, ctor, None)
    _probes._load_weights(m, {k[2:]: v for k, v in inputs.items() if k.startswith("w.")})
    m.eval()
    with torch.no_grad():
        ev = m(inputs["x"].clone())
    return {"eval": ev, "mean": ev.clone(), "sample": torch.cat([ev * 2, ev * 0]), "std": ev.abs() + 1}
_probes.PROBES["dropout_average"] = _dropout_average
'''


def test_forged_dropout_statistics_earn_nothing(tmp_path: Path) -> None:
    """A CausalAttention that never drops anything forges the statistics the dropout probe reports: the share of
    weights dropped in the 'place' case (computed here, from outputs only real dropout gives) still refuses it."""
    twin, forged = tmp_path / "twin.py", tmp_path / "forged.py"
    twin.write_text(CA_NO_DROPOUT)
    forged.write_text(CA_NO_DROPOUT + FORGED_DROPOUT)
    want, got = (engine.grade(p, steps=["causal_attention"], secret=SECRET).steps[0] for p in (twin, forged))
    assert want.score == want.max_score - 1, [(c.name, c.message) for c in want.checks if not c.passed]
    assert got.score == want.score, [(c.name, c.message) for c in got.checks if not c.passed]


# ---------------------------------------------------------------- sockets made without socket(2)

# a Unix socket made by io_uring (IORING_OP_SOCKET), which a seccomp filter on socket(2) never sees; plain ctypes
URING_SOCKET = '''
import ctypes as _ct, mmap as _mm, os as _os, struct as _st
_libc = _ct.CDLL(None, use_errno=True)
_libc.syscall.restype = _ct.c_long

def _sys(nr, *a):
    r = _libc.syscall(_ct.c_long(nr), *[_ct.c_long(x) for x in a])
    if r < 0:
        raise OSError(_ct.get_errno(), "syscall %d" % nr)
    return r

def uring_socket():
    params = _ct.create_string_buffer(120)
    ring = _sys(425, 4, _ct.addressof(params))  # io_uring_setup
    sq_n, cq_n = _st.unpack_from("<II", params.raw, 0)
    sq_off, cq_off = _st.unpack_from("<IIIIIIIIQ", params.raw, 40), _st.unpack_from("<IIIIIIIIQ", params.raw, 80)
    rw = dict(flags=_mm.MAP_SHARED, prot=_mm.PROT_READ | _mm.PROT_WRITE)
    sq = _mm.mmap(ring, sq_off[6] + sq_n * 4, offset=0, **rw)
    cq = _mm.mmap(ring, cq_off[5] + cq_n * 16, offset=0x8000000, **rw)
    sqes = _mm.mmap(ring, sq_n * 64, offset=0x10000000, **rw)
    sqes[0:64] = _st.pack("<BBHiQQII", 45, 0, 0, 1, 1, 0, 0, 0).ljust(64, b"\\0")  # SOCKET(AF_UNIX, STREAM)
    tail, mask = _st.unpack_from("<II", sq, sq_off[1])[0], _st.unpack_from("<I", sq, sq_off[2])[0]
    _st.pack_into("<I", sq, sq_off[6] + 4 * (tail & mask), 0)
    _st.pack_into("<I", sq, sq_off[1], tail + 1)
    _sys(426, ring, 1, 1, 1, 0, 0)  # io_uring_enter, wait for the one completion
    head, cmask = _st.unpack_from("<I", cq, cq_off[0])[0], _st.unpack_from("<I", cq, cq_off[2])[0]
    res = _st.unpack_from("<Qi", cq, cq_off[5] + 16 * (head & cmask))[1]
    _os.close(ring)
    if res < 0:
        raise OSError(-res, "IORING_OP_SOCKET")
    return res
'''


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
def test_no_socket_through_io_uring(tmp_path: Path) -> None:
    """seccomp refuses socket(2), but io_uring's IORING_OP_SOCKET makes a socket without it: a worker confined for
    grading with a secret reached a socket file anyone may open (a warm daemon's, a desktop bus's, here the
    test's own) and could command what listens there. io_uring now fails in a worker, so the step that tries it
    keeps the full marks of its honest twin and nothing reaches the listener."""
    folder = tmp_path / "open"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    address = str(folder / "anyone.sock")
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    os.chmod(address, 0o777)
    listener.listen(1)
    listener.setblocking(False)
    sub = tmp_path / "uring.py"
    sub.write_text(URING_SOCKET + textwrap.dedent(f"""
        import socket, torch
        def attention_scores(inputs, query):
            try:
                s = socket.socket(fileno=uring_socket())
            except OSError:
                return inputs @ query  # refused: the honest answer
            s.connect({address!r})
            s.sendall(b"worker here")
            raise RuntimeError("reached a socket outside the sandbox")
        """) + GOOD)
    try:
        proc, doc = cli_grade(sub, "dot_scores", "causal_mask")
        assert doc is not None, proc.stderr
        steps = steps_of(doc)
        assert steps["dot_scores"]["score"] == steps["dot_scores"]["max_score"], steps["dot_scores"]
        assert steps["causal_mask"]["score"] == steps["causal_mask"]["max_score"]
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert_nothing_left_running()


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
def test_the_graders_terminal_is_not_readable(tmp_path: Path) -> None:
    """/dev was granted whole: a worker of the grader's uid opened the terminal the grader runs in (/dev/pts/N,
    the owner's) and read what was typed there while it graded. Only /dev/null, zero, full, random and urandom
    are granted now: the step that tries keeps the full marks of its honest twin and reads nothing."""
    import pty
    import threading

    master, slave = pty.openpty()
    name = os.ttyname(slave)
    sub = tmp_path / "tty.py"
    sub.write_text(textwrap.dedent(f"""
        import os, time
        def attention_scores(inputs, query):
            try:
                fd = os.open({name!r}, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
            except OSError:
                return inputs @ query  # refused: the honest answer
            time.sleep(0.5)
            raise RuntimeError("typed: " + os.read(fd, 100).decode(errors="replace"))
        """) + GOOD)
    done = threading.Event()

    def type_on_the_terminal() -> None:
        while not done.wait(0.2):
            os.write(master, b"typed-in-the-graders-terminal\n")

    typist = threading.Thread(target=type_on_the_terminal, daemon=True)
    typist.start()
    try:
        proc, doc = cli_grade(sub, "dot_scores")
    finally:
        done.set()
        typist.join()
        os.close(master)
        os.close(slave)
    assert doc is not None, proc.stderr
    assert "typed-in-the-graders-terminal" not in proc.stdout
    step = steps_of(doc)["dot_scores"]
    assert step["score"] == step["max_score"], step
    assert_nothing_left_running()


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
def test_no_datagram_socket_through_socketpair(tmp_path: Path) -> None:
    """socketpair(2) was allowed: one end of a datagram pair connect()s to any datagram socket by its path (syslog's,
    systemd's notify socket, here the test's own) and sends there. seccomp refuses socketpair now: the step that
    tries keeps the full marks of its honest twin and nothing reaches the listener."""
    import socket

    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    address = str(folder / "log.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(address)
    os.chmod(address, 0o777)
    listener.setblocking(False)
    sub = tmp_path / "dgram.py"
    sub.write_text(textwrap.dedent(f"""
        import socket
        def attention_scores(inputs, query):
            try:
                mine, _other = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            except OSError:
                return inputs @ query  # refused: the honest answer
            mine.connect({address!r})
            mine.send(b"a worker was here")
            raise RuntimeError("reached a socket outside the sandbox")
        """) + GOOD)
    try:
        proc, doc = cli_grade(sub, "dot_scores")
        assert doc is not None, proc.stderr
        step = steps_of(doc)["dot_scores"]
        assert step["score"] == step["max_score"], step
        with pytest.raises(BlockingIOError):
            listener.recv(100)
    finally:
        listener.close()
    assert_nothing_left_running()


# ------------------------------------------------------------- loops the text hid (read from the text until issue 27)

def test_a_unit_too_deep_to_parse_is_never_loop_free(tmp_path: Path) -> None:
    """The grader parsed the source for "no Python loops" at its own stack depth and recursion limit; the worker
    compiles each notebook cell at its own, and a cell may raise that limit first. A loop-using all_tokens whose
    cell holds a 6000-term sum was parsed by nobody here (RecursionError, silently skipped) and so counted as
    loop-free: 5 of 5. The loop point is behaviour now (grader/worker/counting.py): the loop the worker runs is
    counted, however deep the text: 4 of 5, as its twin without the sum."""
    loopy = textwrap.dedent("""
        import torch
        def all_attention_scores(inputs):
            n = inputs.shape[0]
            out = torch.empty(n, n, dtype=inputs.dtype)
            for i in range(n):
                for j in range(n):
                    out[i, j] = inputs[i] @ inputs[j]
            return out
        def all_attention_weights(attn_scores):
            return torch.softmax(attn_scores, dim=-1)
        def all_context_vectors(attn_weights, inputs):
            return attn_weights @ inputs
        """)

    def notebook(path: Path, cells: list[str]) -> Path:
        path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
            {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c}
            for c in cells]}))
        return path

    twin = notebook(tmp_path / "twin.ipynb", [loopy])
    deep = notebook(tmp_path / "deep.ipynb", ["import sys\nsys.setrecursionlimit(30000)\n",
                                              loopy + "_DEEP = " + "+".join(["1"] * 6000) + "\n"])
    want, got = (steps_of(cli_grade(p, "all_tokens")[1])["all_tokens"] for p in (twin, deep))
    assert want["score"] == want["max_score"] - 1, want
    assert got["score"] == want["score"], got
    assert any("runs a Python loop" in c["message"] for c in got["checks"] if not c["passed"]), got


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
def test_a_worker_is_never_dumped(tmp_path: Path) -> None:
    """RLIMIT_CORE = 0 stops a core file, not a core_pattern pipe: where it is one (apport, systemd-coredump), every
    crashing worker had the kernel run that helper as root, outside the sandbox, on the worker's memory. A worker is
    not dumpable now (its layers say so, read back after confinement), so no crash reaches a helper; the step that
    checks keeps its honest twin's marks."""
    sub = tmp_path / "dumpable.py"
    sub.write_text(textwrap.dedent("""
        import ctypes
        def attention_scores(inputs, query):
            if ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) != 0:  # PR_GET_DUMPABLE
                raise RuntimeError("dumpable: a crash here reaches core_pattern's helper")
            return inputs @ query
        """) + GOOD)
    proc, doc = cli_grade(sub, "dot_scores")
    assert doc is not None, proc.stderr
    step = steps_of(doc)["dot_scores"]
    assert step["score"] == step["max_score"], step


def test_loops_bound_where_the_text_cannot_be_followed_are_not_loop_free(tmp_path: Path) -> None:
    """The worker grades the function it finds after every file has run; the grader reads the text. A second file
    rebinding the loop-free `def` with a looping one (setattr by a computed name, sys.modules, a swapped
    __code__, exec of a string) scored 5 of 5; each now loses the loop point, as a plain loop does (4 of 5).
    map() is a loop by another name. Honest code that calls model.eval(), setattr(self, ...) and assigns a
    layer's weights (exercise 3.1) keeps 5 of 5."""
    clean = (SOLUTIONS / "step04_all_tokens.py").read_text()
    loopy = ("def _loopy(inputs):\n    import torch\n"
             "    return torch.stack([inputs @ row for row in inputs])\n")
    attacks = {
        "setattr": loopy + "import all_tokens\nsetattr(all_tokens, 'all_' + 'attention_scores', _loopy)\n",
        # (imported first: without it softmax.py, loaded before all_tokens.py, raises, and nothing is rebound)
        "sys_modules": loopy + "import sys, all_tokens\nsys.modules['all_tokens'].__dict__['all_attention_scores'] = "
                               "_loopy\n",
        "code": loopy + "import all_tokens as a\nf = getattr(a, 'all_attention' + '_scores')\n"
                        "f.__code__ = _loopy.__code__\n",
        "exec": "exec('import all_tokens, torch\\nall_tokens.all_attention_scores = "
                "lambda x: torch.stack([x @ r for r in x])')\n",
        "map": None,
        # found later, each 5 of 5 until the namespace-opening attributes and calls were read too
        "dunder_setattr": loopy + "import all_tokens\nall_tokens.__setattr__('all_attention_scores', _loopy)\n",
        "dict_update": loopy + "import all_tokens\nall_tokens.__dict__.update(all_attention_scores=_loopy)\n",
        "builtins_dict": loopy + "import builtins as b\nimport all_tokens\n"
                                 "b.__dict__['set' + 'attr'](all_tokens, 'all_attention_scores', _loopy)\n",
        # bindings the reading ran past: a for target (it was bound to nothing to count) and a `global` rebinding
        # from a function called at import
        "for_target": {"all_tokens.py": clean + loopy + "for all_attention_scores in [_loopy]:\n    pass\n"},
        "global": {"all_tokens.py": clean + loopy + "def _install():\n    global all_attention_scores\n"
                                                    "    all_attention_scores = _loopy\n_install()\n"},
    }
    scores = {}
    for name, extra in attacks.items():
        ws = tmp_path / name
        ws.mkdir()
        if isinstance(extra, dict):
            for file, text in extra.items():
                (ws / file).write_text(text)
        elif extra is None:
            (ws / "all_tokens.py").write_text(clean.replace(
                "return inputs @ inputs.T", "return torch.stack(list(map(lambda q: inputs @ q, inputs)))"))
        else:
            (ws / "all_tokens.py").write_text(clean)
            (ws / "softmax.py").write_text(extra)  # another step's file, loaded after all_tokens
        step = engine.grade(ws, steps=["all_tokens"]).steps[0]
        scores[name] = step.score
        loops = next(c for c in step.checks if "loop" in c.name.lower())
        assert not loops.passed, (name, [(c.name, c.message) for c in step.checks])
    assert set(scores.values()) == {4.0}, scores
    honest = tmp_path / "honest"
    honest.mkdir()
    (honest / "all_tokens.py").write_text(clean + textwrap.dedent("""
        class Probe(torch.nn.Module):
            def __init__(self):
                super().__init__()
                for i in range(2):
                    setattr(self, f"layer_{i}", torch.nn.Linear(3, 2))
        probe = Probe()
        probe.eval()
        probe.layer_0.weight = torch.nn.Parameter(probe.layer_1.weight.T.T.clone())
        """))
    step = engine.grade(honest, steps=["all_tokens"]).steps[0]
    assert step.score == step.max_score, [(c.name, c.message) for c in step.checks if not c.passed]


def test_loops_behind_names_in_another_unicode_form_are_found(tmp_path: Path) -> None:
    """Python reads identifiers NFKC-normalised: `def ａll_attention_scores` (a fullwidth a) defines
    all_attention_scores. The grader looked for the names in the raw text, so a file spelling all three
    functions that way, with loops, was never read and scored 5 of 5; a fullwidth `ｓｅｔａｔｔｒ` rebinding from
    another file must be seen too. Both lose the loop point now (4 of 5)."""
    clean = (SOLUTIONS / "step04_all_tokens.py").read_text()
    wide = "\uff41"  # fullwidth a: NFKC turns it into a
    looping = clean.replace("return inputs @ inputs.T", "return torch.stack([inputs @ row for row in inputs])")
    for name in ("all_attention_scores", "all_attention_weights", "all_context_vectors"):
        looping = looping.replace(name, wide + name[1:])
    rebinding = ("def _loopy(inputs):\n    import torch\n    return torch.stack([inputs @ row for row in inputs])\n"
                 "import all_tokens\n\uff53\uff45\uff54\uff41\uff54\uff54\uff52(all_tokens, 'all_' + "
                 "'attention_scores', _loopy)\n")
    for name, files in {"fullwidth_defs": {"all_tokens.py": looping},
                        "fullwidth_setattr": {"all_tokens.py": clean, "softmax.py": rebinding}}.items():
        ws = tmp_path / name
        ws.mkdir()
        for file, text in files.items():
            (ws / file).write_text(text, encoding="utf-8")
        step = engine.grade(ws, steps=["all_tokens"]).steps[0]
        loops = next(c for c in step.checks if "loop" in c.name.lower())
        assert not loops.passed and step.score == 4.0, (name, [(c.name, c.message) for c in step.checks])


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
def test_worker_directories_of_a_killed_grader_are_swept(tmp_path: Path) -> None:
    """A grading process killed mid-check (a daemon stopped, a batch SIGKILLed) left its workers' directories in
    the temp dir for good. The next grading process removes those of processes that are gone, keeps a live
    one's, and leaves none of its own."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp / f"attn-kata-worker-{gone.pid}-abc"
    live = tmp / f"attn-kata-worker-{os.getpid()}-def"
    other = tmp / "attn-kata-worker-notapid"
    for d in (dead, live, other):
        d.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "ATTN_KATA_NO_DAEMON": "1"}
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(SOLUTIONS), "--step", "dot_scores",
                           "--format", "json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["score"] == 5
    left = sorted(p.name for p in tmp.iterdir() if p.name.startswith("attn-kata-worker-"))
    assert left == sorted([live.name, other.name]), left


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
def test_a_reference_kept_outside_the_kata_is_hidden_too(tmp_path: Path) -> None:
    """ATTN_KATA_SOLUTIONS may name a reference outside the kata (a course repository). Where that lies under
    something a worker may read (here the venv, as an editable course install would put it), only the kata's
    own folder was left out of the grants: a worker read the reference. The folder holding it is hidden now."""
    from grader.sandbox import landlock

    assert landlock.abi() >= 1, "this machine has no Landlock: `attn-kata doctor` says so, and CI's kernel has it"
    course = Path(sys.prefix) / "share" / f"attn-kata-course-{os.getpid()}"
    try:
        shutil.copytree(SOLUTIONS, course / "solutions", ignore=shutil.ignore_patterns("__pycache__"))
        target = course / "solutions" / "step01_dot_scores.py"
        p = tmp_path / "peek.py"
        p.write_text(textwrap.dedent(f"""
            def attention_scores(inputs, query):
                try:
                    open({str(target)!r}).read()
                    return inputs @ query  # the reference was readable: the right answer
                except OSError:
                    return inputs.sum(dim=1)
            """))
        env = {**os.environ, "ATTN_KATA_SOLUTIONS": str(course / "solutions"), "ATTN_KATA_NO_DAEMON": "1"}
        proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(p), "--step", "dot_scores", "--format",
                               "json", "--secret", "k"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        step = json.loads(proc.stdout)["steps"][0]
        assert step["score"] <= 1, step  # wrong values: the worker could not open the reference
    finally:
        shutil.rmtree(course, ignore_errors=True)


@pytest.mark.sandbox  # about confinement: run in every set-up by .ci/setups.sh
def test_a_zygote_started_before_the_reference_was_named_is_replaced(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team 15: the folder a zygote hides from its workers (ATTN_KATA_HIDE) is fixed when it starts, and a
    process keeps its zygote. A notebook kernel starts one when it imports the grader (grader/__init__.py); an
    instructor who names the course's reference afterwards (ATTN_KATA_SOLUTIONS, here in the venv) and grades in
    that kernel got workers that read it: 5/5 for a submission that only opens the file, 0 from a fresh zygote.
    Now a zygote started for another reference folder is replaced first."""
    from grader.pool import zygote
    from grader.sandbox import landlock

    assert landlock.abi() >= 1, "this machine has no Landlock: `attn-kata doctor` says so, and CI's kernel has it"
    course = Path(sys.prefix) / "share" / f"attn-kata-course-early-{os.getpid()}"
    try:
        shutil.copytree(SOLUTIONS, course / "solutions", ignore=shutil.ignore_patterns("__pycache__"))
        target = course / "solutions" / "step01_dot_scores.py"
        p = tmp_path / "peek.py"
        p.write_text(textwrap.dedent(f"""
            def attention_scores(inputs, query):
                try:
                    open({str(target)!r}).read()
                    return inputs @ query  # the reference was readable: the right answer
                except OSError:
                    return inputs.sum(dim=1)
            """))
        monkeypatch.delenv("ATTN_KATA_SOLUTIONS", raising=False)
        early = zygote.zygote()  # as the kernel's import does, before the course's settings
        assert early.alive()
        monkeypatch.setenv("ATTN_KATA_SOLUTIONS", str(course / "solutions"))
        step = engine.grade(p, steps=["dot_scores"], secret=SECRET).steps[0]
        assert step.score <= 1, step  # wrong values: the worker could not open the reference
        assert zygote.zygote() is not early and not early.alive()
    finally:
        shutil.rmtree(course, ignore_errors=True)


# ---------------------------------------------------------------- step 4's loop point as behaviour (red team 15)

_LOOP_REST = textwrap.dedent("""
    def all_attention_weights(attn_scores):
        return torch.softmax(attn_scores, dim=-1)
    def all_context_vectors(attn_weights, inputs):
        return attn_weights @ inputs
    """)
LOOP_EVASIONS = {
    # a Python loop over a fixed number of rows (the inputs padded): the same work at 6 and 12 tokens, so no count
    # grows; the static reader (before 22d0091) said "loops at line 8"
    "fixed_bound": textwrap.dedent("""
        import torch
        def all_attention_scores(inputs):
            n = inputs.shape[0]
            padded = torch.zeros(64, inputs.shape[1], dtype=inputs.dtype)
            padded[:n] = inputs
            rows = []
            for i in range(64):
                rows.append(padded @ padded[i])
            return torch.stack(rows)[:n, :n]
        """),
    # one dot product per pair of tokens, iterated by C (itertools, map) over Python floats: no line event, torch
    # call or operation per token
    "c_iteration": textwrap.dedent("""
        import functools, itertools, operator, torch
        def all_attention_scores(inputs):
            rows = inputs.tolist()
            pairs = itertools.product(rows, repeat=2)
            dots = map(sum, itertools.starmap(functools.partial(map, operator.mul), pairs))
            return torch.tensor(list(dots), dtype=inputs.dtype).reshape(len(rows), len(rows))
        """),
}


@pytest.mark.parametrize("name", list(LOOP_EVASIONS))
def test_loops_the_work_counter_misses_still_lose_the_loop_point(tmp_path: Path, name: str) -> None:
    """Each of these runs a loop over the tokens (or over a padded set of rows) and computes the right outputs; the
    book's own loop loses the loop point (4 of 5), and so must these. Both kept it (5 of 5) when the worker only
    compared its counts at 6 and 12 tokens; now a function making a torch call per token (24 of them at 24 tokens:
    the padded rows) loops, and tolist counts one call per element it hands to Python (the C iteration). (A loop
    with the counter replaced, sys.modules["grader.worker.counting"].measure, keeps it too, flagged: a worker fact,
    vouched by right outputs.)"""
    p = tmp_path / f"{name}.py"
    p.write_text(LOOP_EVASIONS[name] + _LOOP_REST)
    step = engine.grade(p, steps=["all_tokens"], secret=SECRET).steps[0]
    assert [c.name for c in step.checks if not c.passed] == ["no Python loops: matrix products only"], step.checks
    assert step.score == step.max_score - 1
