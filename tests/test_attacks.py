"""Attacks as data (tests/attacks/README.md): each folder under tests/attacks/ holds a hostile submission
(attack.py), what each graded step must score (expected.toml) and, where its honest twin is its own, twin.py. One
parametrized test grades them all: an attacked step scores exactly what its twin (the same outputs, written
honestly) scores, or full marks, or zero; a correct step carried in the same file keeps full marks; the secret never
reaches a report; and nothing this test started is left running or written.

The attacks that need a set-up or an assertion of their own stay code: tests/test_hostile.py (a worker's fds, the
zygote's own protocol, pid reuse, a command that exits while its worker dies), tests/test_redteam.py (the channel,
batches, System V IPC, terminals, forged facts read from the worker) and tests/test_seccomp.py (each attack also
run with the filter off, a planted regression that must let it through)."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import tomllib
from machine import scaled
from procs import leftovers

from grader.grading import engine

pytestmark = pytest.mark.sandbox  # run in every set-up by .ci/setups.sh

ROOT = Path(__file__).resolve().parent.parent
ATTACKS = Path(__file__).resolve().parent / "attacks"
TWINS = ATTACKS / "twins"
# the grade's secret, and one in the grader's environment: neither may reach a worker or a report (the attack
# secret_hunting_by_value looks for both, by value)
SECRETS = ("not-for-students", "in-the-graders-environment")
RANDOM_SECRET = "attack-" + secrets.token_hex(8)  # `secret = "random"`: a new key every run
TIMEOUT = 8.0  # per step: the infinite loops cost this much each; generous for a loaded 2-core machine
SCORES = {"full", "zero", "twin", "below_full"}
PLACEHOLDERS = {  # what an attack's text may name, filled in here
    "# @CAUSAL_MASK_SOLUTION@": (ROOT / "solutions" / "step07_causal_mask.py").read_text(encoding="utf-8"),
    "@ROOT@": str(ROOT),
}
NAMES = sorted(p.name for p in ATTACKS.iterdir() if (p / "expected.toml").is_file())


def _source(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    for mark, value in PLACEHOLDERS.items():
        if mark.startswith("#"):  # a whole line: the comment after the mark says what goes there
            text = "\n".join(value if line.startswith(mark) else line for line in text.split("\n"))
        else:
            text = text.replace(mark, value)
    return text


def source_of(name: str) -> str:
    """The attack's submission as graded (tests/test_hostile.py runs some of them again, in set-ups of its own)."""
    return _source(ATTACKS / name / "attack.py")


def expected(name: str) -> dict[str, Any]:
    doc = tomllib.loads((ATTACKS / name / "expected.toml").read_text(encoding="utf-8"))
    return doc


def _twin_path(name: str, step: dict[str, Any]) -> Path:
    return TWINS / f"{step['twin']}.py" if "twin" in step else ATTACKS / name / "twin.py"


def _temp_worker_dirs() -> set[str]:
    """This process's workers' directories (named after it: other graders on the machine have their own)."""
    return {p.name for p in Path(tempfile.gettempdir()).glob(f"attn-kata-worker-{os.getpid()}-*")}


def _grade(path: Path, source: str, doc: dict[str, Any]) -> dict[str, Any]:
    path.write_text(source, encoding="utf-8")
    secret = RANDOM_SECRET if doc.get("secret") == "random" else SECRETS[0]
    return engine.grade(path, steps=doc["steps"], timeout=doc.get("timeout", TIMEOUT), secret=secret).to_dict()


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory, lacks_by_design: frozenset[str]) -> dict[str, Any]:
    """Every attack and every twin it names, graded once in this process (the session's zygote, real workers)."""
    from grader.pool import zygote

    folder = tmp_path_factory.mktemp("attacks")
    before = _temp_worker_dirs()
    zyg = zygote.zygote()
    out: dict[str, Any] = {"attacks": {}, "twins": {}}
    os.environ["ATTN_KATA_SECRET"] = SECRETS[1]  # must never reach a worker
    try:
        for name in NAMES:
            doc = expected(name)
            if doc.get("needs") in lacks_by_design:
                continue
            out["attacks"][name] = _grade(folder / f"{name}.py", source_of(name), doc)
            for step in doc["steps"]:
                if doc[step]["score"] != "twin":
                    continue
                twin = _twin_path(name, doc[step])
                key = f"{twin.relative_to(ATTACKS)}:{','.join(doc['steps'])}"
                if key not in out["twins"]:
                    honest = folder / f"twin-{len(out['twins'])}.py"
                    out["twins"][key] = _grade(honest, _source(twin), {**doc, "timeout": TIMEOUT})
    finally:
        del os.environ["ATTN_KATA_SECRET"]
    out["zygote_kept"] = zygote.zygote() is zyg and zyg.alive()
    out["new_dirs"] = sorted(_temp_worker_dirs() - before)
    return out


