"""`attn-kata doctor` claims a layer only when an attack inside a real worker confirms it."""

from __future__ import annotations

import subprocess
import sys

from grader.doctor import diagnose


def test_every_claimed_layer_is_verified_by_an_attack() -> None:
    rows = diagnose()
    assert len(rows) >= 8
    for name, claimed, verified, _ in rows:
        if claimed:
            assert verified, f"{name}: claimed by the worker but the attack got through"
    # whatever this machine offers, the always-on layers are there
    active = {name for name, claimed, verified, _ in rows if claimed and verified}
    assert {"session", "private dir", "clean env", "memory limit (RLIMIT_AS)", "no core dumps"} <= active


def test_doctor_cli_prints_the_table() -> None:
    out = subprocess.run([sys.executable, "-m", "grader", "doctor"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "worker confinement" in out.stdout
    assert "attack tried" in out.stdout
