"""The processes a test started: found by /proc parent chains from the test process, so only our own count
(never another run's), and the one detector tests/test_hostile.py proves with a planted leftover."""

from __future__ import annotations

import os
from pathlib import Path


def descendants(root: int | None = None) -> dict[int, str]:
    """pid -> name of every process below `root` (default: this test process)."""
    root = os.getpid() if root is None else root
    parent: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                line = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            names[int(entry)] = line[line.index("(") + 1:line.rindex(")")]
            parent[int(entry)] = int(line.rsplit(")", 1)[1].split()[1])
    found = {}
    for pid in parent:
        p = parent.get(pid, 0)
        while p > 1:
            if p == root:
                found[pid] = names[pid]
                break
            p = parent.get(p, 0)
    return found


def leftovers() -> dict[int, str]:
    """Descendants other than the zygote itself (which lives as long as the test process)."""
    return {pid: name for pid, name in descendants().items() if name != "attn-zygote"}
