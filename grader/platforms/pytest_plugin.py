"""The kata as pytest items, for `pytest --kata` and the test explorers of VS Code and PyCharm.

Registered through the `pytest11` entry point (`attn_kata`), it does nothing unless asked for: `--kata` on the
command line or `kata = true` in the ini file. Then every check of every step becomes one item, collected
under the step's file in the learner's workspace:

    exercises/step07_causal_mask.py::test_causal_mask[future positions get exactly zero weight]

Node ids use the checks' English names, whatever the language, so an IDE's list stays stable; the failure
message is the grader's, in the learner's language (`--kata-lang`, else the same default as `attn-kata`).

The workspace's code never runs in this process. At the first kata item, the selected steps are graded in one
`attn-kata grade --format json` run: its own process, with the learner's code in the sandboxed worker, so the
reference never enters a process that runs learner code (the learner's own tests and conftest run here), and
one worker serves the whole session instead of one per item. pytest's verdicts are for the learner: a conftest
can rewrite them, which is why GitHub Classroom grades with `attn-kata check`, not with this plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from grader import i18n, submission
from grader.i18n import N_
from grader.settings import DEFAULT_TIMEOUT

# the directory holding the grader package this plugin came from: `python -m grader` run there is this grader
PACKAGE_PARENT = Path(__file__).resolve().parent.parent.parent
PLUGIN_NAME = "attn_kata_session"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("attn-kata", "attention-kata: the kata's checks as pytest items")
    group.addoption("--kata", action="store_true", default=False,
                    help="Collect each check of each step of the workspace as a pytest item (or ini: kata = true).")
    group.addoption("--kata-path", default=None, help="The workspace (default: found from the rootdir or cwd).")
    group.addoption("--kata-lang", choices=["en", "zh"], default=None,
                    help="Language of the failure messages (default: as attn-kata, from the locale).")
    group.addoption("--kata-timeout", type=float, default=None,
                    help=f"Seconds allowed per step (default: {DEFAULT_TIMEOUT:g}).")
    parser.addini("kata", type="bool", default=False, help="Collect the kata's checks (as --kata).")
    parser.addini("kata_path", default="", help="The workspace, relative to the rootdir (as --kata-path).")


def enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("kata") or config.getini("kata"))


def pytest_configure(config: pytest.Config) -> None:
    if not enabled(config):
        return  # off unless asked for: our own suite and every other project see only the options
    from grader.learner.api import default_lang

    workspace = find_workspace(config)
    lang = config.getoption("kata_lang") or default_lang()
    timeout = config.getoption("kata_timeout") or DEFAULT_TIMEOUT
    config.pluginmanager.register(KataSession(workspace, lang, timeout), PLUGIN_NAME)
    if config.args_source != pytest.Config.ArgsSource.ARGS and not _covered(workspace, config.args):
        config.args.append(str(workspace))  # testpaths (or cwd) miss the workspace: collect it too


def _covered(path: Path, args: list[str]) -> bool:
    return any(path == Path(a).resolve() or Path(a).resolve() in path.parents for a in args)


def find_workspace(config: pytest.Config) -> Path:
    """--kata-path, the ini's kata_path, else the workspace search `attn-kata` uses."""
    given = config.getoption("kata_path")
    ini = config.getini("kata_path")
    if given or ini:
        path = Path(given) if given else config.rootpath / ini
        if not (submission.is_workspace(path) or submission.graded(path).is_file()):
            raise pytest.UsageError(i18n.translate(_lang(config), N_(
                "attn-kata: {path} holds none of the kata's step files")).format(path=path))
        return path.resolve()
    for start in (config.rootpath, Path.cwd()):
        found = _search(start)
        if found is not None:
            return found.resolve()
    raise pytest.UsageError(i18n.translate(_lang(config), N_(
        "attn-kata: no workspace found from {path}: run pytest in the kata's folder, or pass --kata-path")).format(
        path=config.rootpath))


def _search(start: Path) -> Path | None:
    """The workspace `attn-kata` finds from `start` (grader.submission.find_workspace: a folder marked by
    `attn-kata init`, or a checkout's exercises/, at or above it)."""
    try:
        return submission.find_workspace(start)
    except submission.NoWorkspace:
        return None


def _lang(config: pytest.Config) -> str:
    from grader.learner.api import default_lang

    return config.getoption("kata_lang") or default_lang()


def check_names() -> dict[str, list[str]]:
    """Each step's check names (the English msgids), in the order the report lists them: read from the checks'
    catalogue (grader.registry.catalogue), so that listing the tests (an IDE does it on every save) costs no torch
    import; imported as the grader does when the catalogue cannot be read or lacks a step."""
    from grader.registry import STEPS, catalogue

    declared = catalogue()
    names = {s.id: [c["title"] for c in declared.get(s.id, {}).get("checks", [])
                    if isinstance(c, dict) and isinstance(c.get("title"), str)] for s in STEPS}
    if all(names.values()):
        return names
    from grader import checks

    checks.load_all()  # public code (docs/design.md §7): no reference, no secret
    return {step: [c.name for c in specs] for step, specs in checks.CHECKS.items()}


class KataFailure(Exception):
    """A check the grader failed: its message is the whole failure report (no traceback of ours)."""


