"""The one torch the kata is built and checked on (issue 38), and what the CLI says about the torch it finds.

`TORCH_PIN` is defined here and nowhere else: Gradescope's setup.sh, PrairieLearn's Dockerfile and GitHub
Classroom's workflow are generated from it; .ci/run reads it from this file; the README, CONTRIBUTING,
.github/workflows and the other .ci/ scripts name it, and tests/test_torch_pin.py fails when any tracked file
names another torch version. pyproject.toml's `torch>=2.2` is the floor the grader supports, not a pin.

Importable without torch, and never imports it: the CLI asks `missing_torch()` before the commands that need
torch, and `doctor` and `--version` ask `cuda_warning()`.
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


def torch_folder() -> Path | None:
    """Where `import torch` would come from, found without importing it (the CLI's own process never does)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def missing_torch() -> bool:
    """Is torch missing from this Python? (Found or not, without importing it.)"""
    return torch_folder() is None


def torch_cuda() -> str | None:
    """torch.version.cuda, read from torch/version.py without importing torch (seconds, and CUDA's libraries)."""
    import re

    folder = torch_folder()
    if folder is None:
        return None
    try:
        text = (folder / "version.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.search(r"^cuda\s*(?::[^=\n]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return m.group(1) if m else None


def has_gpu() -> bool:
    """Is there an NVIDIA GPU here? Its driver's device files on Linux, nvidia-smi elsewhere; never torch's CUDA
    initialisation. ATTN_KATA_ASSUME_NO_GPU=1 says there is none (the tests, on a machine that has one)."""
    import shutil

    if os.environ.get("ATTN_KATA_ASSUME_NO_GPU") == "1":
        return False
    if sys.platform == "linux":
        return Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia/version").exists()
    return shutil.which("nvidia-smi") is not None


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
    None otherwise (a CPU build, a GPU, or no torch)."""
    cuda = torch_cuda()
    if not cuda or has_gpu():
        return None
    return cuda, nvidia_bytes()


def cuda_warning() -> str | None:
    """The learner's warning about a CUDA build with no GPU to use it, or None."""
    from grader.i18n import _

    found = cuda_build_without_gpu()
    if found is None:
        return None
    cuda, size = found
    return _("warning: this torch is a CUDA build (CUDA {cuda}) and this machine has no NVIDIA GPU: its CUDA "
             "libraries take {size} for nothing. The kata needs only the CPU build: {command} (then "
             "`pip uninstall` the nvidia-* packages `pip list` shows)").format(
                 cuda=cuda, size=size_words(size), command=cpu_replace_command())


def missing_torch_message() -> str:
    """What the CLI says where torch is not installed."""
    from grader.i18n import _

    return _("torch is not installed in this Python ({python}). Install its CPU build first: {command} (where "
             "PyTorch's index cannot be reached, the README's \"PyTorch's index blocked?\" says how to install it "
             "from a local wheel or a mirror)").format(python=sys.executable, command=cpu_install_command())


def size_words(n: int) -> str:
    """Bytes in a short form: 5.5 GB, 730 MB."""
    if n >= 10**9:
        return f"{n / 10**9:.1f} GB"
    return f"{max(n, 0) // 10**6} MB"
