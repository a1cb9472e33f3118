"""Time `attn-kata batch` against nbgrader's `autograde` on the same submissions, on this machine, in one run.

    python benchmarks/bench_batch.py [--sizes 48,120,300] [--nbgrader-n 8] [--jobs N] [--keep DIR]

Both graders get the same students' chapter-3 code (from solutions/, every 4th with a bug): attn-kata as plain
notebooks (one per student, as learners write them), nbgrader as the same code in an nbgrader assignment whose
test cells assert on outputs. attn-kata grades classes of each size (the first N of one class of the largest
size), each with a fresh `attn-kata batch` command: its wall time includes the start-up (importing torch, the
zygote, the grading processes). nbgrader's per-submission time is flat (one kernel per notebook), so it is
measured on the first K notebooks only (--nbgrader-n; its generate_assignment is not timed, its autograde is).
Prints each wall time, the ratio per submission, and CPU per submission with every process counted
(benchmarks/counted.py: the zygote, the grading processes, the workers, nbgrader's kernels): attn-kata's with its
start-up shared by the class (the command as run), nbgrader's per notebook without its one-off start-up (from a
run of one notebook and a run of K: (CPU(K) - CPU(1)) / (K - 1)), its start-up apart. The CPU ratio is the
figure that does not depend on how many cores the machine has.

This machine's speed drifts by 10-30% from one hour to the next, and a ratio of two runs made minutes apart moves
with it: `--rounds R` repeats the whole measurement R times, each round attn-kata's classes then nbgrader's
sample, and prints each round's ratios and their medians, with the load average after each round. The figures
go to benchmarks/RESULTS.md and the README's table (`--no-record`: not).
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "a benchmark of this Linux machine (benchmarks/RESULTS.md)"  # typed for Linux only

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import counted
import results
import submissions

BIN = Path(sys.executable).parent

SETUP_CELL = """import torch
import torch.nn as nn
inputs = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                       [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])"""

# hidden reference values are computed inline; each test cell asserts on the learner's outputs
TESTS = [
    ("dot_scores", 1, """exp = inputs @ inputs[1]
torch.testing.assert_close(attention_scores(inputs, inputs[1]), exp, atol=1e-4, rtol=0)"""),
    ("softmax", 1, """s = torch.tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
torch.testing.assert_close(softmax_naive(s), torch.softmax(s, dim=0), atol=1e-4, rtol=0)
x = torch.randn(3, 5)
torch.testing.assert_close(attention_weights(x), torch.softmax(x, dim=-1), atol=1e-5, rtol=0)"""),
    ("context_vector", 1, """w = torch.softmax(inputs @ inputs[1], dim=0)
torch.testing.assert_close(context_vector(w, inputs), w @ inputs, atol=1e-4, rtol=0)"""),
    ("all_tokens", 1, """exp = inputs @ inputs.T
torch.testing.assert_close(all_attention_scores(inputs), exp, atol=1e-4, rtol=0)"""),
    ("causal_mask", 1, """m = causal_mask(5)
assert m.dtype == torch.bool and torch.equal(m, torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1))"""),
    ("causal_attention", 2, """torch.manual_seed(123)
ca = CausalAttention(3, 2, 6, 0.0)
batch = torch.stack((inputs, inputs))
out = ca(batch)
assert out.shape == (2, 6, 2)
q, k, v = ca.W_query(batch), ca.W_key(batch), ca.W_value(batch)
sc = (q @ k.transpose(1, 2)).masked_fill(torch.triu(torch.ones(6, 6, dtype=torch.bool), 1), -torch.inf)
torch.testing.assert_close(out, torch.softmax(sc / 2 ** 0.5, dim=-1) @ v, atol=1e-4, rtol=0)"""),
    ("multihead_attention", 2, """torch.manual_seed(123)
