"""One policy table (grader.sandbox.policy) decides what grading with a secret needs: the gate
(grader.pool.session), doctor's required rows and design.md's table are read from it, and they agree."""

from __future__ import annotations

import sys

import pytest

from grader.sandbox import policy


def test_the_gate_reads_the_table() -> None:
    pytest.importorskip("torch")
    from grader.pool import session

    for context in policy.CONTEXTS:
        want = {n.name: n.layers for n in policy.needs(context) if n.layers}
        assert session.required_layers(context) == want
    assert session.required_layers("learner") == {}
    assert set(session.FIXES) == {n.name for n in policy.NEEDS}


@pytest.mark.skipif(sys.platform != "linux", reason="doctor's attacks are the Linux backend's")
def test_gate_and_doctor_agree() -> None:
    """Every need the gate checks is proven by doctor rows that doctor marks required, each row claimed whenever
    the gate passes (its alternatives include the need's); doctor requires nothing the table does not name."""
    pytest.importorskip("torch")
    from grader.instructor import doctor
    from grader.pool import session

    rows = {layer.name: layer for layer in doctor.LAYERS}
    for context in policy.SECRET_CONTEXTS:
        required = set(policy.required_rows(context))
        assert required <= set(rows), required - set(rows)
        for need in policy.needs(context):
            assert need.rows, f"{need.name}: no doctor row proves it"
            for row in need.rows:
                assert set(need.layers) <= set(rows[row].claimed_by), (need.name, row)
        gate = session.required_layers(context)
        proven = {policy.required_rows(context)[r] for r in required}
        assert set(gate) <= proven, set(gate) - proven  # every need the gate checks, doctor requires
        assert proven - set(gate) == {n.name for n in policy.needs(context) if not n.layers}  # by construction
    assert {layer.name for layer in doctor.LAYERS if layer.required} == set(policy.required_rows("host"))
    # the two disagreements of issue 35, resolved: signals are required by both, the reference by doctor and by
    # construction (no worker can observe it of itself; the gate has nothing to read)
    assert rows["cannot signal the grader (PID namespace, Landlock scope or seccomp)"].required
    assert "cannot signal other processes" in session.required_layers("host")
    assert rows["the reference is unreachable"].required
    assert policy.BY_NAME["the reference is unreachable"].layers == ()


def test_a_planted_difference_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above fails where one side names a layer the other does not take."""
    need = policy.BY_NAME["cannot signal other processes"]
    planted = policy.Need(need.name, (*need.layers, "something_new"), need.contexts, need.why, need.fix, need.rows)
    monkeypatch.setattr(policy, "NEEDS", tuple(planted if n is need else n for n in policy.NEEDS))
    if sys.platform == "linux":
        pytest.importorskip("torch")
        from grader.instructor import doctor

        rows = {layer.name: layer for layer in doctor.LAYERS}
        assert not set(planted.layers) <= set(rows[planted.rows[0]].claimed_by)
    assert "something_new" in policy.gate("host")[need.name]


def test_every_context_is_named_and_the_learner_needs_nothing() -> None:
    assert set(policy.CONTEXTS) == {"container", "host", "learner"}
    assert policy.needs("learner") == []
    assert not policy.PORTABLE_HOLDS_SECRET
    for need in policy.NEEDS:
        assert need.contexts and set(need.contexts) <= set(policy.SECRET_CONTEXTS)
        assert need.why and need.fix


def test_design_md_table_is_generated_from_it() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "design.md").read_text(encoding="utf-8")
    assert policy.table_markdown() in text
