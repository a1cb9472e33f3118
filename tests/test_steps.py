"""Walk every step of the registry, as rustlings' `dev check` does: a step is complete only with all its parts.

A step is its registry entry (grader/registry.py) plus: a stub in exercises/ derived from its solution in
solutions/ (the same module docstring, imports, classes, signatures and docstrings; each body only
`raise NotImplementedError`), its module grader/checks/<id>.py with three hints and at least four checks, at least
two buggy fixtures that cost it points, and its row in the README's step table (the block between
`<!-- steps:start -->` and `<!-- steps:end -->`, written by `python -m grader.dev docs`). A missing part fails here
by name, not later as a step that silently shows no hint; each kind of part is planted missing in a copy of the
tree to show it. Only the last test imports torch (the step modules), to compare what is read without it.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader import dev, registry
from grader.platforms.pytest_plugin import check_names
from grader.registry import STEPS, Step

ROOT = Path(__file__).resolve().parent.parent
MIN_CHECKS, MIN_BUGS, HINT_LEVELS = 4, 2, 3


@dataclass(frozen=True)
class Tree:
    """Where a step's parts live: the checkout, or a test's copy of the parts of it this test reads."""

    root: Path

    @property
    def checks(self) -> Path:
        return self.root / "grader" / "checks"

    @property
    def readme(self) -> Path:
        return self.root / "README.md"

    @property
    def expected(self) -> Path:
        return self.root / "tests" / "fixtures" / "expected.json"

    def copy(self, to: Path) -> Tree:
        for folder in ("exercises", "solutions", "grader/checks"):
            shutil.copytree(self.root / folder, to / folder, ignore=shutil.ignore_patterns("__pycache__"))
        for path in (self.readme, self.expected):
            (to / path.relative_to(self.root)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, to / path.relative_to(self.root))
        return Tree(to)


CHECKOUT = Tree(ROOT)


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


def readme_rows(tree: Tree = CHECKOUT) -> dict[str, tuple[str, str, str, str]] | None:
    """The README's step table, between its markers: step id -> (number, what you write, book §, file); None
    without the markers."""
    text = tree.readme.read_text(encoding="utf-8")
    start, end = dev.STEPS_MARKERS
    if text.count(start) != 1 or text.count(end) != 1:
        return None
    rows = {}
    for line in text.split(start)[1].split(end)[0].splitlines():
        m = re.fullmatch(r"\| (\d+) \| `([a-z0-9_]+)` \| `([\w.]+)` \| (.+) \| ([^|]+) \|", line.strip())
        if m:
            rows[m[2]] = (m[1], m[4], m[5].strip(), m[3])
    return rows


def _bugs_for(step_id: str, tree: Tree) -> list[str]:
    return [name for name, steps in _expected(tree).items()
            if step_id in steps and steps[step_id].get("status") != "passed"]


def _expected(tree: Tree) -> dict[str, dict[str, dict]]:
    """tests/fixtures/expected.json's verdicts: fixture -> step -> verdict (keys starting with _ are notes)."""
    expected = json.loads(tree.expected.read_text(encoding="utf-8"))
    return {k: v for k, v in expected.items() if not k.startswith("_") and isinstance(v, dict)}


