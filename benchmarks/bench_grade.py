"""How long grading one submission takes, cold and warm, and where the CPU goes.

    python benchmarks/bench_grade.py [-n 10] [PATH]

- cold: `attn-kata grade PATH --format json` as a fresh process (imports torch, starts the zygote);
- warm: engine.grade() in a process that has already graded once (what `watch` and `batch` see);
- split: the worker's CPU (reported by the worker itself), the trusted side's CPU for collecting
  and for judging (pytest), per submission.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=str(ROOT / "solutions"))
    ap.add_argument("-n", type=int, default=10)
    args = ap.parse_args()

    cold = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "grader", "grade", args.path, "--format", "json"], check=True,
                       capture_output=True, cwd=ROOT)
        cold.append(time.perf_counter() - t)
    print(f"cold `attn-kata grade` (fresh process): median {statistics.median(cold):.2f} s of {len(cold)}")

    from grader.grading import engine
    from grader.pool import zygote
    from grader.pool.session import Worker

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

    def hello(self: Worker, timeout: float) -> Any:  # measures, changes nothing
        doc = real_hello(self, timeout)
        if isinstance(doc, dict) and isinstance(doc.get("cpu"), dict):
            phases.append(doc["cpu"])
        return doc

    Worker.hello = hello  # type: ignore[method-assign]

    def receive(self: Worker, timeout: float) -> tuple:  # measures, changes nothing
        tensors, doc = real_receive(self, timeout)
        if isinstance(doc, dict) and isinstance(doc.get("cpu"), float):
            self.last_cpu = doc["cpu"]
        return tensors, doc

    Worker.receive = receive  # type: ignore[method-assign]
    real_close = Worker.close

    def close(self: Worker) -> None:
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
