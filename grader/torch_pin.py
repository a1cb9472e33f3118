"""The one torch the kata is built and checked on (issue 38), and what the CLI says about the torch it finds.

`TORCH_PIN` is defined here and nowhere else: Gradescope's setup.sh, PrairieLearn's Dockerfile and GitHub
Classroom's workflow are generated from it; .ci/run reads it from this file; the README, CONTRIBUTING,
.github/workflows and the other .ci/ scripts name it, and tests/test_torch_pin.py fails when any tracked file
names another torch version. pyproject.toml's `torch>=2.2` is the floor the grader supports, not a pin.

Importable without torch: the CLI asks `missing_torch()` before the commands that need it, and `doctor` and
`--version` ask `cuda_build_without_gpu()`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

TORCH_PIN = "2.13.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# pip gives up on an unreachable source after one retry of 15 s, not five with back-off (minutes)
PIP_FAIL_FAST = "--retries 1 --timeout 15"


def cpu_install_command() -> str:
    """The command that installs the CPU build of the pinned torch into this Python."""
    return f"{_python()} -m pip install torch=={TORCH_PIN} --index-url {TORCH_CPU_INDEX}"


def cpu_replace_command() -> str:
    """The command that replaces a CUDA build with the CPU build (the nvidia-* wheels stay until removed)."""
    return (f"{_python()} -m pip install --force-reinstall --no-deps torch=={TORCH_PIN} "
            f"--index-url {TORCH_CPU_INDEX}")


def _python() -> str:
    exe = sys.executable or "python"
    return "python" if not exe or " " in exe else exe


def missing_torch() -> str | None:
    """None where torch imports; otherwise why not, in a line (the exception's own words)."""
    try:
        import torch  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install's OSError (a missing shared library)
        return f"{type(exc).__name__}: {exc}"
    return None


def has_gpu() -> bool:
    """Is there an NVIDIA GPU here (its device files, or torch's own answer where it can give one cheaply)?"""
    if os.environ.get("ATTN_KATA_ASSUME_NO_GPU") == "1":  # tests: the machine has no GPU, whatever it has
        return False
    if sys.platform == "linux" and Path("/dev/nvidiactl").exists():
        return True
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def nvidia_bytes() -> int:
    """What the CUDA build's nvidia-* and triton distributions take on disk, from their installed file lists."""
    from importlib.metadata import distributions

    total = 0
    for dist in distributions():
        name = (dist.metadata["Name"] or "").lower()
        if not (name.startswith("nvidia-") or name == "triton"):
            continue
        for f in dist.files or ():
            with contextlib.suppress(OSError):
                total += Path(str(dist.locate_file(f))).stat().st_size
    return total


def cuda_build_without_gpu() -> tuple[str, int] | None:
    """(torch's CUDA version, the bytes its CUDA wheels take) where torch is a CUDA build and there is no GPU here;
    None otherwise (a CPU build, a GPU, or no torch). Reads torch.version.cuda without initialising CUDA."""
    try:
        import torch
    except Exception:
        return None
    cuda = getattr(getattr(torch, "version", None), "cuda", None)
    if not cuda or has_gpu():
        return None
    return str(cuda), nvidia_bytes()


def size_words(n: int) -> str:
    """Bytes in a short form: 5.5 GB, 730 MB."""
    if n >= 10**9:
        return f"{n / 10**9:.1f} GB"
    return f"{max(n, 0) // 10**6} MB"
