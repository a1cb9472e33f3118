"""nbgrader's build: the chapter as an nbgrader *source* notebook, and the hidden test helper its cells call.

- `build_assignment()` writes per step a bilingual markdown cell, a solution cell (from solutions/, with
  ### BEGIN/END SOLUTION inside every function body) and an autograded test cell worth the step's points whose
  hidden part calls `assert_step`.
- `assert_step(step, globals())` runs inside the learner's kernel (nbgrader autograde / validate): it
  writes the code the kernel has executed so far to a temporary notebook and grades it with the sandboxed
  engine, so the learner's functions run in a forked worker, not beside the checks. It returns the step's
  score (nbgrader reads a numeric result as partial credit) and raises when the step earns nothing.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grader import katafile
from grader.i18n import step_title
from grader.learner.kernel import grade_sources, kernel_sources
from grader.registry import BY_ID, BY_MODULE, STEPS, Step
from grader.settings import KATA_ROOT

ROOT = KATA_ROOT
SOLUTIONS = ROOT / "solutions"
NOTEBOOK_NAME = "attention"  # the source notebook's name (without .ipynb)
TEST_PREFIX = "test_"
SCHEMA = 3

def step_points(step_id: str) -> float:
    from grader import checks

    checks.load_all()
    return float(sum(c.points for c in checks.CHECKS[step_id]))


def failure_text(step_result: Any) -> str:
    if step_result.status in ("not_started", "error") and step_result.message:
        return f"{step_result.id}: {step_result.status.replace('_', ' ')}: {step_result.message}"
    lines = [f"{step_result.id}: {step_result.score:g}/{step_result.max_score:g}"]
    lines += [f"  ✗ {c.name}: {c.message}" for c in step_result.checks if not c.passed]
    return "\n".join(lines)


def assert_step(step: str, namespace: dict[str, Any] | None = None, secret: str | None = None) -> float:
    """nbgrader's hidden test for one step: returns the score (partial credit) or raises AssertionError."""
    step_id = BY_ID[step].id
    sources = kernel_sources(namespace)
    if sources is None:
        raise RuntimeError("assert_step runs inside a Jupyter/IPython kernel")
    result = grade_sources(sources, [step_id], secret=secret).steps[0]
    if result.score <= 0:
        raise AssertionError(failure_text(result))
    if result.status != "passed":
        print(failure_text(result))  # stdout: nbgrader counts anything on stderr as a failure
    return round(float(result.score), 4)


# --------------------------------------------------------------------------- the source notebook


def _solution_source(step: Step) -> tuple[str, list[str]]:
    """The step's reference with solution regions in every function body; returns (code, imports)."""
    return katafile.parse((SOLUTIONS / step.file).read_text(encoding="utf-8")).solution_regions(BY_MODULE)


def _markdown(step: Step) -> str:
    names = ", ".join(f"`{n}`" for n in step.names)
    extra = "" if step.core else " *(completes the chapter / 本章进阶)*"
    return (f"## {step_title(step, 'en')}{extra}\n\n"
            f"Book §{step.section}. Write {names} in the cell below, replacing `raise NotImplementedError()`. "
            f"The test cell after it is worth {step_points(step.id):g} points; run "
            f"`from grader import check; check(\"{step.id}\")` in any cell to see how you are doing.\n\n"
            f"### {step_title(step, 'zh')}\n\n"
            f"教材 §{step.section}。在下面的单元格中编写 {names}，替换 `raise NotImplementedError()`。"
            f"其后的测试单元格共 {step_points(step.id):g} 分；随时可以在任意单元格运行 "
            f"`from grader import check; check(\"{step.id}\")` 查看结果。")