mha = MultiHeadAttention(3, 4, 6, 0.0, num_heads=2)
out = mha(torch.stack((inputs, inputs)))
assert out.shape == (2, 6, 4)
x2 = torch.stack((inputs, inputs)).clone(); x2[:, 5] += 1.0
torch.testing.assert_close(mha(x2)[:, :5], out[:, :5])"""),
]


def _cell(kind: str, source: str, grade_id: str, points: int = 0) -> dict:
    meta = {"nbgrader": {"grade_id": grade_id, "locked": kind != "solution", "schema_version": 3,
                         "solution": kind == "solution", "grade": kind == "test", "task": False}}
    if kind == "test":
        meta["nbgrader"]["points"] = points
    return {"cell_type": "code", "execution_count": None, "id": grade_id.replace("_", "-"), "metadata": meta,
            "outputs": [], "source": source}


def nbgrader_notebook(bug: str | None) -> dict:
    cells = [_cell("setup", SETUP_CELL, "setup")]
    for step, src in submissions.cells():
        if bug and submissions.BUGS[bug][0] == step:
            src = src.replace(submissions.BUGS[bug][1], submissions.BUGS[bug][2])
        cells.append(_cell("solution", f"### BEGIN SOLUTION\n{src}\n### END SOLUTION", f"sol_{step}"))
    for step, points, test in TESTS:
        cells.append(_cell("test", test, f"test_{step}", points))
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"}, "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def run_attn_kata(subs: Path, out: Path, n: int, jobs: int | None) -> tuple[float, float]:
    """One `attn-kata batch` of the n notebooks in `subs`: (wall seconds, CPU seconds of every process it
    started), start-up included."""
    cmd = [str(BIN / "python"), "-m", "grader", "batch", str(subs), "--out", str(out), "-q"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    cost = counted.run(cmd, cwd=str(ROOT))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == n, summary
    return cost.wall, cost.cpu


def run_nbgrader(work: Path, n: int) -> tuple[float, float]:
    course = work / "course"
    (course / "source" / "ps1").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(course)!r}\n"
        "c.CourseDirectory.course_id = 'bench'\n"
        "c.ExecutePreprocessor.timeout = 120\n"
        "c.ClearSolutions.code_stub = {'python': 'raise NotImplementedError()'}\n")
    (course / "source" / "ps1" / "attention.ipynb").write_text(json.dumps(nbgrader_notebook(None), indent=1))
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "OMP_NUM_THREADS": "1"}

    def nbg(*args: str) -> None:
        proc = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")

    nbg("db", "assignment", "add", "ps1")
    nbg("generate_assignment", "ps1", "--force")
    for i in range(n):
        d = course / "submitted" / f"student{i:03d}" / "ps1"
        d.mkdir(parents=True)
        (d / "attention.ipynb").write_text(json.dumps(nbgrader_notebook(submissions.variant(i)), indent=1))
        (d / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")
    cost = counted.run([str(BIN / "nbgrader"), "autograde", "ps1"], cwd=str(course), env=env)
    wall, cpu = cost.wall, cost.cpu
    graded = list((course / "autograded").glob("*/ps1/attention.ipynb"))
    assert len(graded) == n, f"nbgrader autograded {len(graded)} of {n}"
    return wall, cpu


def startup(work: Path) -> float:
    """attn-kata batch's fixed cost: the same command on a class of one (import torch, start the zygote)."""
    empty = work / "one-student"
    (empty / "nobody").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "solutions" / "step01_dot_scores.py", empty / "nobody" / "step01_dot_scores.py")
    return counted.run([sys.executable, "-m", "grader", "batch", str(empty), "--out", str(work / "one-out"), "-q"],
                       cwd=str(ROOT)).wall


