"""The CLI where torch is missing or is the wrong build (issue 38): a missing torch is named with the command that
installs its CPU build, not a traceback; a CUDA build on a machine with no GPU is warned about by `--version` and
`doctor`, with the size its CUDA wheels took and the command that replaces it.

The CUDA build is a fake put first on PYTHONPATH: a `torch` package whose version.py says `cuda = '12.8'` (what
the CLI reads; it never imports torch) and an installed `nvidia-cublas-cu12` distribution with a 3 MB file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from grader.torch_pin import TORCH_CPU_INDEX, TORCH_PIN

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "grader"]


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "ATTN_KATA_NO_DAEMON": "1", "ATTN_KATA_LANG": "en", "COLUMNS": "200", **extra}


def fake_cuda_torch(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("raise ImportError('a fake: the CLI must not import torch')\n")
    (site / "torch" / "version.py").write_text("from typing import Optional\n__version__ = '2.13.0'\n"
                                               "cuda: Optional[str] = '12.8'\n")
    (site / "nvidia" / "cublas" / "lib").mkdir(parents=True)
    (site / "nvidia" / "cublas" / "lib" / "libcublas.so.12").write_bytes(b"\0" * 3_000_000)
    info = site / "nvidia_cublas_cu12-12.8.4.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cublas-cu12\nVersion: 12.8.4.1\n")
    (info / "RECORD").write_text("nvidia/cublas/lib/libcublas.so.12,,3000000\n"
                                 "nvidia_cublas_cu12-12.8.4.1.dist-info/METADATA,,\n")
    return site


def test_version_warns_about_a_cuda_build_without_a_gpu(tmp_path: Path) -> None:
    site = fake_cuda_torch(tmp_path)
    proc = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env=env(PYTHONPATH=f"{site}{os.pathsep}{ROOT}", ATTN_KATA_ASSUME_NO_GPU="1"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("attn-kata, version ")
    err = " ".join(proc.stderr.split())
    assert "CUDA build (CUDA 12.8)" in err and "no NVIDIA GPU" in err and "take 3 MB" in err, err
    assert f"torch=={TORCH_PIN} --index-url {TORCH_CPU_INDEX}" in err and "--force-reinstall" in err


def test_version_is_quiet_about_the_cpu_build() -> None:
    proc = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=60, env=env())
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


def test_doctor_warns_about_a_cuda_build_without_a_gpu(tmp_path: Path) -> None:
    site = fake_cuda_torch(tmp_path)
    # the portable backend's doctor: no worker to prove the sandbox with, so the fake torch is never imported
    proc = subprocess.run([*CLI, "doctor"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env=env(PYTHONPATH=f"{site}{os.pathsep}{ROOT}", ATTN_KATA_ASSUME_NO_GPU="1",
                                  ATTN_KATA_BACKEND="portable"))
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert out.startswith("warning: this torch is a CUDA build (CUDA 12.8)") and "take 3 MB" in out, out
    assert "backend: portable" in out


def test_the_size_is_what_the_nvidia_distributions_hold(tmp_path: Path) -> None:
    from grader import torch_pin

    site = fake_cuda_torch(tmp_path)
    sys.path.insert(0, str(site))
    try:
        assert 3_000_000 <= torch_pin.nvidia_bytes() < 3_001_000  # the library and its METADATA, from RECORD
    finally:
        sys.path.remove(str(site))
    assert torch_pin.size_words(5_500_000_000) == "5.5 GB" and torch_pin.size_words(730_400_000) == "730 MB"


def test_a_missing_torch_is_named_with_the_command_that_installs_it(tmp_path: Path) -> None:
    # this Python, as if torch were not installed: a finder ahead of the others answers that there is none
    code = ("import sys\n"
            "class NoTorch:\n"
            "    @staticmethod\n"
            "    def find_spec(name, path=None, target=None):\n"
            "        if name == 'torch' or name.startswith('torch.'): raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, NoTorch)\n"
            "from grader.cli import main; main()\n")
    for argv in (["check"], ["doctor"]):
        proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path, env=env())
        assert proc.returncode == 3, (argv, proc.stdout, proc.stderr)
        err = " ".join(proc.stderr.split())
        assert "Traceback" not in proc.stderr and "torch is not installed" in err, err
        assert f"-m pip install torch=={TORCH_PIN} --index-url {TORCH_CPU_INDEX}" in err
