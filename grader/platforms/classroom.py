"""GitHub Classroom: the autograding workflow of a template repository (`attn-kata classroom init DIR`).

One `education/autograding-command-grader@v1` test per step, running `attn-kata check STEP` and worth that
step's points, then `education/autograding-grading-reporter@v1`, which reads each test's result from the
environment variable `<STEP ID IN CAPITALS>_RESULTS` and reports the total to GitHub Classroom.

Why the command grader and not the Python grader over the pytest plugin: the Python grader runs pytest in the
student's repository, where the student's own conftest.py and plugins run in the same process and can rewrite any
verdict; `attn-kata check` runs the student's code only in the sandboxed worker and decides in a process the
student's code never touches. The price is all-or-nothing per step (the command grader knows only exit codes);
Gradescope and PrairieLearn get one test per check.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import click

from grader import limits
from grader.cli_args import cannot_write, fail
from grader.i18n import _
from grader.platforms.container import chosen_lang
from grader.registry import STEPS
from grader.settings import IMPORT_ROOT, KATA_ROOT, grader_version
from grader.torch_pin import TORCH_CPU_INDEX, TORCH_PIN

WORKFLOW = Path(".github") / "workflows" / "classroom.yml"
TORCH_INDEX = TORCH_CPU_INDEX  # grader/torch_pin.py
# the workspace's path goes into a shell command line unquoted: only plain names
SAFE_PATH = re.compile(r"[A-Za-z0-9._/-]+")
STEP_MINUTES = limits.CLASSROOM_STEP_MINUTES  # the command grader's time-out per step, in minutes


class ClassroomError(Exception):
    """A usage problem, worded for the instructor (the CLI shows it on one line, exit 2)."""


def step_points() -> dict[str, float]:
    """Each step's points: the sum of its checks' (grader.checks; public code, no reference)."""
    from grader import checks

    checks.load_all()
    return {s.id: sum(c.points for c in checks.CHECKS[s.id]) for s in STEPS}


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is a subset of it)."""
    return json.dumps(text)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def workflow(*, path: str = "exercises", lang: str = "en", install: str | None = None,
             python: str = "3.11") -> str:
    """The text of .github/workflows/classroom.yml."""
    install = install or default_install()
    points = step_points()
    lines = [
        "# GitHub Classroom autograding for attention-kata, written by `attn-kata classroom init`.",
        "# One command-grader test per step (`attn-kata check STEP`, worth the step's points); the reporter sums them.",
        "name: Autograding Tests",
        '"on":',
        "  - push",
        "  - repository_dispatch",
        "permissions:",
        "  checks: write",
        "  actions: read",
        "  contents: read",
        "jobs:",
        "  run-autograding-tests:",
        "    name: Autograding Tests",  # the check run the reporter looks up by this name to post the points
        "    runs-on: ubuntu-latest",
        "    if: github.actor != 'github-classroom[bot]'",
        "    timeout-minutes: 30",
        "    steps:",
        "      - name: Checkout code",
        "        uses: actions/checkout@v4",
        "      - name: Set up Python",
        "        uses: actions/setup-python@v5",
        "        with:",
        f"          python-version: {_q(python)}",
        "      - name: Install torch (the CPU build, small and quick) and attention-kata",
        "        run: |",
        f"          python -m pip install torch=={TORCH_PIN} --index-url {TORCH_INDEX}",
        f"          python -m pip install {_q(install)}",
    ]
    for s in STEPS:
        lines += [
            f"      - name: {_q(f'{s.number}. {s.id}')}",
            f"        id: {s.id}",
            "        uses: education/autograding-command-grader@v1",
            "        with:",
            f"          test-name: {_q(f'{s.number}. {s.id}')}",
            f"          command: {_q(check_command(s.id, path=path, lang=lang))}",
            f"          timeout: {STEP_MINUTES}",
            f"          max-score: {_num(points[s.id])}",
        ]
    lines += [
        "      - name: Autograding Reporter",
        "        uses: education/autograding-grading-reporter@v1",
        "        env:",
        *[f"          {s.id.upper()}_RESULTS: \"${{{{steps.{s.id}.outputs.result}}}}\"" for s in STEPS],
        "        with:",
        f"          runners: {','.join(s.id for s in STEPS)}",
    ]
    return "\n".join(lines) + "\n"


