"""A notebook learner's first `check()` in a fresh Jupyter kernel (issue 25: under 3 s).

    python benchmarks/bench_notebook.py [-n 3] [--steps dot_scores] [--no-warm-up]

Each round starts a real kernel (jupyter_client, the venv's ipykernel), runs the cells a learner runs, in order,
one at a time, and times each:
- `from grader import check` (the notebook's first cell, as `attn-kata init --notebook` writes it);
- the learner's cells: every step's reference code, as a learner who has solved them would have typed it (they
  import torch: the kernel pays that whatever the grader does);
- the first `check()` (all steps, or `--steps`): what the learner waits for;
- a second `check()`.
The kernel is shut down after each round. Reports the median of each, and the first check against the goal.
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "a benchmark of this Linux machine (benchmarks/RESULTS.md)"  # typed for Linux only

import argparse
import re
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GOAL = 3.0

import results

from grader.registry import STEPS

# a notebook has one namespace: the stubs' imports of earlier steps' modules are not there
_EARLIER = re.compile(r"^from (\w+) import (\w+)\s*$", re.M)


def learner_cells() -> list[str]:
    ids = {s.id for s in STEPS} | {s.stem for s in STEPS}  # the old module names and the numbered ones
    cells = []
    for s in STEPS:
        text = (ROOT / "solutions" / s.file).read_text(encoding="utf-8")
        cells.append(_EARLIER.sub(lambda m: "" if m.group(1) in ids else m.group(0), text))
    return cells


def one_round(steps: list[str]) -> dict[str, float]:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    args = ", ".join(repr(s) for s in steps)

    def run(code: str) -> float:
        t = time.perf_counter()
        reply = kc.execute_interactive(code, timeout=300, output_hook=lambda msg: None)
        if reply["content"]["status"] != "ok":
            raise SystemExit(f"cell failed: {code[:60]!r}: {reply['content'].get('evalue')}")
        return time.perf_counter() - t

    try:
        times = {"from grader import check": run("from grader import check")}
        times["learner cells (import torch, define)"] = sum(run(cell) for cell in learner_cells())
        check = f"_r = check({args}); assert _r.score == _r.max_score, _r"
        times["first check()"] = run(check)
        times["second check()"] = run(check)
    finally:
        km.shutdown_kernel(now=True)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--steps", nargs="*", default=[])
    ap.add_argument("--no-record", action="store_true", help="leave benchmarks/RESULTS.md and the README alone")
    args = ap.parse_args()
    rounds = [one_round(args.steps) for _ in range(args.n)]
    lines = []
    for key in rounds[0]:
        ts = [r[key] for r in rounds]
        lines.append(f"{key:40s} median {statistics.median(ts):.3f} s of {args.n}  "
                     f"({', '.join(f'{t:.2f}' for t in ts)})")
    first = statistics.median(r["first check()"] for r in rounds)
    lines.append(f"first check() in a fresh kernel: {first:.2f} s (goal < {GOAL:g} s): "
                 f"{'met' if first < GOAL else 'NOT met'}")
    print("\n".join(lines))
    what = ", ".join(args.steps) or "all steps"
    results.record("bench_notebook", lines, {f"a notebook's first `check()` ({what}) in a fresh kernel (wall)":
                                             f"{first:.2f} s"})


if __name__ == "__main__":
    main()
