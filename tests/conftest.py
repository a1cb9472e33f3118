"""The suite grades in-process, as it always has: the warm background grader (grader/daemon) is off for every
test by default, so no test leaves a daemon running for 10 minutes after the session, nor shares one with
another test or with the developer. tests/test_daemon.py turns it on for its own commands, each test with a
runtime folder (and so a daemon) of its own, stopped at the test's end.

The `sandbox` marker (pyproject.toml) selects the tests that prove the worker's confinement; .ci/setups.sh runs
`pytest -m sandbox` again as root with a world-readable Python and as a non-root user. A module named in
SANDBOX_MODULES is marked here too, whether or not it says `pytestmark = pytest.mark.sandbox` itself, so a new
sandbox test file cannot drop out of those set-ups by forgetting the line.

A grader that is not root cannot give its workers a private tmpfs (it needs a mount namespace): `attn-kata doctor`
reports that row missing and grading with a secret refuses on such a host (docs/design.md §3). There the sandbox
tests that grade with a secret, to prove that it never reaches a worker or a report, run under the instructor's
waiver (ATTN_KATA_ALLOW_WEAK_SANDBOX=1), so every attack still meets every other layer; the tests marked
`strong_gate` (the refusal itself) never get the waiver, and test_doctor requires every other needed row active.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import machine
import pytest

os.environ["ATTN_KATA_NO_DAEMON"] = "1"  # inherited by every `attn-kata` a test runs with the default environment

SANDBOX_MODULES = {"test_attacks", "test_hostile", "test_doctor", "test_standins", "test_seccomp", "test_worker_uid"}
# the needs (doctor rows of the same name) that only a root grader can meet; missing by design for any other.
# None today: where a grader that is not root can mount no tmpfs, Landlock lets its workers write no file at all
ROOT_ONLY: frozenset[str] = frozenset()
LACKS_BY_DESIGN = frozenset() if os.geteuid() == 0 else ROOT_ONLY
WAIVER = "ATTN_KATA_ALLOW_WEAK_SANDBOX"


# `pytest -n 2 --dist loadfile -m "not slow"`: a developer's quick loop (CONTRIBUTING.md: its time and load); CI runs
# everything.
# Slow are the modules that start real graders, daemons, notebooks or platforms again and again (each over 30 s
# here; the red team's confinement tests also run in `pytest -m sandbox`, which a sandbox change should), and in
# the other modules the tests named in SLOW_TESTS (each over about 8 s: a cold `attn-kata` process,
# a notebook in a real kernel, `watch` in a terminal, every fixture regraded). tests/test_suite.py fails on an entry
# that names no test, so that a renamed test cannot leave the list quietly.
SLOW_MODULES = {"test_platforms", "test_doctor", "test_secrets", "test_daemon", "test_batch", "test_nbgrader",
                "test_class_folder", "test_forked", "test_i18n", "test_packaging", "test_gradebook", "test_hostile",
                "test_attacks", "test_redteam", "test_pytest_plugin", "test_platform_scripts", "test_watch",
                "test_notebook_kernel"}
SLOW_TESTS = {  # module::test (every parametrization) or module::test[id]
    "test_cli::test_grade_solutions_full_marks_and_exercises_not_started",  # the README's command, cold, as a process
    "test_cli::test_grade_cases_per_upload",
    "test_init::test_init_notebook_runs_and_check_grades_it",
    "test_init::test_notebook_check_replays_without_its_own_calls",
    "test_init::test_watch_in_a_notebook_workspace_grades_the_notebook",
    "test_first_contact::test_watch_reads_single_keys_and_n_skips_passed_steps",
    "test_first_contact::test_watch_reads_lines_where_stdin_is_not_a_terminal",
    "test_fixtures::test_no_failing_message_is_the_graders_trust_reasoning",  # every buggy fixture, twice
    "test_golden::test_golden_files",  # three submissions graded twice and a batch, compared byte for byte
    "test_classroom::test_every_command_runs_on_a_solved_and_an_unsolved_workspace",
    "test_gradescope::test_answers_learned_from_earlier_attempts_are_no_use",
    # 3 terms' secrets in the quick loop (each new secret computes the reference's answers again), 12 in CI
    *(f"test_fixtures::test_dropout_average_across_secrets[{term}]" for term in range(3, 12)),
}


# One step's tests, `pytest -m step09` (or `-m causal_attention`): the tests whose parametrisation names the step (its
# id, `step09`, its file), a fixture or an attack that grades it (tests/fixtures/expected.json, the public names a
# correct fixture defines, tests/attacks/*/expected.toml), or whose own name holds the step's id as whole words
# (test_dropout_average_across_secrets). A marker per step, `stepNN` and the step's id, registered below.
def _step_words() -> dict[str, set[str]]:
    """Every word (a parametrisation's id part) that names steps -> those step ids."""
    import ast
    import json

    from grader.registry import STEPS

    words: dict[str, set[str]] = {}
    for step in STEPS:
        for word in (step.id, f"step{step.number:02d}", Path(step.file).stem, Path(step.file).name):
            words.setdefault(word, set()).add(step.id)
    here = Path(__file__).resolve().parent
    expected = json.loads((here / "fixtures" / "expected.json").read_text(encoding="utf-8"))
    for fixture, steps in expected.items():
        if not fixture.startswith("_") and isinstance(steps, dict):  # the steps its bug costs points
            words.setdefault(fixture, set()).update(s for s, e in steps.items() if e.get("status") != "passed")
    by_name = {name: step.id for step in STEPS for name in step.names}
    for path in (here / "fixtures" / "correct").iterdir():
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        sources = []
        for f in files:
            text = f.read_text(encoding="utf-8")
            if f.suffix == ".ipynb":
                sources += ["".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "code"]
            elif f.suffix == ".py":
                sources.append(text)
        for source in sources:
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            words.setdefault(path.name, set()).update(by_name[n] for n in defined if n in by_name)
    try:
        import tomllib
    except ImportError:  # Python 3.10: no attack is marked by its step (test_attacks itself needs 3.11)
        return words
    for toml in (here / "attacks").glob("*/expected.toml"):
        steps = tomllib.loads(toml.read_text(encoding="utf-8")).get("steps", [])
        words.setdefault(toml.parent.name, set()).update(s for s in steps if isinstance(s, str))
    return words


def _steps_of(item: pytest.Item, words: dict[str, set[str]], ids: list[str]) -> set[str]:
    found: set[str] = set()
    callspec = getattr(item, "callspec", None)
    for part in callspec.id.split("-") if callspec is not None else []:
        found |= words.get(part, set())
    name = f"_{getattr(item, 'originalname', None) or item.name}_"
    return found | {step for step in ids if f"_{step}_" in name}


def pytest_configure(config: pytest.Config) -> None:
    from grader.registry import STEPS

    for step in STEPS:
        for marker in (f"step{step.number:02d}", step.id):
            config.addinivalue_line("markers", f"{marker}: the tests of step {step.number}, {step.id} "
                                    "(tests/conftest.py _steps_of)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from grader.registry import BY_ID, STEPS

    words, ids = _step_words(), [s.id for s in STEPS]
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
        if module in SANDBOX_MODULES:
            item.add_marker(pytest.mark.sandbox)
        name = getattr(item, "originalname", None) or item.name
        if module in SLOW_MODULES or {f"{module}::{name}", f"{module}::{item.name}"} & SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        for step in sorted(_steps_of(item, words, ids)):
            item.add_marker(getattr(pytest.mark, f"step{BY_ID[step].number:02d}"))
            item.add_marker(getattr(pytest.mark, step))


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = [f"wall-clock bounds x{machine.factor():.1f} (tests/machine.py: this machine now against the reference)"]
    if LACKS_BY_DESIGN:
        lines.append(f"uid {os.geteuid()} (not root): lacks by design {sorted(LACKS_BY_DESIGN)}; sandbox tests that "
                     f"grade with a secret run under {WAIVER}=1, except those marked strong_gate")
    return lines


@pytest.fixture(scope="session")
def scaled() -> Callable[[float], float]:
    """`scaled(seconds)`: a wall-clock bound written for the reference machine, for this one (tests/machine.py)."""
    return machine.scaled


@pytest.fixture(scope="session")
def lacks_by_design() -> frozenset[str]:
    """The needed rows this set-up lacks by design (a grader that is not root: its workers get no private tmpfs)."""
    return LACKS_BY_DESIGN


def _waived(on: bool) -> Iterator[None]:
    before = os.environ.get(WAIVER)
    if on:
        os.environ[WAIVER] = "1"
    else:
        os.environ.pop(WAIVER, None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(WAIVER, None)
        else:
            os.environ[WAIVER] = before


@pytest.fixture(scope="module", autouse=True)
def _waiver_for_the_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """Module-scoped fixtures (test_attacks's reports) grade before any function fixture runs."""
    marked = any(m.name == "sandbox" for m in getattr(request.node, "own_markers", []))
    name = request.node.name.rsplit("/", 1)[-1].removesuffix(".py")
    yield from _waived(bool(LACKS_BY_DESIGN) and (marked or name in SANDBOX_MODULES))


@pytest.fixture(autouse=True)
def _waiver_for_the_test(request: pytest.FixtureRequest) -> Iterator[None]:
    node = request.node
    on = bool(LACKS_BY_DESIGN) and node.get_closest_marker("sandbox") is not None
    yield from _waived(on and node.get_closest_marker("strong_gate") is None)


@pytest.fixture
def public_tmp() -> Iterator[Path]:
    """A fresh folder every uid may search (0755), as a platform's /autograder or /grade is. pytest's tmp_path lies in
    a 0700 folder, from which a root grader's worker (nobody) can import the kata only through a mount namespace of
    its own, which a container without CAP_SYS_ADMIN cannot make (.ci/setups.sh's Docker emulation)."""
    folder = Path(tempfile.mkdtemp(prefix="attn-kata-public-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def autograder_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Gradescope autograder zip, built once (test_gradescope, test_platform_scripts)."""
    out = tmp_path_factory.mktemp("build") / "autograder.zip"
    proc = subprocess.run([sys.executable, "-m", "grader", "gradescope", "build", "--out", str(out)],
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out
