"""Walk every step of the registry, as rustlings' `dev check` does: a step is complete only with all its parts.

A step is its registry entry plus: a stub in exercises/ derived from its solution in solutions/ (the same module
docstring, imports, classes, signatures and docstrings; each body only `raise NotImplementedError`), three hints,
at least four checks, at least two buggy fixtures that cost it points, and its row in the README's step table.
A missing part fails here by name, not later as a step that silently shows no hint. No torch is imported.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from grader.platforms.pytest_plugin import check_names
from grader import registry
from grader.registry import STEPS, Step

ROOT = Path(__file__).resolve().parent.parent
MIN_CHECKS, MIN_BUGS, HINT_LEVELS = 4, 2, 3


def _outline(tree: ast.Module) -> list[str]:
    """What a stub shares with its solution: docstrings, imports, and every def and class with its signature."""
    out = [ast.get_docstring(tree) or ""]
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(ast.unparse(node))
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            out += _defs(node)
    return out


def _defs(node: ast.FunctionDef | ast.ClassDef) -> list[str]:
    if isinstance(node, ast.FunctionDef):
        return [f"def {node.name}({ast.unparse(node.args)}) -> {ast.unparse(node.returns) if node.returns else ''}",
                ast.get_docstring(node) or ""]
    inner = [d for n in node.body if isinstance(n, ast.FunctionDef) for d in _defs(n)]
    return [f"class {node.name}({', '.join(ast.unparse(b) for b in node.bases)})", ast.get_docstring(node) or "",
            *inner]


def _bodies_are_stubs(tree: ast.Module) -> list[str]:
    """The defs whose body is more than a docstring and `raise NotImplementedError`."""
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            ok = len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None \
                and ast.unparse(body[0].exc) in ("NotImplementedError", "NotImplementedError()")
            if not ok:
                bad.append(node.name)
    return bad


def _readme_rows() -> dict[str, tuple[str, str, str]]:
    """The README's step table: step id -> (number, what you write, book §)."""
    rows = {}
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"\| (\d+) \| `([a-z0-9_]+)` \| (.+) \| ([^|]+) \|", line.strip())
        if m:
            rows[m[2]] = (m[1], m[3], m[4].strip())
    return rows


def _bugs_for(step_id: str) -> list[str]:
    expected = json.loads((ROOT / "tests" / "fixtures" / "expected.json").read_text(encoding="utf-8"))
    return [name for name, steps in expected.items()
            if step_id in steps and steps[step_id].get("status") != "passed"]


def missing_parts(step: Step, checks: dict[str, list[str]]) -> list[str]:
    """Every part of `step` that is absent or wrong, in words."""
    missing = []
    stub_path, solution_path = ROOT / "exercises" / step.file, ROOT / "solutions" / step.file
    if not stub_path.is_file() or not solution_path.is_file():
        missing.append(f"exercises/{step.file} and solutions/{step.file}")
    else:
        stub = ast.parse(stub_path.read_text(encoding="utf-8"))
        solution = ast.parse(solution_path.read_text(encoding="utf-8"))
        if _outline(stub) != _outline(solution):
            missing.append("a stub with the solution's docstrings, imports and signatures")
        if bad := _bodies_are_stubs(stub):
            missing.append(f"stub bodies that only raise NotImplementedError ({', '.join(bad)})")
        defined = {n.name for n in solution.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        if not set(step.names) <= defined:
            missing.append(f"the public names {sorted(set(step.names) - defined)} in the solution")
    if len(registry.hints(step.id)) != HINT_LEVELS:
        missing.append(f"{HINT_LEVELS} hints (grader/checks/{step.id}.py: hints(STEP, …))")
    if len(checks.get(step.id, [])) < MIN_CHECKS:
        missing.append(f"at least {MIN_CHECKS} checks (grader/checks/{step.id}.py)")
    if len(_bugs_for(step.id)) < MIN_BUGS:
        missing.append(f"at least {MIN_BUGS} buggy fixtures costing it points (tests/fixtures/expected.json)")
    row = _readme_rows().get(step.id)
    if row is None or row[0] != str(step.number) or step.section not in row[2] \
            or not all(name in row[1] for name in step.names if step.names != (step.id,)):
        missing.append("its row in the README's step table (number, names, section)")
    return missing


@pytest.fixture(scope="module")
def checks() -> dict[str, list[str]]:
    return check_names()


@pytest.mark.parametrize("step", STEPS, ids=[s.id for s in STEPS])
def test_every_step_has_all_its_parts(step: Step, checks: dict[str, list[str]]) -> None:
    assert missing_parts(step, checks) == []


def test_the_readme_table_is_the_registry() -> None:
    assert list(_readme_rows()) == [s.id for s in STEPS]


def test_a_step_missing_its_parts_is_named(checks: dict[str, list[str]]) -> None:
    """Planted: a registry entry with nothing behind it fails on every part, each named."""
    ghost = Step(99, "ghost_step", ("ghost",), "9.9.9", "A ghost", "幽灵")
    found = missing_parts(ghost, checks)
    assert len(found) == 5, found  # files, hints, checks, fixtures, README row
    # and a real step with one hint taken away
    first = STEPS[0]
    real = registry.hints

    def two(step_id: str) -> tuple[str, ...]:
        return real(step_id)[:2]

    registry.hints = two
    try:
        assert missing_parts(first, checks) == [f"{HINT_LEVELS} hints (grader/checks/{first.id}.py: hints(STEP, …))"]
    finally:
        registry.hints = real
