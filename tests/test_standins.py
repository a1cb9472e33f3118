"""No reference code or output ever enters a process that runs learner code (docs/design.md §4).

Steps that build on earlier ones run on public stand-ins (grader/worker/standins.py), so what the trusted side
sends a worker is only the step's names, the earlier names it builds on and its cases' inputs. These tests read
every request a worker can receive, for several secrets, against the reference's source and its outputs; then
show that the stand-ins are no answer (copying one earns nothing) and that a worker refused for a weak sandbox has
run none of the submission."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import torch

from grader.grading import engine, reference
from grader.pool.session import WeakSandbox
from grader.registry import STEPS
from grader.sandbox import channel

pytestmark = pytest.mark.sandbox  # run in every set-up by .ci/setups.sh
ROOT = Path(__file__).resolve().parent.parent
SECRETS = ("", "course-a", "course-b")


def _solution_only_lines() -> dict[str, list[str]]:
    """Per step, the lines of its reference that its stub does not share (the code, not the shared docstring)."""
    out = {}
    for s in STEPS:
        stub = set((ROOT / "exercises" / s.file).read_text(encoding="utf-8").splitlines())
        lines = [ln.strip() for ln in (reference.solutions_dir() / s.file).read_text(encoding="utf-8").splitlines()]
        out[s.id] = [ln for ln in lines if len(ln) >= 12 and ln not in {x.strip() for x in stub}
                     and not ln.startswith(("#", '"""', "import ", "from "))]
    return out


def _raw(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().to(torch.float32).numpy().tobytes() if t.is_floating_point() else b""


@pytest.mark.parametrize("secret", SECRETS)
def test_no_worker_request_holds_reference_code_or_output(secret: str) -> None:
    requests = engine.prepared_requests(secret)
    plans, refs = engine.prepared(secret)
    code = _solution_only_lines()
    every_solution_line = [ln for lines in code.values() for ln in lines]
    assert len(every_solution_line) > 50  # the search has something to find
    for s in STEPS:
        raw = requests[s.id]
        _tensors, doc = channel.decode_request(raw)
        assert set(doc) == {"names", "uses", "cases"}, doc.keys()  # the wire schema: nothing else crosses
        assert all(set(c) == {"name", "probe", "params", "seed"} for c in doc["cases"])
        assert doc["uses"] == list(s.uses)
        text = raw.decode("latin-1")
        found = [ln for ln in every_solution_line if ln in text]
        assert not found, (s.id, found[:3])
        inputs = {name: b"".join(_raw(t) for t in case.inputs.values()) for name, case in plans[s.id].items()}
        for name, result in refs[s.id].items():
            for key, t in result.tensors.items():
                out = _raw(t)
                if len(out) < 4 * 4 or out in inputs[name]:  # a scalar or two, or an answer that is an input
                    continue
                assert out not in raw, f"{s.id}/{name}/{key}: a reference output is in the request"


def test_the_wire_schema_of_a_request_holds_no_source_key() -> None:
    """Every string in every request is a name, a probe, a parameter: none is longer than a constructor call."""
    for s in STEPS:
        _tensors, doc = channel.decode_request(engine.prepared_requests("")[s.id])
        strings = _strings(doc)
        assert max(map(len, strings)) < 64, (s.id, max(strings, key=len))


def _strings(x: object) -> list[str]:
    if isinstance(x, str):
        return [x]
    if isinstance(x, dict):
        return [s for k, v in x.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(x, list):
        return [s for v in x for s in _strings(v)]
    return []


COPY = """
from grader.worker.standins import (CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper,
                                    SelfAttention_v1, SelfAttention_v2)
"""


def test_copying_the_stand_ins_earns_no_output_check(tmp_path: Path) -> None:
    """The stand-ins compute no step's answer: a submission that is made of them passes no check that compares
    outputs with the reference (and, by the vouching rule, so none of its steps' facts either)."""
    sub = tmp_path / "copy.py"
    sub.write_text(COPY, encoding="utf-8")
    report = engine.grade(sub, steps=["self_attention_v1", "self_attention_v2", "causal_attention",
                                      "multihead_wrapper", "multihead_attention"])
    for step in report.steps:
        assert step.status != "passed", step.id
        assert step.score <= 0.25 * step.max_score, (step.id, [(c.name, c.passed) for c in step.checks])


IMPORT_MARKER = """
import pathlib
pathlib.Path({marker!r}).write_text("ran")

def attention_scores(inputs, query):
    return inputs @ query
"""


@pytest.mark.strong_gate  # the refusal itself: never under tests/conftest.py's waiver
def test_a_weak_sandbox_refuses_before_any_learner_code_runs(tmp_path: Path) -> None:
    # a folder any uid may write in: a root grader's worker is nobody, who cannot reach tmp_path (a 0700 folder)
    shared = Path(tempfile.mkdtemp(prefix="attn-kata-marker-"))
    shared.chmod(0o1777)
    marker = shared / "ran.txt"
    try:
        _refuses_then_runs_when_waived(tmp_path, marker)
    finally:
        marker.unlink(missing_ok=True)
        shared.rmdir()


def _refuses_then_runs_when_waived(tmp_path: Path, marker: Path) -> None:
    sub = tmp_path / "sub.py"
    sub.write_text(IMPORT_MARKER.format(marker=str(marker)), encoding="utf-8")
    # Landlock off: the submission could write the marker if it ran at all
    with pytest.raises(WeakSandbox, match="Landlock"):
        engine.grade(sub, secret="k", steps=["dot_scores"], config={"skip_layers": ["landlock"]})
    assert not marker.exists()
    # waived (--allow-weak-sandbox): it runs, and the report says which layers confined it
    report = engine.grade(sub, secret="k", steps=["dot_scores"],
                          config={"skip_layers": ["landlock"], "require_strong": False})
    assert marker.exists()
    assert report.steps[0].status == "passed"
    sandbox = report.to_dict()["sandbox"]
    assert sandbox["backend"] == "linux" and sandbox["strong_required"] is False
    assert "landlock_filesystem" not in sandbox["layers"]
    assert any("Landlock" in need for need in sandbox["missing"])
    json.dumps(report.to_dict())


def test_every_report_says_what_confined_it(tmp_path: Path) -> None:
    sub = tmp_path / "sub.py"
    sub.write_text("def attention_scores(inputs, query):\n    return inputs @ query\n", encoding="utf-8")
    sandbox = engine.grade(sub, steps=["dot_scores"]).to_dict()["sandbox"]
    assert sandbox["context"] == "host" and sandbox["strong_required"] is False
    assert "session" in sandbox["layers"] and "clean_env" in sandbox["layers"]


def test_stand_in_masks_are_bool_buffers_cut_to_num_tokens() -> None:
    from grader.worker.standins import CausalAttention, MultiHeadAttention

    for m in (CausalAttention(3, 4, 6, 0.0), MultiHeadAttention(4, 4, 6, 0.0, 2)):
        assert dict(m.named_buffers())["mask"].dtype == torch.bool
        x = torch.randn(2, 5, m.W_query.in_features)
        y = m(x)
        x2 = x.clone()
        x2[:, 3:] = torch.randn(2, 2, x.shape[-1])
        assert torch.allclose(m(x2)[:, :3], y[:, :3])  # causal
        assert y.shape[:2] == (2, 5)
