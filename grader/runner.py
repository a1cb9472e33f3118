"""Runs the checks under pytest, in this (trusted) process, with the grader's own configuration."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .checks import CheckSpec, Failed, Outcome
from .report import clean

CHECKS_DIR = Path(__file__).resolve().parent / "checks"


class KataPlugin:
    """One job per hook: parametrize the checks, provide each its outcome, record each verdict."""

    def __init__(self, checks: list[CheckSpec], outcomes: dict[str, Outcome]):
        self.checks = checks
        self.outcomes = outcomes
        self.verdicts: dict[str, tuple[bool, str]] = {}

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "kata_check" in metafunc.fixturenames:
            metafunc.parametrize("kata_check", self.checks, ids=[c.key for c in self.checks])

    @pytest.fixture
    def kata_outcome(self, kata_check: CheckSpec) -> Outcome:
        return self.outcomes[kata_check.step]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        report = yield
        if call.when == "call":
            spec: CheckSpec = item.callspec.params["kata_check"]  # type: ignore[attr-defined]
            exc = call.excinfo.value if call.excinfo else None
            if exc is None:
                self.verdicts[spec.key] = (True, "")
            elif isinstance(exc, Failed):
                self.verdicts[spec.key] = (False, clean(str(exc)))
            else:  # a check must explain itself; anything else is the grader's own bug
                self.verdicts[spec.key] = (False, clean(f"internal grader error: {type(exc).__name__}: {exc}"))
        return report


@contextlib.contextmanager
def _isolated_env() -> Iterator[None]:
    """No plugin autoload and no PYTEST_ADDOPTS from the environment of whoever runs the grader."""
    saved = {k: os.environ.get(k) for k in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    os.environ.pop("PYTEST_ADDOPTS", None)
    os.environ.pop("PYTEST_PLUGINS", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_checks(checks: list[CheckSpec], outcomes: dict[str, Outcome]) -> dict[str, tuple[bool, str]]:
    """Run the given checks; returns check key -> (passed, message)."""
    if not checks:
        return {}
    plugin = KataPlugin(checks, outcomes)
    args = [str(CHECKS_DIR / "_entry.py"), "-c", str(CHECKS_DIR / "pytest.ini"), "--rootdir", str(CHECKS_DIR),
            "-p", "no:terminal", "-W", "ignore"]
    with _isolated_env(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        pytest.main(args, plugins=[plugin])
    for c in checks:  # a check pytest never ran (collection trouble) counts as failed, visibly
        plugin.verdicts.setdefault(c.key, (False, "internal grader error: check did not run"))
    return plugin.verdicts
