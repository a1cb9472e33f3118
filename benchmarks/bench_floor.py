"""The least CPU one submission can cost with every check as strong as it is, and the batch ratio that allows.

    python benchmarks/bench_floor.py [-n 15] [--nbgrader-s SECONDS | --nbgrader-n K]

A batch grades each student in a fresh process forked from a warm one (grader/pool/zygote.py): no student's code
may run where another's did. The least such a process can do is run every hidden case of the 14 steps once, on
code that is right the first time. This script measures exactly that, with nothing of the grader around it:

- `fork + exit`: a child of a warm process (torch imported, the zygote's malloc settings) that exits at once;
- `cases`: a child that runs every case of every step on the reference (solutions/), as the worker's probes do
  (a step that builds on earlier ones on the public stand-ins, as in a worker), and exits: no sandbox, no
  channel, no answers to check, no judging, no reports.

Its CPU (the child's own, with the kernel's work for it: page faults, fork, exit) is a floor for a worker;
a real batch adds the sandbox, the messages, the trusted side's reading of the notebook and its checks. With
nbgrader's time per notebook (measured here with --nbgrader-n, or given with --nbgrader-s), it prints the best
ratio a batch could reach on this machine's cores if every other cost were zero: nbgrader's seconds divided by
(floor CPU / cores).
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "a benchmark of this Linux machine (benchmarks/RESULTS.md)"  # typed for Linux only

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import results

# the zygote's malloc settings (grader.pool.zygote._zygote_env): glibc reads them only at a process's start
TUNABLES = "glibc.malloc.hugetlb=1"


def _child_cpu(work: object) -> float:
    """CPU seconds (user + system) of one forked child that runs `work()` and exits."""
    pid = os.fork()
    if pid == 0:
        try:
            work()  # type: ignore[operator]
        finally:
            os._exit(0)
    _, _status, usage = os.wait4(pid, 0)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=15, help="children of each kind (default 15)")
    ap.add_argument("--nbgrader-s", type=float, default=None, help="nbgrader's seconds a notebook, if known")
    ap.add_argument("--nbgrader-n", type=int, default=0, help="else measure nbgrader autograde on K notebooks")
    ap.add_argument("--no-record", action="store_true", help="leave benchmarks/RESULTS.md and the README alone")
    args = ap.parse_args()
    if os.environ.get("GLIBC_TUNABLES") != TUNABLES:  # as the zygote runs: start again with its settings
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "GLIBC_TUNABLES": TUNABLES,
                                                                "OMP_NUM_THREADS": "1"})

    import gc

    import torch

    from grader.grading import engine, reference
    from grader.registry import BY_ID
    from grader.settings import resolve_secret
    from grader.worker import probes
    from grader.worker import serve as worker

    torch.set_num_threads(1)
    plans, _refs = engine.prepared(resolve_secret(None))  # also warms every path the cases take
    ref = reference.namespace()
    per_step: dict[str, list[float]] = {s: [] for s in plans}

    def cases() -> None:
        import time

        for step_id, step_cases in plans.items():
            t = time.process_time()
            # a step that builds on earlier ones on the public stand-ins, as the worker runs a learner's code and
            # the trusted side the reference (engine.prepared)
            with reference.standins_for(ref, BY_ID[step_id]) as view:
                for name, case in step_cases.items():
                    worker.run_case(view, engine._as_doc(name, case), case.inputs, set())
            probes.clear_kept()
            per_step[step_id].append(time.process_time() - t)
        Path(out).write_text(json.dumps({s: v[-1] for s, v in per_step.items()}))  # for the parent's table

    gc.collect()
    gc.freeze()
    out = os.path.join(tempfile.mkdtemp(prefix="attn-floor-"), "steps")
    empty = sorted(_child_cpu(lambda: None) for _ in range(args.n))
    full, steps = [], []
    for _ in range(args.n):
        full.append(_child_cpu(cases))
        steps.append(json.loads(Path(out).read_text()))
    floor = statistics.median(full)
    lines = [f"fork + exit: median {statistics.median(empty) * 1000:.1f} ms CPU of {args.n}",
             f"every case of the 14 steps on the reference, in a fresh fork: median {floor * 1000:.1f} ms CPU "
             f"(min {min(full) * 1000:.1f}, max {max(full) * 1000:.1f})"]
    lines += [f"  {s:22s} {statistics.median(x[s] for x in steps) * 1000:6.1f} ms" for s in plans]
    lines.append(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}")
    for line in lines:
        print(line)
    cores = os.cpu_count() or 1
    seconds = args.nbgrader_s
    if seconds is None and args.nbgrader_n:
        import bench_batch

        work = Path(tempfile.mkdtemp(prefix="attn-floor-nbg-"))
        wall, _cpu = bench_batch.run_nbgrader(work, args.nbgrader_n)
        seconds = wall / args.nbgrader_n
        lines.append(f"nbgrader autograde: {seconds:.2f} s a notebook ({args.nbgrader_n} notebooks)")
        print(lines[-1])
    if seconds:
        best = seconds / (floor / cores)
        lines.append(f"best batch ratio on {cores} cores if sandbox, messages, reading and judging cost nothing: "
                     f"{best:.0f}x (80x needs {seconds / 80 * cores * 1000:.0f} ms CPU a submission, all included)")
        print(lines[-1])
    step14 = statistics.median(x["gpt2_size"] for x in steps) * 1000
    results.record("bench_floor", lines, {
        "floor: every hidden case once in a fresh fork (CPU)": f"{floor * 1000:.0f} ms",
        "step 14 (GPT-2 size) in that floor": f"{step14:.1f} ms"})


if __name__ == "__main__":
    main()
