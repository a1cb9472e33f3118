"""Where the benchmark scripts write their figures: benchmarks/RESULTS.md (one section per script, replaced in
place, with the date, the load average and the machine) and the README's short table of current figures (one row
per figure, between `<!-- figures:start -->` and `<!-- figures:end -->`, kept in the order rows were first written).

    record("bench_grade", lines, figures={"cold grade, CPU vs import torch": "1.45x"})

Pass `--no-record` to a script to leave both files alone (a trial run).
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "a benchmark of this Linux machine (benchmarks/RESULTS.md)"  # typed for Linux only

import datetime
import os
import platform
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
README = HERE.parent / "README.md"
START, END = "<!-- figures:start -->", "<!-- figures:end -->"
HEADER = ("# Benchmark results\n\nWritten by the scripts in benchmarks/ (each replaces its own section when it runs; "
          "`--no-record` leaves this file alone). Wall times move with the machine's load; CPU counts every "
          "process a command starts.\n")


def enabled() -> bool:
    return "--no-record" not in sys.argv


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def _replace_section(text: str, name: str, body: str) -> str:
    """`text` with the section `## name` (up to the next `## ` heading) replaced by `body`, or `body` appended."""
    pattern = re.compile(rf"^## {re.escape(name)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        return pattern.sub(lambda _m: body, text, count=1)
    return text.rstrip("\n") + "\n\n" + body


def _rows(block: str) -> dict[str, tuple[str, str]]:
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("Figure", "") and not set(cells[0]) <= {"-", ":"}:
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def record(script: str, lines: list[str], figures: dict[str, str] | None = None) -> None:
    """Write `lines` as `script`'s section of RESULTS.md and `figures` (name -> value) into the README's table."""
    if not enabled():
        return
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = (f"## {script}\n\n{stamp}; load average (1, 5, 15 min) at the end: {load()}; {machine()}\n"
            f"`python benchmarks/{script.split()[0]}.py {' '.join(a for a in sys.argv[1:] if a != '--no-record')}`"
            f"\n\n```\n" + "\n".join(lines) + "\n```\n\n")
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else HEADER
    RESULTS.write_text(_replace_section(text, script, body).rstrip("\n") + "\n", encoding="utf-8")
    if figures:
        readme(script, figures, stamp[:10])


def readme(script: str, figures: dict[str, str], date: str) -> None:
    """Update (or add) these rows of the README's figures table; every other row stays as it was."""
    text = README.read_text(encoding="utf-8")
    if START not in text or END not in text:
        return  # the README has no figures block: RESULTS.md holds them
    head, rest = text.split(START, 1)
    block, tail = rest.split(END, 1)
    rows = _rows(block)
    for name, value in figures.items():
        rows[name] = (value, f"`{script.split()[0]}.py`, {date}, load {os.getloadavg()[0]:.1f}")
    table = ["", "| Figure | Now | Measured by |", "|---|---|---|"]
    table += [f"| {name} | {value} | {source} |" for name, (value, source) in rows.items()]
    table.append("")
    README.write_text(head + START + "\n".join(table) + "\n" + END + tail, encoding="utf-8")
