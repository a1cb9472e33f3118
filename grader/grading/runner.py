"""Runs the checks under pytest, in this (trusted) process, with the grader's own configuration."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader import i18n
from grader.checks import CheckSpec, Failed, Outcome
from grader.i18n import N_, _
from grader.report import clean

CHECKS_DIR = Path(__file__).resolve().parent.parent / "checks"


Job = tuple[str, list[CheckSpec], Outcome]  # (key, the step's checks, what they look at)
Item = tuple[str, list[Job]]  # one pytest item: a submission and its steps' jobs


class KataPlugin:
    """One job per hook: parametrize the items, judge each item's checks, keep the verdicts.

    One pytest item per submission, not per step: pytest's own cost per item (~0.6 ms) would
    otherwise be a fifth of judging a class."""

    def __init__(self, items: list[Item]):
        self.items = items
        self.verdicts: dict[str, dict[str, tuple[bool, str]]] = {}

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "kata_item" in metafunc.fixturenames:
            metafunc.parametrize("kata_item", self.items, ids=[key for key, _jobs in self.items])

    @pytest.fixture
    def kata_judge(self) -> Any:
        return self.judge

    def judge(self, item: Item) -> None:
        failed = 0
        for key, specs, outcome in item[1]:
            with i18n.deferred():  # the checks word nothing: their messages are worded at the edge (Report.worded)
                failed += self._judge(key, specs, outcome)
        if failed:  # so pytest's own report of the item is truthful too; pytrace=False: no traceback, and
            # no repr of the arguments (tensors), which cost ~90 ms per failed item
            pytest.fail(f"{failed} check(s) failed", pytrace=False)

    def _judge(self, key: str, specs: list[CheckSpec], outcome: Outcome) -> int:
        verdicts = self.verdicts.setdefault(key, {})
        for spec in specs:
            try:
                spec.fn(outcome)
                verdicts[spec.key] = (True, "")
            except Failed as exc:
                verdicts[spec.key] = (False, clean(i18n.said(exc)))
            except Exception as exc:  # a check must explain itself; anything else is the grader's own bug
                verdicts[spec.key] = (False, clean(_("internal grader error: {exception}: {message}").format(
                    exception=type(exc).__name__, message=exc)))
        return sum(1 for ok, _msg in verdicts.values() if not ok)


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


def run_jobs(jobs: list[Job]) -> dict[str, dict[str, tuple[bool, str]]]:
    """Judge many (submission, step) jobs in one pytest session: job key -> check key -> (passed, message).
    A job key is `<submission>::<step>`; each submission is one pytest item."""
    if not jobs:
        return {}
    items: dict[str, list[Job]] = {}
    for job in jobs:
        items.setdefault(job[0].split("::", 1)[0], []).append(job)
    plugin = KataPlugin(list(items.items()))
    args = [str(CHECKS_DIR / "_entry.py"), "-c", str(CHECKS_DIR / "pytest.ini"), "--rootdir", str(CHECKS_DIR),
            "-p", "no:terminal"]
    with _isolated_env(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        pytest.main(args, plugins=[plugin])
    for key, specs, _outcome in jobs:  # a check pytest never ran (collection trouble) counts as failed, visibly
        for c in specs:
            plugin.verdicts.setdefault(key, {}).setdefault(
                c.key, (False, i18n.Text(("msg", N_("internal grader error: check did not run")))))
    return plugin.verdicts