def nbgrader_costs(here: Path, k: int) -> tuple[float, float, float]:
    """nbgrader autograde: (wall seconds a notebook and CPU seconds a notebook, both without its one-off start-up,
    and the start-up's CPU seconds), from a run of one notebook and a run of k (each in a course of its own)."""
    one_wall, one_cpu = run_nbgrader(here / "nbgrader-1", 1)
    k_wall, k_cpu = run_nbgrader(here / f"nbgrader-{k}", k)
    per_cpu = max(k_cpu - one_cpu, 0.0) / (k - 1)
    per_wall = max(k_wall - one_wall, 0.0) / (k - 1)
    return per_wall, per_cpu, one_cpu - per_cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="48,120,300", help="class sizes, comma-separated (default 48,120,300)")
    ap.add_argument("-n", type=int, default=None, help="one class size instead of --sizes")
    ap.add_argument("--jobs", type=int, default=None, help="attn-kata batch --jobs (default: all cores)")
    ap.add_argument("--keep", type=Path, default=None, help="work here and keep the files")
    ap.add_argument("--skip-nbgrader", action="store_true")
    ap.add_argument("--nbgrader-n", type=int, default=8,
                    help="autograde K notebooks with nbgrader (default 8; and one, for its start-up): its "
                         "per-notebook cost is flat, ~3 s here, so a class of 300 need not take 20 minutes")
    ap.add_argument("--rounds", type=int, default=1, help="repeat the whole measurement R times (default 1)")
    ap.add_argument("--no-record", action="store_true", help="leave benchmarks/RESULTS.md and the README alone")
    args = ap.parse_args()
    sizes = [args.n] if args.n else sorted(int(x) for x in args.sizes.split(","))
    work = args.keep or Path(tempfile.mkdtemp(prefix="attn-bench-"))
    if args.keep:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    try:
        everyone = submissions.make_class(work / "all", max(sizes), "ipynb")
        say(f"cores: {os.cpu_count()}; notebooks of the 14 steps, every 4th with a bug; CPU: every process counted")
        wall_ratios: dict[int, list[float]] = {n: [] for n in sizes}
        cpu_ratios: dict[int, list[float]] = {n: [] for n in sizes}
        kata_cpu: dict[int, list[float]] = {n: [] for n in sizes}
        nbg_cpu: list[float] = []
        loads: list[float] = []
        for r in range(args.rounds):
            here = work / f"round-{r}"
            here.mkdir()
            if args.rounds > 1:
                say(f"-- round {r + 1} of {args.rounds}")
            say(f"attn-kata batch, fixed cost (a class of one): {startup(here):.2f} s wall")
            per_sub = {}
            for n in sizes:
                subs = here / f"class-{n}"
                subs.mkdir()
                for p in everyone[:n]:
                    shutil.copy(p, subs / p.name)
                wall, cpu = run_attn_kata(subs, here / f"out-{n}", n, args.jobs)
                per_sub[n] = (wall / n, cpu / n)
                kata_cpu[n].append(cpu / n)
                say(f"attn-kata batch, N = {n:3d}: {wall:7.2f} s wall (start-up included), {wall / n:6.3f} "
                    f"s/submission, CPU {cpu / n:6.3f} s/submission (start-up included)")
            if not args.skip_nbgrader:
                k = max(2, min(max(sizes), args.nbgrader_n))
                n_wall, n_cpu, n_start = nbgrader_costs(here, k)
                nbg_cpu.append(n_cpu)
                say(f"nbgrader autograde, 1 and {k} notebooks: {n_wall:6.3f} s wall and CPU {n_cpu:6.3f} s a notebook "
                    f"without its start-up; the start-up apart: CPU {n_start:.2f} s once")
                for n in sizes:
                    wall_ratios[n].append(n_wall / per_sub[n][0])
                    cpu_ratios[n].append(n_cpu / per_sub[n][1])
                    say(f"ratio per submission at N = {n:3d} (nbgrader / attn-kata): CPU {cpu_ratios[n][-1]:5.1f}x, "
                        f"wall {wall_ratios[n][-1]:5.1f}x")
            loads.append(os.getloadavg()[0])
            say(f"load average (1 min) after round {r + 1}: {loads[-1]:.1f}")
        figures = {}
        for n in sizes:
            cpu = statistics.median(kata_cpu[n])
            if args.skip_nbgrader:
                say(f"N = {n:3d}: attn-kata CPU {cpu:.3f} s/submission (median of {args.rounds})")
                continue
            med = statistics.median(cpu_ratios[n])
            say(f"median of {args.rounds} round(s) at N = {n:3d}: CPU {med:5.1f}x (rounds: "
                f"{', '.join(f'{x:.1f}' for x in cpu_ratios[n])}), wall {statistics.median(wall_ratios[n]):5.1f}x; "
                f"attn-kata {cpu:.3f} s CPU a submission, nbgrader {statistics.median(nbg_cpu):.2f} s")
            figures[f"batch CPU per submission vs nbgrader, N = {n}"] = f"{med:.0f}x ({cpu:.3f} s vs " \
                f"{statistics.median(nbg_cpu):.2f} s)"
        results.record("bench_batch", lines, figures)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
