"""CPU per student: Otter-Grader's `otter run` against `attn-kata batch`, on the same students' code.

    python benchmarks/bench_otter.py [-n 48] [-k 3] [--rounds 1] [--no-record]

Otter-Grader is the other tool an instructor would pick for notebooks. `otter run` is its non-containerized path
(one student per command: it executes the notebook in a Jupyter kernel, then runs the tests against what the
notebook defined). Its assignment here has the tests an Otter assignment can express for this chapter: doctest
cases asserting on outputs, the same ones bench_batch.py gives nbgrader (seven steps; Otter cannot load weights
by role, build on stand-ins or read code). It needs `pip install otter-grader` (the `bench` extra), never a
runtime dependency of the kata.

The students: `submissions.variant(i)` (every 4th with a bug), as notebooks of the chapter's code for both tools.
attn-kata grades a class of N of them in one `attn-kata batch` (start-up included), Otter the first K, each with
its own `otter run`. Every process of each command is counted (benchmarks/counted.py): the kernel Otter starts,
the zygote, grading processes and workers of the batch. Rounds interleave the two.
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "a benchmark of this Linux machine (benchmarks/RESULTS.md)"  # typed for Linux only

import argparse
import ast
import json
import os
import pprint
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import bench_batch
import counted
import results
import submissions

BIN = Path(sys.executable).parent


def _doctest(source: str) -> str:
    """A test cell as doctest lines: an expression statement's value is discarded (`_ = ...`), so that a call
    that returns something (torch.manual_seed) is not compared with an expected output of nothing."""
    lines = []
    for node in ast.parse(source).body:
        text = ast.get_source_segment(source, node) or ""
        if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
            text = "_ = " + text
        first, *rest = text.splitlines()
        lines += [">>> " + first] + ["... " + line for line in rest]
    return "\n".join(lines) + "\n"


def assignment(work: Path) -> Path:
    """Otter's autograder zip for bench_batch.TESTS (`otter generate`)."""
    tests = work / "tests"
    tests.mkdir(parents=True)
    for step, points, test in bench_batch.TESTS:
        doc = {"name": step, "points": points, "suites": [{
            "cases": [{"code": _doctest(test), "hidden": False, "locked": False}],
            "scored": True, "setup": "", "teardown": "", "type": "doctest"}]}
        (tests / f"{step}.py").write_text(f"OK_FORMAT = True\n\ntest = {pprint.pformat(doc, width=110)}\n")
    out = work / "autograder.zip"
    subprocess.run([str(BIN / "otter"), "generate", "-t", str(tests), "-o", str(out), "--no-requirements",
                    "--no-environment", "--no-config"], cwd=work, check=True, capture_output=True)
    return out


def otter_notebook(bug: str | None) -> dict:
    """The student's notebook for Otter: the set-up cell, then each step's code (with the student's bug)."""
    sources = [bench_batch.SETUP_CELL]
    for step, src in submissions.cells():
        if bug and submissions.BUGS[bug][0] == step:
            src = src.replace(submissions.BUGS[bug][1], submissions.BUGS[bug][2])
        sources.append(src)
    cells: list[dict[str, Any]] = [{"cell_type": "code", "execution_count": None, "id": f"cell-{i}", "metadata": {},
                                    "outputs": [], "source": s} for i, s in enumerate(sources)]
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"}, "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def run_otter(zip_path: Path, work: Path, i: int) -> tuple[counted.Cost, float]:
    """One `otter run` of student i: its cost, and the score it gave (out of 9)."""
    d = work / f"otter-{i:03d}"
    (d / "out").mkdir(parents=True)
    nb = d / "attention.ipynb"
    nb.write_text(json.dumps(otter_notebook(submissions.variant(i))))
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "OMP_NUM_THREADS": "1"}
    cost = counted.run([str(BIN / "otter"), "run", "-a", str(zip_path), "--no-logo", "-o", str(d / "out"), str(nb)],
                       cwd=str(d), env=env)
    doc = json.loads((d / "out" / "results.json").read_text())
    score = sum(float(t.get("score") or 0) for t in doc.get("tests", []) if t.get("max_score"))
    return cost, score


def run_kata(everyone: list[Path], work: Path, n: int) -> counted.Cost:
    subs = work / f"class-{n}"
    subs.mkdir(parents=True)
    for p in everyone[:n]:
        shutil.copy(p, subs / p.name)
    return counted.run([sys.executable, "-m", "grader", "batch", str(subs), "--out", str(work / f"out-{n}"), "-q"],
                       cwd=str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=48, help="attn-kata's class size (default 48)")
    ap.add_argument("-k", type=int, default=3, help="students graded by `otter run` each round (default 3)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-record", action="store_true", help="leave benchmarks/RESULTS.md and the README alone")
    args = ap.parse_args()
    if not (BIN / "otter").exists():
        raise SystemExit("otter is not installed here: pip install -e '.[bench]' (or pip install otter-grader)")
    work = Path(tempfile.mkdtemp(prefix="attn-otter-"))
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    try:
        zip_path = assignment(work / "assignment")
        everyone = submissions.make_class(work / "all", args.n, "ipynb")
        kata, otter, loads = [], [], []
        for r in range(args.rounds):
            here = work / f"round-{r}"
            kata.append(run_kata(everyone, here, args.n))
            say(f"round {r + 1}: attn-kata batch, N = {args.n}: CPU {kata[-1].cpu / args.n:.3f} s/student "
                f"(wall {kata[-1].wall:.1f} s in all, start-up included)")
            for i in range(args.k):
                cost, score = run_otter(zip_path, here, i)
                otter.append(cost)
                say(f"round {r + 1}: otter run, student {i} ({submissions.variant(i) or 'correct'}): CPU "
                    f"{cost.cpu:.2f} s, wall {cost.wall:.1f} s, score {score:g}/9")
            loads.append(os.getloadavg()[0])
        kata_cpu = statistics.median(c.cpu / args.n for c in kata)
        otter_cpu = statistics.median(c.cpu for c in otter)
        say(f"load average (1 min) after each round: {', '.join(f'{x:.1f}' for x in loads)}")
        say(f"CPU per student: otter run {otter_cpu:.2f} s (median of {len(otter)}), attn-kata batch at N = "
            f"{args.n} {kata_cpu:.3f} s: the kata is {otter_cpu / kata_cpu:.0f}x cheaper by CPU")
        say("  (Otter: 9 points of doctests on 7 steps; the kata: 14 steps, every check)")
        results.record("bench_otter", lines, {
            f"CPU per student vs Otter's `otter run` (kata at N = {args.n})":
                f"{otter_cpu / kata_cpu:.0f}x ({kata_cpu:.3f} s vs {otter_cpu:.2f} s)"})
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
