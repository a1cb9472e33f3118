"""The package layout is the architecture (docs/design.md): import-linter's contracts hold, and can fail; the
import graph has no cycle; no module reaches into another's private names."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).parent / "lint-imports"
ALLOWED_PRIVATE = {"_", "N_"}  # gettext's conventional names


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--config", str(ROOT / "pyproject.toml")], cwd=root, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})


def test_the_contracts_hold() -> None:
    out = lint(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(("module", "line"), [
    ("grader/worker/serve.py", "from grader.grading import reference  # planted"),
    ("grader/sandbox/channel.py", "from grader.worker import probes  # planted"),
    ("grader/registry.py", "from grader.checks import expect  # planted"),
    ("grader/daemon/server.py", "from grader import cli  # planted: the daemon's entry point hands it the CLI"),
    ("grader/render/reporters.py", "from grader.platforms import gradescope  # planted"),
])
def test_a_planted_import_across_the_boundary_breaks_a_contract(tmp_path: Path, module: str, line: str) -> None:
    shutil.copytree(ROOT / "grader", tmp_path / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / module
    target.write_text(target.read_text() + "\n" + line + "\n")
    out = lint(tmp_path)
    assert out.returncode != 0, out.stdout
    assert "BROKEN" in out.stdout


def test_no_import_cycle() -> None:
    graph = grimp.build_graph("grader")
    adj = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in sorted(adj):
        if m not in index:
            visit(m)
    assert cycles == []


def private_uses(package: Path) -> list[str]:
    """`from grader.x import _y`, `from grader.x._y import ...`, and `mod._y` where mod is a grader import."""
    bad = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grader"):
                if any(p.startswith("_") and p != "__init__" for p in node.module.split(".")):
                    bad.append(f"{path.name}:{node.lineno} from {node.module}")
                for alias in node.names:
                    if alias.name.startswith("_") and alias.name not in ALLOWED_PRIVATE:
                        bad.append(f"{path.name}:{node.lineno} import {alias.name}")
                    bound.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                bound |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("grader")}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                    and node.attr.startswith("_") and not node.attr.startswith("__")
                    and node.attr not in ALLOWED_PRIVATE):
                bad.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return bad


def test_no_private_name_crosses_a_module(tmp_path: Path) -> None:
    assert private_uses(ROOT / "grader") == []
    planted = tmp_path / "grader"
    planted.mkdir()
    (planted / "x.py").write_text("from grader.grading import engine\nfrom grader.pool.zygote import _subreaper\n"
                                  "engine._case_result\n")
    assert len(private_uses(planted)) == 2


def test_pictures_never_drive_grading() -> None:
    """Heatmaps are drawn from a report's cases (engine.grade(..., pictures=True) attaches them): no module of
    grader.render reaches the engine or any grading module but the data it draws (grader.grading.pictures), and
    no step's pictures are declared anywhere but in its module."""
    graph = grimp.build_graph("grader")
    render = [m for m in graph.modules if m.startswith("grader.render")]
    reached = {m for r in render for m in graph.find_modules_directly_imported_by(r) if m.startswith("grader.grading")}
    assert reached <= {"grader.grading.pictures"}, reached
    assert "WEIGHT_CASES" not in (ROOT / "grader" / "render" / "heatmap.py").read_text(encoding="utf-8")
