"""How long grading one submission takes, cold and warm, and where the CPU goes.

    python benchmarks/bench_grade.py [-n 10] [--rounds 3] [--before DIR] [PATH]

- cold: `attn-kata --no-daemon grade PATH --format json` as a fresh process (never the warm daemon's answer), and
  Gradescope's run (`attn-kata gradescope run`, PATH's files uploaded), interleaved round by round with
  `python -I -c "import torch"`: wall time, CPU of every process it starts (the
  zygote, the grading process, the worker: benchmarks/counted.py) and the peak of their summed RSS and PSS, each
  as a median and as a ratio to one torch import. `--before DIR`: the same cold grade run from another checkout of
  the kata (e.g. `git worktree add DIR HEAD~1`), in the same rounds;
- warm: engine.grade() in a process that has already graded once (what `watch` and `batch` see);
- split: the worker's CPU (reported by the worker itself), the trusted side's CPU for collecting
  and for judging (pytest), per submission.
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "a benchmark of this Linux machine (benchmarks/RESULTS.md)"  # typed for Linux only

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import counted
import results


def cold(path: str, rounds: int, before: str | None) -> None:
    """A cold grade against one torch import, interleaved; every process of each command counted."""
    env = {**os.environ, "ATTN_KATA_NO_DAEMON": "1"}
    runs: dict[str, tuple[list[str], str]] = {
        "import torch": ([sys.executable, "-I", "-c", "import torch"], str(ROOT)),
        "cold grade": ([sys.executable, "-m", "grader", "--no-daemon", "grade", os.path.abspath(path), "--format",
                        "json"], str(ROOT))}
    # Gradescope's run_autograder as its container runs it: the same submission, in ROOT/submission
    upload = Path(tempfile.mkdtemp(prefix="bench-gradescope-"))
    (upload / "submission").mkdir()
    files = sorted(Path(path).glob("*.py")) if Path(path).is_dir() else [Path(path)]
    for f in files:
        shutil.copy(f, upload / "submission" / f.name)
    runs["Gradescope run"] = ([sys.executable, "-m", "grader", "gradescope", "run", "--root", str(upload)], str(ROOT))
    if before:  # `python -m grader` from that folder imports its grader (the current folder comes first)
        # the default submission is each checkout's own solutions/ (an older kata may not read newer file names)
        theirs = str(Path(before) / "solutions") if Path(path) == ROOT / "solutions" else os.path.abspath(path)
        runs["cold grade (before)"] = ([*runs["cold grade"][0][:5], theirs, *runs["cold grade"][0][6:]], before)
    costs: dict[str, list[counted.Cost]] = {k: [] for k in runs}
    loads = []
    for _ in range(rounds):
        for name, (cmd, cwd) in runs.items():
            costs[name].append(counted.run(cmd, cwd=cwd, env=env))
        loads.append(os.getloadavg()[0])
    torch_cpu = statistics.median(c.cpu for c in costs["import torch"])
    torch_wall = statistics.median(c.wall for c in costs["import torch"])
    lines = [f"{rounds} interleaved rounds; load average (1 min) after each: {', '.join(f'{x:.1f}' for x in loads)}"]
    figures = {}
    for name, cs in costs.items():
        cpu, wall = statistics.median(c.cpu for c in cs), statistics.median(c.wall for c in cs)
        rss, pss = max(c.peak_rss for c in cs) / 2**20, max(c.peak_pss for c in cs) / 2**20
        lines.append(f"  {name:20} CPU {cpu:5.2f} s ({cpu / torch_cpu:.2f}x torch)  wall {wall:5.2f} s "
                     f"({wall / torch_wall:.2f}x)  peak summed RSS {rss:4.0f} MiB, PSS {pss:4.0f} MiB, "
                     f"{max(c.processes for c in cs)} processes")
        if name != "import torch":  # per round, against that round's torch import: the load drifts
            ratios = [c.cpu / t.cpu for c, t in zip(cs, costs["import torch"], strict=True)]
            lines.append(f"  {'':20} CPU ratio per round: {', '.join(f'{r:.2f}' for r in ratios)}")
            names = sorted({k for c in cs for k in c.by_name})
            lines.append(f"  {'':20} CPU by process (sampled, median): " + ", ".join(
                f"{k} {statistics.median(c.by_name.get(k, 0.0) for c in cs):.2f} s" for k in names))
        if name == "cold grade":
            figures["cold `grade --no-daemon` vs `import torch` (CPU, wall)"] = \
                f"{cpu / torch_cpu:.2f}x, {wall / torch_wall:.2f}x"
            figures["cold grade, peak summed RSS (PSS)"] = f"{rss:.0f} MiB ({pss:.0f} MiB)"
        if name == "Gradescope run":
            figures["Gradescope run vs `import torch` (CPU, wall)"] = \
                f"{cpu / torch_cpu:.2f}x, {wall / torch_wall:.2f}x"
            figures["Gradescope run, peak summed RSS (PSS)"] = f"{rss:.0f} MiB ({pss:.0f} MiB)"
    shutil.rmtree(upload, ignore_errors=True)
    for line in lines:
        print(line)
    results.record("bench_grade", lines, figures)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=str(ROOT / "solutions"))
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", default=None, help="another checkout of the kata, graded cold in the same rounds")
    ap.add_argument("--cold-only", action="store_true")
    ap.add_argument("--no-record", action="store_true", help="leave benchmarks/RESULTS.md and the README alone")
    args = ap.parse_args()

    cold(args.path, args.rounds, args.before)
    if args.cold_only:
        return

    from grader.grading import engine
    from grader.pool import zygote
    from grader.pool.portable import PortableWorker
    from grader.settings import backend

    # session.Worker picks the backend's class; its methods are measured below
    Worker: type[Any] = PortableWorker
    if sys.platform == "linux" and backend() == "linux":
        from grader.pool.linux import LinuxWorker

        Worker = LinuxWorker

    zygote.warm_up()
    engine.grade(args.path)
    warm = []
    for _ in range(args.n):
        t = time.perf_counter()
        engine.grade(args.path)
        warm.append(time.perf_counter() - t)
    print(f"warm engine.grade: median {statistics.median(warm) * 1000:.0f} ms wall of {args.n}")

    worker_cpu = []
    phases: list[dict[str, float]] = []
    real_receive, real_hello = Worker.receive, Worker.hello

    def hello(self: Any, timeout: float) -> Any:  # measures, changes nothing
        doc = real_hello(self, timeout)
        if isinstance(doc, dict) and isinstance(doc.get("cpu"), dict):
            phases.append(doc["cpu"])
        return doc

    Worker.hello = hello  # type: ignore[method-assign]

    def receive(self: Any, timeout: float) -> tuple:  # measures, changes nothing
        tensors, doc = real_receive(self, timeout)
        if isinstance(doc, dict) and isinstance(doc.get("cpu"), float):
            self.last_cpu = doc["cpu"]
        return tensors, doc

    Worker.receive = receive  # type: ignore[method-assign]
    real_close = Worker.close

    def close(self: Any) -> None:
        worker_cpu.append(getattr(self, "last_cpu", 0.0))
        real_close(self)

    Worker.close = close  # type: ignore[method-assign]
    t = time.process_time()
    cols = [engine.collect(args.path) for _ in range(args.n)]
    collect_cpu = (time.process_time() - t) / args.n
    t = time.process_time()
    engine.judge(cols)
    judge_cpu = (time.process_time() - t) / args.n
    w = statistics.median(worker_cpu)
    print(f"CPU per submission: worker {w * 1000:.0f} ms + grader collect {collect_cpu * 1000:.0f} ms "
          f"+ judge {judge_cpu * 1000:.0f} ms = {(w + collect_cpu + judge_cpu) * 1000:.0f} ms")
    if phases:  # the worker's own account (process_time since the fork; its exit is not included)
        def med(f: Callable[[dict[str, float]], float]) -> float:
            return statistics.median(f(p) for p in phases) * 1000

        print(f"  worker: until set-up received {med(lambda p: p['forked']):.1f} ms, confine "
              f"{med(lambda p: p['confined'] - p['forked']):.1f} ms, import the submission "
              f"{med(lambda p: p['loaded'] - p['confined']):.1f} ms, run the probes "
              f"{w * 1000 - med(lambda p: p['loaded']):.1f} ms")


if __name__ == "__main__":
    main()
