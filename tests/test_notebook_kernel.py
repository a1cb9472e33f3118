"""A learner's notebook in a real Jupyter kernel (jupyter_client + the venv's ipykernel), as Jupyter runs it.

Issue 25: the first check() in a fresh kernel waited for the zygote's torch import (3–9 s). Importing the grader in
a kernel starts the zygote at once, so it is ready by the time the learner has written a step; a script's import
starts nothing. benchmarks/bench_notebook.py measures the wait.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")
ZYGOTE = b"from grader.pool.zygote import main"


def zygotes_under(pid: int) -> list[int]:
    """The zygotes among `pid`'s children (the zygote leads a session of its own but keeps its parent)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            if ppid == pid and ZYGOTE in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


@pytest.fixture
def kernel():  # type: ignore[no-untyped-def]
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(ROOT))
    try:
        yield km, kc
    finally:
        km.shutdown_kernel(now=True)


def run(kc, code: str) -> list[dict]:  # type: ignore[no-untyped-def]
    outputs: list[dict] = []
    reply = kc.execute_interactive(code, timeout=180, output_hook=outputs.append)
    assert reply["content"]["status"] == "ok", reply["content"]
    return outputs


def test_importing_the_grader_in_a_kernel_starts_the_zygote_before_the_first_check(kernel) -> None:  # type: ignore[no-untyped-def]
    km, kc = kernel
    pid = km.provisioner.process.pid
    assert zygotes_under(pid) == []
    run(kc, "from grader import check")
    deadline = time.monotonic() + 10
    while not zygotes_under(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(zygotes_under(pid)) == 1  # started by the import, no check() has run


def test_the_first_check_in_a_kernel_shows_the_diagnosis_and_the_heatmap(kernel) -> None:  # type: ignore[no-untyped-def]
    km, kc = kernel
    run(kc, "from grader import check")
    run(kc, (ROOT / "tests" / "fixtures" / "buggy" / "mask_fill_zero.py").read_text(encoding="utf-8"))
    outputs = run(kc, 'r = check("causal_mask", lang="en")')
    shown = "".join(m["content"].get("data", {}).get("text/html", "") for m in outputs
                    if m["msg_type"] == "display_data")
    assert "⚑ diagnosis: " in shown and 'class="hm"' in shown and "next: step 7, causal_mask" in shown
    assert len(zygotes_under(km.provisioner.process.pid)) == 1  # the one the import started, reused


def test_a_script_importing_the_grader_starts_nothing() -> None:
    # its children, by the parent in /proc/<pid>/stat; a process that ends between the listing and the read (the
    # suite runs two files at a time) is no child of it
    code = ("import os, time, grader\ntime.sleep(0.5)\nn = 0\n"
            "for p in os.listdir('/proc'):\n"
            "    try:\n"
            "        n += p.isdigit() and open(f'/proc/{p}/stat', 'rb').read().rsplit(b')', 1)[1].split()[1] == "
            "str(os.getpid()).encode()\n"
            "    except OSError:\n"
            "        pass\n"
            "print(n)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "0", done
