"""Golden files, as exercism's test runner pins its results.json: for three fixture submissions and a fixed
secret, what an instructor and a platform read (the JSON report, Gradescope's results.json, the gradebook,
feedback.txt and summary.json) is compared byte for byte with the files committed under tests/golden/.

A change to any of them is a change to what people and platforms read: review it, then regenerate on purpose:
    ATTN_KATA_REGOLDEN=1 python -m pytest -q tests/test_golden.py
Only `execution_time` (Gradescope's wall clock) is taken out, the report's `sandbox` (the layers of this machine
and user) written as "<per machine>", and the temporary folder written as <DIR>."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from inproc import kata as run_in_process

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
sys.path.insert(0, str(ROOT / "benchmarks"))

import submissions  # noqa: E402

SECRET = "golden-secret"
STEPS = ("dot_scores", "softmax", "causal_mask")  # a fixed subset: new steps elsewhere leave these files alone
REGOLDEN = os.environ.get("ATTN_KATA_REGOLDEN") == "1"


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "ATTN_KATA_SECRET": SECRET, "OMP_NUM_THREADS": "1", "ATTN_KATA_LANG": ""}
    steps = [a for s in STEPS for a in ("--step", s)]
    return run_in_process("--lang", "en", *args, *steps, cwd=ROOT, env=env)  # tests/inproc.py


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("golden") / "class"
    d.mkdir()
    shutil.copytree(ROOT / "solutions", d / "honest", ignore=shutil.ignore_patterns("__pycache__"))
    (d / "wrong_mask.ipynb").write_text(submissions.notebook_source("wrong_mask"), encoding="utf-8")
    (d / "broken.py").write_text("def f(:\n    pass\n", encoding="utf-8")
    files: dict[str, str] = {}
    for sub in ("honest", "wrong_mask.ipynb", "broken.py"):
        name = sub.split(".")[0]
        rep = _run(["grade", str(d / sub), "--format", "json"])
        assert rep.returncode == 0, rep.stderr
        doc = json.loads(rep.stdout)
        # what confined the worker differs from one machine and user to the next: pinned apart (test_standins)
        assert doc["sandbox"] == {} or doc["sandbox"]["backend"] == "linux"
        doc["sandbox"] = "<per machine>"
        files[f"{name}.report.json"] = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
        gs = _run(["grade", str(d / sub), "--format", "gradescope"])
        assert gs.returncode == 0, gs.stderr
        doc = json.loads(gs.stdout)
        doc.pop("execution_time", None)
        files[f"{name}.results.json"] = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    out = d.parent / "out"
    batch = _run(["batch", str(d), "--out", str(out), "--jobs", "2", "--quiet"])
    assert batch.returncode == 1, batch.stderr  # broken.py could not be graded: listed, exit 1
    files["gradebook.csv"] = (out / "gradebook.csv").read_text(encoding="utf-8")
    files["summary.json"] = (out / "summary.json").read_text(encoding="utf-8")
    for f in sorted((out / "feedback").glob("*.txt")):
        files[f"feedback/{f.name}"] = f.read_text(encoding="utf-8")
    return {k: v.replace(str(d), "<DIR>") for k, v in files.items()}


def test_golden_files(produced: dict[str, str]) -> None:
    if REGOLDEN:
        shutil.rmtree(GOLDEN, ignore_errors=True)
        for name, text in produced.items():
            (GOLDEN / name).parent.mkdir(parents=True, exist_ok=True)
            (GOLDEN / name).write_text(text, encoding="utf-8", newline="")
    committed = {str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*") if p.is_file()}
    assert committed == set(produced), "golden files added or missing: ATTN_KATA_REGOLDEN=1 regenerates them"
    for name, text in produced.items():
        want = (GOLDEN / name).read_bytes()
        assert text.encode("utf-8") == want, f"{name} differs from tests/golden/{name} (see this file's docstring)"


def test_the_golden_files_say_what_they_should() -> None:
    """The pinned files are worth pinning: full marks, a buggy step, an unreadable file recorded as such."""
    honest = json.loads((GOLDEN / "honest.report.json").read_text(encoding="utf-8"))
    assert honest["score"] == honest["max_score"] > 0
    assert [s["id"] for s in honest["steps"]] == list(STEPS)
    buggy = json.loads((GOLDEN / "wrong_mask.report.json").read_text(encoding="utf-8"))
    assert {s["id"]: s["status"] for s in buggy["steps"]}["causal_mask"] != "passed"
    # every check by its stable id, in the report and in Gradescope's tests alike (schema_minor 1)
    from grader import checks

    checks.load_all()
    ids = [c.id for sid in STEPS for c in checks.CHECKS[sid]]
    assert honest["schema_minor"] >= 1
    assert [c["id"] for s in honest["steps"] for c in s["checks"]] == ids
    results = json.loads((GOLDEN / "wrong_mask.results.json").read_text(encoding="utf-8"))
    assert [t["extra_data"]["id"] for t in results["tests"]] == ids
    assert "causal_mask.future_weights_zero" in ids
    rows = (GOLDEN / "gradebook.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == ("student,submission,dot_scores,softmax,causal_mask,total,max_score,status,reason,"
                       "key_fingerprint,timeout,grader_version")
    assert any(r.startswith("broken,broken.py,,,,0,") and ",unreadable," in r for r in rows)
    assert json.loads((GOLDEN / "summary.json").read_text(encoding="utf-8"))["statuses"] == {"graded": 2,
                                                                                             "unreadable": 1}
