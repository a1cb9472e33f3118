"""The suite's own bookkeeping (tests/conftest.py): the markers name real modules and tests, and the machine factor
by which wall-clock bounds are scaled is measured, not assumed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import conftest
import machine
import tomllib

TESTS = Path(__file__).resolve().parent


def _tests_of(module: str) -> set[str]:
    tree = ast.parse((TESTS / f"{module}.py").read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_marked_module_and_test_exists() -> None:
    for module in conftest.SLOW_MODULES | conftest.SANDBOX_MODULES:
        assert (TESTS / f"{module}.py").is_file(), module
    for entry in conftest.SLOW_TESTS:
        module, test = entry.split("::")
        assert test.split("[")[0] in _tests_of(module), f"SLOW_TESTS: {entry} names no test"
    assert not {e.split("::")[0] for e in conftest.SLOW_TESTS} & conftest.SLOW_MODULES  # one or the other


def test_the_markers_are_registered() -> None:
    config = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))
    markers = {re.match(r"\w+", m).group(0) for m in config["tool"]["pytest"]["ini_options"]["markers"]}  # type: ignore[union-attr]
    assert {"slow", "sandbox", "strong_gate"} <= markers


def test_the_machine_factor_is_measured_and_bounded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("ATTN_KATA_TEST_FACTOR", raising=False)
    machine.factor.cache_clear()
    try:
        measured = machine.factor()
        assert 1.0 <= measured <= machine.MAX_FACTOR
        assert machine.scaled(2.0) == 2.0 * measured
        monkeypatch.setenv("ATTN_KATA_TEST_FACTOR", "3")
        machine.factor.cache_clear()
        assert machine.scaled(2.0) == 6.0
        monkeypatch.setenv("ATTN_KATA_TEST_FACTOR", "0.2")  # a faster machine keeps the bounds as written
        machine.factor.cache_clear()
        assert machine.factor() == 1.0
    finally:
        machine.factor.cache_clear()
