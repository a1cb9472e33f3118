"""A learner's repeated check through the warm background grader (grader/daemon), against a torch import.

    python benchmarks/bench_check.py [-n 5] [--backend linux|portable]

Interleaved, one round after another, median of N wall times (fresh processes, as a learner runs them):
- `python -I -c "import torch"`: the cost every in-process command pays;
- a cold `attn-kata grade solutions/ --no-daemon`: a fresh process that imports torch and grades all steps;
- a repeated `attn-kata check dot_scores` (a workspace with step 1 solved) through the warm daemon;
- `attn-kata daemon status`: the client's own floor (start-up, imports, one round trip; no grading).
- the first check, which starts the daemon: wall time, and CPU of every process it took (the client, and the
  daemon's tree as /proc counts it: each process's own time and that of the children it reaped), against one torch
  import: on Linux the daemon imports no torch (its zygote does, once: issue 28), so about 1.3x, not 2.5x.
Goal (issues 14, 24): the repeated check at most 0.4x one torch import, on either worker backend (`--backend
portable`: the daemon keeps a spawned spare worker instead of forking from a zygote, as on macOS). The daemon
lives in a temporary runtime folder of its own and is stopped at the end.
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "a benchmark of this Linux machine (benchmarks/RESULTS.md)"  # typed for Linux only

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
GOAL = 0.4

import results


def timed(cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> float:
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - t
    if done.returncode not in ok:
        sys.exit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-2000:]}")
    return elapsed


def tree_cpu(root: int) -> float:
    """CPU seconds of `root` and its descendants now: each one's own time and its reaped children's."""
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(entry)] = int(fields[1])
            cpu[int(entry)] = sum(int(x) for x in fields[11:15]) / tick  # utime, stime, cutime, cstime
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo += [p for p, pp in parent.items() if pp == pid]
    return total


def first_check(kata: list[str], ws: Path, env: dict[str, str]) -> tuple[float, float]:
    """The check that starts the daemon: (wall, CPU of the client and of the daemon's whole tree)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed([*kata, "check", "dot_scores", "--path", str(ws)], env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    client = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    status = subprocess.run([*kata, "daemon", "status"], cwd=ROOT, env=env, capture_output=True, text=True)
    pid = int(status.stdout.split("pid ")[1].split(",")[0])
    return wall, client + tree_cpu(pid)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--backend", choices=("linux", "portable"), default="linux")
    ap.add_argument("--no-record", action="store_true", help="leave benchmarks/RESULTS.md and the README alone")
    args = ap.parse_args()
    script = Path(sys.executable).parent / "attn-kata"
    kata = [str(script)] if script.exists() else [sys.executable, "-m", "grader"]
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir(mode=0o700)
        ws = Path(tmp) / "exercises"
        shutil.copytree(ROOT / "exercises", ws)
        shutil.copy(ROOT / "solutions" / "step01_dot_scores.py", ws / "step01_dot_scores.py")
        env = {k: v for k, v in os.environ.items() if k not in ("ATTN_KATA_NO_DAEMON", "ATTN_KATA_SECRET")}
        env["ATTN_KATA_RUNTIME_DIR"] = str(run)
        env["ATTN_KATA_BACKEND"] = args.backend
        keys = ("import torch", "cold grade solutions/ (--no-daemon)", "repeated check dot_scores (warm daemon)",
                "client floor (daemon status)")
        runs: dict[str, list[float]] = {key: [] for key in keys}
        torch_cpu = []
        for _ in range(3):
            t0 = os.times()
            timed([sys.executable, "-I", "-c", "import torch"], env)
            t1 = os.times()
            torch_cpu.append(t1.children_user + t1.children_system - t0.children_user - t0.children_system)
        first, first_cpu = first_check(kata, ws, env)  # starts the daemon
        try:
            for _ in range(args.n):
                times = [timed([sys.executable, "-I", "-c", "import torch"], env),
                         timed([*kata, "--no-daemon", "grade", "solutions", "--format", "json"], env)]
                time.sleep(1.0)  # "one second after the last", as a learner saves and checks again
                times += [timed([*kata, "check", "dot_scores", "--path", str(ws)], env),
                          timed([*kata, "daemon", "status"], env)]
                for key, t in zip(runs, times, strict=True):
                    runs[key].append(t)
        finally:
            subprocess.run([*kata, "daemon", "stop"], env=env, capture_output=True, timeout=60)
    one_torch = statistics.median(torch_cpu)
    lines = [f"backend: {args.backend}", f"first check (starts the daemon): wall {first:.2f} s, CPU {first_cpu:.2f} s "
             f"(every process; {first_cpu / one_torch:.2f}x one torch import's {one_torch:.2f} s)"]
    med = {key: statistics.median(ts) for key, ts in runs.items()}
    for key, m in med.items():
        lines.append(f"{key:42s} median {m:.3f} s of {args.n}  ({', '.join(f'{t:.2f}' for t in runs[key])})")
    ratio = med["repeated check dot_scores (warm daemon)"] / med["import torch"]
    lines.append(f"repeated check / import torch = {ratio:.2f} (goal <= {GOAL}): "
                 f"{'met' if ratio <= GOAL else 'NOT met'}")
    for line in lines:
        print(line)
    results.record(f"bench_check ({args.backend})", lines,
                   {f"repeated `check` through the daemon vs `import torch` (wall, {args.backend})": f"{ratio:.2f}x",
                    f"first `check` (starts the daemon) vs `import torch` (CPU, {args.backend})":
                        f"{first_cpu / one_torch:.2f}x"})


if __name__ == "__main__":
    main()
