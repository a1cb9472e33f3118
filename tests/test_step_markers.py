"""`pytest -m step09` (or `-m causal_attention`) selects one step's tests (tests/conftest.py `_steps_of`): a real
pytest collection in a subprocess, as a contributor runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from grader.registry import STEPS

ROOT = Path(__file__).resolve().parent.parent


def collected(*args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "--collect-only", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode in (0, 5), proc.stdout[-2000:] + proc.stderr[-2000:]  # 5: none collected
    return {line for line in proc.stdout.splitlines() if "::" in line}


def test_a_step_marker_selects_that_steps_tests_and_no_others() -> None:
    files = ("tests/test_steps.py", "tests/test_fixtures.py")
    nine = collected("-m", "step09", *files)
    assert nine == collected("-m", "causal_attention", *files)  # the step's id is the same marker
    assert "tests/test_steps.py::test_every_step_has_all_its_parts[causal_attention]" in nine
    assert "tests/test_fixtures.py::test_buggy_fixture_loses_exactly_the_expected_points[ca_buffer_unused]" in nine
    assert "tests/test_fixtures.py::test_the_book_example_is_the_printed_one[causal_attention]" in nine
    assert not any("[dot_scores]" in t or "[softmax]" in t for t in nine), sorted(nine)
    # exactly the buggy fixtures that cost step 9 points (tests/fixtures/expected.json); one that only grades it
    # (and passes it) is another step's
    expected = json.loads((ROOT / "tests" / "fixtures" / "expected.json").read_text(encoding="utf-8"))
    costs = {name for name, steps in expected.items() if not name.startswith("_")
             and steps.get("causal_attention", {}).get("status", "passed") != "passed"}
    assert {t.split("[")[1].rstrip("]") for t in nine if "loses_exactly" in t} == costs
    every = collected("-m", " or ".join(f"step{s.number:02d}" for s in STEPS), "tests/test_steps.py")
    assert {t.split("[")[1].rstrip("]") for t in every if "has_all_its_parts" in t} == {s.id for s in STEPS}