def _stub_parts(step: Step, tree: Tree) -> list[str]:
    stub_path, solution_path = tree.root / "exercises" / step.file, tree.root / "solutions" / step.file
    if not stub_path.is_file() or not solution_path.is_file():
        return [f"exercises/{step.file} and solutions/{step.file}"]
    missing = []
    stub = ast.parse(stub_path.read_text(encoding="utf-8"))
    solution = ast.parse(solution_path.read_text(encoding="utf-8"))
    if _outline(stub) != _outline(solution):
        missing.append("a stub with the solution's docstrings, imports and signatures")
    if bad := _bodies_are_stubs(stub):
        missing.append(f"stub bodies that only raise NotImplementedError ({', '.join(bad)})")
    defined = {n.name for n in solution.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    if not set(step.names) <= defined:
        missing.append(f"the public names {sorted(set(step.names) - defined)} in the solution")
    return missing


def missing_parts(step: Step, checks: dict[str, list[str]], tree: Tree = CHECKOUT) -> list[str]:
    """Every part of `step` that is absent or wrong, in words. `checks`: each step's check names."""
    missing = _stub_parts(step, tree)
    if len(registry.hints(step.id, tree.checks)) != HINT_LEVELS:
        missing.append(f"{HINT_LEVELS} hints (grader/checks/{step.id}.py: hints(STEP, …))")
    if len(checks.get(step.id, [])) < MIN_CHECKS:
        missing.append(f"at least {MIN_CHECKS} checks (grader/checks/{step.id}.py)")
    if len(_bugs_for(step.id, tree)) < MIN_BUGS:
        missing.append(f"at least {MIN_BUGS} buggy fixtures costing it points (tests/fixtures/expected.json)")
    rows = readme_rows(tree)
    row = (rows or {}).get(step.id)
    if rows is None:
        missing.append(f"the README's step table between {' and '.join(dev.STEPS_MARKERS)} (python -m grader.dev docs)")
    elif row is None or row[0] != str(step.number) or step.section not in row[2] or row[3] != step.file \
            or not all(name in row[1] for name in step.names if step.names != (step.id,)):
        missing.append("its row in the README's step table (number, file, names, section: python -m grader.dev docs)")
    return missing


@pytest.fixture(scope="module")
def checks() -> dict[str, list[str]]:
    return check_names()


@pytest.mark.parametrize("step", STEPS, ids=[s.id for s in STEPS])
def test_every_step_has_all_its_parts(step: Step, checks: dict[str, list[str]]) -> None:
    assert missing_parts(step, checks) == []


def test_the_readme_table_is_the_registry() -> None:
    rows = readme_rows()
    assert rows is not None, f"no {' … '.join(dev.STEPS_MARKERS)} block in README.md"
    assert list(rows) == [s.id for s in STEPS]


def test_a_ghost_step_is_missing_every_part(checks: dict[str, list[str]]) -> None:
    """A registry entry with nothing behind it fails on every part, each named."""
    ghost = Step(99, "ghost_step", ("ghost",), "9.9.9", "A ghost", "幽灵")
    found = missing_parts(ghost, checks)
    assert len(found) == 5, found  # files, hints, checks, fixtures, README row


def _hints_changed(checks: Path, step: Step, keep: int | None) -> None:
    """The catalogue of a copy (grader/checks/catalogue.json, what `attn-kata hint` reads) with the step's hints cut
    to `keep` levels, or without its hints at all (None)."""
    path = checks / registry.CATALOGUE
    doc = json.loads(path.read_text(encoding="utf-8"))
    if keep is None:
        del doc["steps"][step.id]["hints"]
    else:
        doc["steps"][step.id]["hints"] = doc["steps"][step.id]["hints"][:keep]
    path.write_text(json.dumps(doc), encoding="utf-8")


def _stub_signature_changed(tree: Tree, step: Step) -> None:
    stub = tree.root / "exercises" / step.file
    stub.write_text(stub.read_text(encoding="utf-8").replace(f"def {step.names[0]}(", f"def {step.names[0]}(extra, "),
                    encoding="utf-8")


def _stub_solved(tree: Tree, step: Step) -> None:
    (tree.root / "exercises" / step.file).write_bytes((tree.root / "solutions" / step.file).read_bytes())


def _one_buggy_fixture(tree: Tree, step: Step) -> None:
    expected = json.loads(tree.expected.read_text(encoding="utf-8"))
    bugs = _bugs_for(step.id, tree)
    tree.expected.write_text(json.dumps({k: v for k, v in expected.items() if k not in bugs[1:]}), encoding="utf-8")


def _readme_row_gone(tree: Tree, step: Step) -> None:
    text = tree.readme.read_text(encoding="utf-8")
    tree.readme.write_text("".join(line for line in text.splitlines(keepends=True) if f"| `{step.id}` |" not in line),
                           encoding="utf-8")


def _readme_markers_gone(tree: Tree, step: Step) -> None:
    tree.readme.write_text(tree.readme.read_text(encoding="utf-8").replace(dev.STEPS_MARKERS[0], ""),
                           encoding="utf-8")


PLANTED = {  # what is taken away -> the part the walk must then name
    "a hint": (lambda tree, step: _hints_changed(tree.checks, step, HINT_LEVELS - 1), f"{HINT_LEVELS} hints"),
    "every hint": (lambda tree, step: _hints_changed(tree.checks, step, None), f"{HINT_LEVELS} hints"),
    "the stub's signature": (_stub_signature_changed, "a stub with the solution's"),
    "the stub's NotImplementedError": (_stub_solved, "stub bodies that only raise NotImplementedError"),
    "a buggy fixture": (_one_buggy_fixture, f"at least {MIN_BUGS} buggy fixtures"),
    "the README row": (_readme_row_gone, "its row in the README's step table"),
    "the README table's markers": (_readme_markers_gone, "the README's step table between"),
}


@pytest.mark.parametrize("step", [STEPS[1], STEPS[-1]], ids=lambda s: s.id)
@pytest.mark.parametrize("planted", list(PLANTED))
def test_a_step_missing_one_part_is_named(planted: str, step: Step, checks: dict[str, list[str]],
                                          tmp_path: Path) -> None:
    """Planted in a copy of the tree: one part taken from a complete step, and the walk names that part alone."""
    tree = CHECKOUT.copy(tmp_path)
    assert missing_parts(step, checks, tree) == []  # the copy is complete
    take, named = PLANTED[planted]
    take(tree, step)
    found = missing_parts(step, checks, tree)
    assert len(found) == 1 and found[0].startswith(named), found


def test_a_step_with_three_checks_is_named(checks: dict[str, list[str]]) -> None:
    step = STEPS[0]
    fewer = {**checks, step.id: checks[step.id][:MIN_CHECKS - 1]}
    assert missing_parts(step, fewer) == [f"at least {MIN_CHECKS} checks (grader/checks/{step.id}.py)"]


def test_the_hints_read_without_torch_are_those_the_module_registers() -> None:
    """registry.hints reads the catalogue (no torch for `attn-kata hint`); importing the modules registers the same."""
    from grader import checks as registered

    registered.load_all()
    assert {s.id: registry.hints(s.id) for s in STEPS} == {s.id: registered.HINTS[s.id] for s in STEPS}