def default_install(root: Path = IMPORT_ROOT) -> str:
    """What the workflow installs when `--install` is not given: the kata this command runs from, so that it works
    before the package is on PyPI. From a git checkout with a remote: that repository at this commit (or at the
    version's tag where the tag is this commit), as pip's `name @ git+URL@REV`; from a wheel whose metadata names
    its source repository: that repository at the version's tag; otherwise the registry's `attention-kata==V`."""
    version = grader_version()
    remote, commit, tagged = _git(root, "remote", "get-url", "origin"), _git(root, "rev-parse", "HEAD"), \
        _git(root, "rev-parse", f"v{version}^{{commit}}")
    url = _pip_git_url(remote) if remote and commit else None
    if url:
        return f"attention-kata @ git+{url}@{f'v{version}' if tagged and tagged == commit else commit}"
    source = _source_url()
    if source:
        return f"attention-kata @ git+{source}@v{version}"
    return f"attention-kata=={version}"


def _git(root: Path, *args: str) -> str:
    """A git answer about the checkout at `root` ("" where it is none, or git is missing)."""
    import subprocess

    if not (root / ".git").exists():
        return ""
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _pip_git_url(remote: str) -> str | None:
    """A remote as pip reads it after `git+`: https:// as is, `git@host:owner/repo` as ssh://git@host/owner/repo;
    a local path or anything else is no use on a runner."""
    if re.fullmatch(r"https://[^\s@]+", remote):
        return remote
    m = re.fullmatch(r"git@([\w.-]+):([\w./-]+)", remote)
    if m:
        return f"https://{m.group(1)}/{m.group(2)}"  # a runner has no ssh key: the same repository over https
    m = re.fullmatch(r"ssh://git@([\w.-]+)/([\w./-]+)", remote)
    return f"https://{m.group(1)}/{m.group(2)}" if m else None


def _source_url() -> str | None:
    """The source repository an installed wheel's metadata names (`[project.urls] Source`), if any."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        urls = metadata("attention-kata").get_all("Project-URL") or []
    except PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() in ("source", "repository") and re.fullmatch(r"https://[^\s@]+", url.strip()):
            return url.strip()
    return None


def check_command(step: str, *, path: str, lang: str) -> str:
    return f"attn-kata --lang {lang} check {step} --path {path}"


def init(directory: Path, *, path: str = "exercises", lang: str = "en", install: str | None = None,
         python: str = "3.11", force: bool = False) -> list[Path]:
    """Write DIRECTORY/.github/workflows/classroom.yml, and the stubs under DIRECTORY/PATH when it has none.
    Returns what was written."""
    from grader.submission import is_workspace

    out = directory / WORKFLOW
    if out.exists() and not force:
        raise ClassroomError(_("attn-kata: {path} exists (--force replaces it)").format(path=out))
    if not SAFE_PATH.fullmatch(path) or Path(path).is_absolute() or ".." in Path(path).parts:
        raise ClassroomError(_("attn-kata: --path {path} must be a folder inside the repository (letters, digits, "
                               "., _, - and /)").format(path=path))
    written = []
    workspace = directory / path
    if not is_workspace(workspace):
        workspace.mkdir(parents=True, exist_ok=True)
        for step in STEPS:
            shutil.copyfile(KATA_ROOT / "exercises" / step.file, workspace / step.file)
        written.append(workspace)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(workflow(path=path, lang=lang, install=install, python=python), encoding="utf-8")
    written.append(out)
    return written


# ---------------------------------------------------------------- `attn-kata classroom init`

@click.group("classroom")
def classroom_group() -> None:
    """GitHub Classroom: the autograding workflow of a template repository."""


@classroom_group.command("init")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False), default=".")
@click.option("--path", "workspace", default="exercises", show_default=True,
              help="The students' workspace inside the repository (the stubs are copied there if it has none).")
@click.option("--install", default=None, help="What the workflow pip-installs for attention-kata (default: "
              "this kata's git repository at this commit when run from a clone with a remote, else "
              "attention-kata==<this version> from PyPI; any pip requirement, e.g. a git URL).")
@click.option("--python", "python", default="3.11", show_default=True, help="Python version on the runner.")
@click.option("--force", is_flag=True, help="Replace an existing workflow.")
def init_command(directory: Path, workspace: str, install: str | None, python: str, force: bool) -> None:
    """Write DIRECTORY/.github/workflows/classroom.yml: one command-grader test per step, then the reporter."""
    if directory.exists() and not directory.is_dir():
        fail(_("attn-kata: {path} is not a directory").format(path=directory))
    try:
        written = init(directory, path=workspace, lang=chosen_lang(), install=install, python=python, force=force)
    except ClassroomError as exc:
        fail(str(exc))
    except OSError as exc:
        cannot_write(directory, exc)
    for path in written:
        click.echo(f"wrote {path}")
