"""Run a command and count what it costs, every process it starts included (a zygote, its workers, whatever
outlives the command): wall time until the command exits, CPU time of the whole tree, and the peak of the tree's
summed RSS (sampled every few ms).

This process makes itself a child subreaper (Linux), so a descendant that outlives its parent (the zygote, once the
command has exited) is re-parented here and reaped here: its CPU, and its own children's, then reach this process's
RUSAGE_CHILDREN. Used by bench_grade.py; `python benchmarks/counted.py CMD...` runs one command.
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "a benchmark of this Linux machine (benchmarks/RESULTS.md)"  # typed for Linux only

import contextlib
import ctypes
import os
import resource
import subprocess
import threading
import time
from dataclasses import dataclass, field

PR_SET_CHILD_SUBREAPER = 36
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Cost:
    wall: float  # seconds until the command exited
    cpu: float  # user + system seconds of every process of the tree
    peak_rss: int  # bytes: the largest sum of the tree's resident sets seen at one sample
    processes: int  # the most processes of the tree seen at one sample
    peak_pss: int = 0  # bytes: the same for proportional set sizes (a page shared by n processes counts 1/n each)
    # CPU seconds by process name (attn-zygote, attn-grade, attn-worker, python: the command itself), sampled: the
    # last reading of each process before it ended, so a few ms short of what it used in all
    by_name: dict[str, float] = field(default_factory=dict)


def _subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _tree(root: int) -> list[int]:
    """`root`'s descendants now (itself included), by the parent of every process in /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _cpu_by_pid(pids: list[int], seen: dict[int, tuple[str, float]]) -> None:
    """Each process's name and CPU seconds so far (its own, not its reaped children's), into `seen`."""
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
            name = data[data.index(b"(") + 1:data.rindex(b")")].decode(errors="replace")
            fields = data.rsplit(b")", 1)[1].split()
            seen[pid] = (name, (int(fields[11]) + int(fields[12])) / TICK)


def _rss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{pid}/statm", "rb") as f:
            total += int(f.read().split()[1]) * PAGE
    return total


def _pss(pids: list[int]) -> int:
    """What the tree's memory really holds: pages shared after a fork are counted once in all (what a container's
    memory limit counts), where summed RSS counts them in every process that maps them."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
    return total


def run(cmd: list[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
        interval: float = 0.005) -> Cost:
    """Run `cmd` (its output discarded, a failure raised) and count its cost, every descendant included."""
    _subreaper()
    me = os.getpid()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak, pss, most, done = 0, 0, 0, threading.Event()
    seen: dict[int, tuple[str, float]] = {}

    def sample() -> None:
        nonlocal peak, pss, most
        while not done.is_set():
            pids = [p for p in _tree(me) if p != me]
            peak, pss, most = max(peak, _rss(pids)), max(pss, _pss(pids)), max(most, len(pids))
            _cpu_by_pid(pids, seen)
            time.sleep(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t
    while True:  # what outlived it (the zygote, once its primary connection closed) ends here
        try:
            os.wait()
        except ChildProcessError:
            break
    done.set()
    sampler.join()
    if proc.returncode:
        raise RuntimeError(f"{cmd} exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    by_name: dict[str, float] = {}
    for name, used in seen.values():
        by_name[name] = by_name.get(name, 0.0) + used
    return Cost(wall, cpu, peak, most, pss, by_name)


if __name__ == "__main__":
    c = run(sys.argv[1:])
    print(f"wall {c.wall:.2f} s, cpu {c.cpu:.2f} s, peak summed RSS {c.peak_rss / 2**20:.0f} MiB, PSS "
          f"{c.peak_pss / 2**20:.0f} MiB ({c.processes} processes at most)")
    print("  CPU by process (sampled): " + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(c.by_name.items())))