def _test_source(step: Step) -> str:
    return (f"# Step {step.number} ({step.id}) is graded here: the grader's hidden checks run when the notebook "
            f"is graded.\n"
            f"# 步骤 {step.number}（{step.id}）在此评分：评分时运行评分器的隐藏检查。\n"
            "### BEGIN HIDDEN TESTS\n"
            "from grader.platforms.nbgrader.assignment import assert_step\n"
            f"assert_step({step.id!r}, globals())\n"
            "### END HIDDEN TESTS\n")


def _meta(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False,
          points: float | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": SCHEMA,
                            "solution": solution}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def build_assignment(steps: Iterable[str] | None = None) -> dict[str, Any]:
    """The nbgrader source notebook (nbformat 4 as a dict)."""
    step_list = [BY_ID[s] for s in steps] if steps else list(STEPS)
    imports: list[str] = []
    body: list[dict[str, Any]] = []
    for step in step_list:
        code, imps = _solution_source(step)
        imports += [i for i in imps if i not in imports]
        body.append({"id": f"md_{step.id}", "cell_type": "markdown", "metadata": _meta(f"md_{step.id}", locked=True),
                     "source": _markdown(step)})
        body.append({"id": f"sol_{step.id}", "cell_type": "code", "metadata": _meta(f"sol_{step.id}", solution=True),
                     "execution_count": None, "outputs": [], "source": code})
        body.append({"id": f"{TEST_PREFIX}{step.id}", "cell_type": "code",
                     "metadata": _meta(f"{TEST_PREFIX}{step.id}", grade=True, locked=True, points=step_points(step.id)),
                     "execution_count": None, "outputs": [], "source": _test_source(step)})
    intro = ("# Chapter 3: coding attention mechanisms\n\n"
             "Fill in each solution cell, in order; the test cells are graded by attention-kata.\n\n"
             "# 第 3 章：编写注意力机制\n\n"
             "按顺序完成每个解答单元格；测试单元格由 attention-kata 评分。")
    # every cell has an id (nbformat 4.5 requires one: nbgrader's commands warn MissingIDFieldWarning without)
    head = [{"id": "intro", "cell_type": "markdown", "metadata": _meta("intro", locked=True), "source": intro},
            {"id": "setup", "cell_type": "code", "metadata": _meta("setup", locked=True), "execution_count": None,
             "outputs": [], "source": "\n".join(imports) + "\n"}]
    return {"nbformat": 4, "nbformat_minor": 5, "cells": head + body,
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                         "language_info": {"name": "python"}}}


def write_assignment(out: str | Path, steps: Iterable[str] | None = None) -> Path:
    """Write the source notebook: OUT is a .ipynb path, or a folder (then OUT/attention.ipynb)."""
    out = Path(out)
    path = out if out.suffix == ".ipynb" else out / f"{NOTEBOOK_NAME}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(build_assignment(steps), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def next_step(path: Path, cwd: Path | None = None) -> str:
    """What `attn-kata nbgrader assignment` says after writing `path`: nbgrader's next command with the assignment's
    real name (the notebook's folder). nbgrader finds an assignment only in COURSE/source/<assignment>/, and runs in
    COURSE, beside the nbgrader_config.py whose course_id release_assignment and collect need (docs/platforms.md)."""
    folder = path.resolve().parent
    name, here = folder.name, (cwd or Path.cwd()).resolve()
    command = f"nbgrader generate_assignment {shlex.quote(name)} --create"
    if folder.parent.name != "source":
        return (f"nbgrader reads an assignment from COURSE/source/{name}/: move this folder there (or write it "
                f"there: attn-kata nbgrader assignment COURSE/source/{name}), then in COURSE: {command}")
    course = folder.parent.parent
    where = "" if course == here else f"cd {shlex.quote(os.path.relpath(course, here))} && "
    config = "" if (course / "nbgrader_config.py").is_file() else (
        f"; {course / 'nbgrader_config.py'} does not exist yet: write one that sets c.CourseDirectory.course_id "
        "(docs/platforms.md, nbgrader)")
    return f"next: {where}{command}{config}"