class KataSession:
    """The plugin while enabled: collects the step files, grades once, hands each item its verdict."""

    def __init__(self, workspace: Path, lang: str, timeout: float):
        self.workspace = workspace
        self.target = submission.graded(workspace).resolve()  # the step files, or `init --notebook`'s notebook
        self.lang = lang
        self.timeout = timeout
        self.names = check_names()
        self.steps: dict[str, dict[str, Any]] | None = None  # step id -> its part of the JSON report
        self.error = ""
        self.runs = 0
        self.seconds = 0.0

    def pytest_report_header(self) -> str:
        return f"attn-kata: {self.workspace} ({self.lang})"

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        from grader.registry import STEPS

        if self.target.is_file():  # a notebook: every step's checks under it
            if file_path.resolve() != self.target:
                return None
            steps = [s.id for s in STEPS]
        elif file_path.parent.resolve() == self.workspace:  # the file grading reads, under either name
            files, _both = submission.step_files(self.workspace)
            steps = [sid for sid, path in files.items() if path.name == file_path.name]
        else:
            return None
        if not steps:
            return None
        return StepFile.from_parent(parent, path=file_path, steps={s: self.names.get(s, []) for s in steps})

    def verdict(self, item: CheckItem) -> tuple[bool, str]:
        if self.steps is None and not self.error:
            wanted = [i.step_id for i in item.session.items if isinstance(i, CheckItem)]
            self._grade(list(dict.fromkeys(wanted)))
        if self.error:
            return False, self.error
        step = (self.steps or {}).get(item.step_id)
        if step is None or item.index >= len(step.get("checks", [])):
            return False, i18n.translate(self.lang, N_("the grader's report has no result for this check"))
        check = step["checks"][item.index]
        if len(step["checks"]) != len(self.names.get(item.step_id, [])) or check.get("name") != i18n.translate(
                self.lang, self.names[item.step_id][item.index]):  # never hand one check's verdict to another
            return False, i18n.translate(self.lang, N_("the grader's report has no result for this check"))
        if check.get("passed"):
            return True, ""
        message = check.get("message") or ""
        if step.get("status") in ("not_started", "error") and step.get("message"):
            message = step["message"]
        lines = [str(check.get("name", "")), message]
        with i18n.using(self.lang):
            label = i18n._("diagnosis: ")
        lines += [f"{label}{d.get('message', '')}" for d in step.get("diagnoses", [])]
        return False, "\n".join(lines)

    def _grade(self, steps: list[str]) -> None:
        """One `attn-kata grade --format json` run for every selected step."""
        cmd = [sys.executable, "-m", "grader", "--lang", self.lang, "grade", str(self.target), "--format", "json",
               "--timeout", f"{self.timeout:g}"]
        for s in steps:
            cmd += ["--step", s]
        self.runs += 1
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=PACKAGE_PARENT, capture_output=True, text=True, encoding="utf-8",
                                  timeout=120 + 2 * self.timeout * max(len(steps), 1), env=_grader_env())
            report = json.loads(proc.stdout) if proc.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            proc, report = None, None
            detail = str(exc)
        self.seconds = time.monotonic() - start
        if report is None:
            if proc is not None:
                detail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            self.error = i18n.translate(self.lang, N_("the grader could not grade {path}: {error}")).format(
                path=self.workspace, error=detail)
            return
        self.steps = {s["id"]: s for s in report.get("steps", [])}
        _record_progress(self.workspace, report)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.runs:
            terminalreporter.write_line(i18n.translate(self.lang, N_(
                "attn-kata: {steps} step(s) graded in {runs} run(s) of the sandboxed grader ({seconds:.1f} s)")).format(
                steps=len(self.steps or {}), runs=self.runs, seconds=self.seconds))


def _grader_env() -> dict[str, str]:
    """The grader's environment without pytest's own settings, which belong to the learner's session."""
    env = dict(os.environ)
    for k in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_CURRENT_TEST"):
        env.pop(k, None)
    return env


def _record_progress(workspace: Path, report: dict[str, Any]) -> None:
    """As `attn-kata check` does: `list` shows the progress and `solution` unlocks what was passed."""
    from grader.learner.api import record_progress
    from grader.report import Report, StepResult

    steps = [StepResult(s["id"], s.get("title", ""), s["score"], s["max_score"], s["status"])
             for s in report.get("steps", [])]
    record_progress(workspace, Report(report.get("submission", ""), steps))


class StepFile(pytest.File):
    """A step's file in the workspace (or the workspace's notebook, for every step): never imported here, only
    named; its items are the steps' checks."""

    def __init__(self, *, steps: dict[str, list[str]], **kwargs: Any):
        super().__init__(**kwargs)
        self.steps = steps  # step id -> its check names

    def collect(self) -> list[CheckItem]:
        items = []
        for step_id, names in self.steps.items():
            line = _definition_line(self.path, step_id)
            items += [CheckItem.from_parent(self, name=f"test_{step_id}[{name}]", step_id=step_id, index=i,
                                            line=line) for i, name in enumerate(names)]
        return items


def _definition_line(path: Path, step_id: str) -> int:
    """The 0-based line of the step's first public name, so an IDE opens the file there."""
    from grader.registry import BY_ID

    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return 0
    first = BY_ID[step_id].names[0]
    for i, text in enumerate(lines):  # in a notebook's JSON the definition is inside a string: found all the same
        if text.lstrip(' "').startswith((f"def {first}(", f"class {first}(", f"class {first}:")):
            return i
    return 0


class CheckItem(pytest.Item):
    """One check of one step; its verdict comes from the session's single grading run."""

    def __init__(self, *, step_id: str, index: int, line: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.step_id = step_id
        self.index = index
        self.line = line

    def runtest(self) -> None:
        session = self.config.pluginmanager.get_plugin(PLUGIN_NAME)
        assert session is not None, "the kata's pytest session is registered at configure"
        passed, message = session.verdict(self)
        if not passed:
            raise KataFailure(message)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, KataFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.line, self.name