def test_every_attack_says_what_each_graded_step_must_score() -> None:
    """The data's own shape: a graded step without an expectation would be a step nobody checks."""
    assert len(NAMES) >= 40, NAMES
    for name in NAMES:
        doc = expected(name)
        assert (ATTACKS / name / "attack.py").is_file(), name
        assert doc["steps"] and set(doc) <= {"steps", "timeout", "needs", "secret", "about", *doc["steps"]}, name
        for step in doc["steps"]:
            want = doc[step]
            assert want["score"] in SCORES, (name, want)
            assert set(want) <= {"score", "status", "detail", "twin", "checks"}, (name, want)
            if want["score"] == "twin":
                assert _twin_path(name, want).is_file(), (name, step)


@pytest.mark.parametrize("name", NAMES)
def test_an_attack_scores_as_its_honest_twin(reports: dict[str, Any], name: str) -> None:
    doc = expected(name)
    if name not in reports["attacks"]:
        pytest.skip(f"needs '{doc['needs']}', which a grader that is not root lacks by design (attn-kata doctor: "
                    "not active; grading with a secret refuses here)")
    report = reports["attacks"][name]
    steps = {s["id"]: s for s in report["steps"]}
    for step_id in doc["steps"]:
        want, got = doc[step_id], steps[step_id]
        if want.get("status") == "failed":  # wrong outputs: whatever checks they fail, never full marks
            assert got["status"] in ("failed", "partial"), got
        elif "status" in want:
            assert got["status"] == want["status"], got
        if "detail" in want:
            assert got["detail"] == want["detail"], got
        if want["score"] == "full":
            assert got["score"] == got["max_score"], got
        elif want["score"] == "zero":
            assert got["score"] == 0, got
        elif want["score"] == "below_full":
            assert got["score"] < got["max_score"], got
        else:  # exactly what an honest submission with the same outputs gets
            twin = _twin_path(name, want)
            honest = {s["id"]: s for s in reports["twins"][f"{twin.relative_to(ATTACKS)}:{','.join(doc['steps'])}"][
                "steps"]}[step_id]
            assert got["score"] == honest["score"], (got, honest)
            if want.get("checks") == "twin":
                assert [c["passed"] for c in got["checks"]] == [c["passed"] for c in honest["checks"]]
    text = json.dumps(report)
    assert not any(secret in text for secret in SECRETS), "a secret reached the report"


def test_the_zygote_survives_every_attack(reports: dict[str, Any]) -> None:
    """kill_parent and the rest never take the zygote down (a silent restart would hide it)."""
    assert reports["zygote_kept"]


def test_nothing_left_running_or_written(reports: dict[str, Any]) -> None:
    deadline = time.monotonic() + scaled(30)  # a guard against hangs, not a speed bound
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers() == {}
    assert not (ROOT / "solutions" / "pwned.txt").exists()
    assert reports["new_dirs"] == []  # chattr +i left nothing undeletable behind


def test_step_details_say_what_happened(reports: dict[str, Any]) -> None:
    detail = {name: {s["id"]: s for s in report["steps"]}["dot_scores"]["detail"]
              for name, report in reports["attacks"].items() if "dot_scores" in expected(name)["steps"]}
    assert detail["infinite_loop"] == "timeout"
    assert detail["os_exit_in_step"] == "crashed"
    assert detail["memory_bomb"] == "memory_limit"
    assert detail["sys_exit_in_step"] == "crashed"
    assert detail["not_a_tensor_eq_always_true"] == "wrong_type"
    assert detail["monkeypatch_allclose"] == "wrong_answer"
    assert detail["garbage_on_the_channel"] == "no_result"
    assert detail["daemon_outlives_step"] == "passed"


def test_a_worker_holds_no_socket_but_its_channel(reports: dict[str, dict]) -> None:
    """The fds a worker inherits, after every attack above: its channel only (no zygote connection, nothing to
    command)."""
    src = textwrap.dedent("""
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
