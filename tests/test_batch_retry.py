"""A time-out in a batch graded beside others is graded again, alone (red team 15): where the grader's cpu cgroup is
shared, a classmate's spinners starved a victim's step into "stopped after 10 s". The real batch, real workers;
the pool's entry point is wrapped only to see what it was given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.instructor import batch

ROOT = Path(__file__).resolve().parent.parent
HANGS = "def attention_scores(inputs, query):\n    while True:\n        pass\n"


def _class(tmp_path: Path) -> Path:
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "hangs.py").write_text(HANGS)
    (klass / "honest.py").write_text((ROOT / "solutions" / "step01_dot_scores.py").read_text())
    return klass


def _seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], int]]:
    calls: list[tuple[list[str], int]] = []
    real = batch._grade_in_pool

    def wrapped(chunks, jobs, *args):  # type: ignore[no-untyped-def]
        calls.append(([Path(p).name for chunk in chunks for _i, p in chunk], jobs))
        return real(chunks, jobs, *args)

    monkeypatch.setattr(batch, "_grade_in_pool", wrapped)
    return calls


@pytest.mark.parametrize("jobs", [2, 1])
def test_a_timeout_beside_others_is_graded_again_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       jobs: int) -> None:
    calls = _seen(monkeypatch)
    out = tmp_path / "out"
    result = batch.run_batch(directory=_class(tmp_path), out=out, jobs=jobs, timeout=4.0)
    assert result.records == 2 and result.not_graded == {}
    assert sorted(calls[0][0]) == ["hangs.py", "honest.py"]
    # graded alone only where others ran beside it; with one job there was nobody to starve it
    assert calls[1:] == ([(["hangs.py"], 1)] if jobs > 1 else [])
    reports = {p.stem: json.loads(p.read_text()) for p in (out / "reports").glob("*.json")}
    assert reports["hangs"]["steps"][0]["detail"] == "timeout"
    assert reports["honest"]["steps"][0]["status"] == "passed"
