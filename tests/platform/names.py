"""What each platform's Python has, as the type checker knows it: the names typeshed's stubs (shipped with mypy, the
checker .ci/run runs for linux, win32 and darwin) define for a platform, read by evaluating their `sys.platform` and
`sys.version_info` conditions. The simulation (sim.py) removes exactly what Linux has and the simulated system lacks,
so a name the checker flags there is missing in the simulation too; tests/test_platform_names.py holds it to that.

    python tests/platform/names.py win32        # the names Linux's Python has and Windows' lacks, by module
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

# the standard modules the grader (or what it imports at run time) reaches for platform facts
MODULES = ("os", "socket", "signal", "select", "resource", "fcntl", "termios", "tty", "pty", "grp", "pwd", "time",
           "subprocess", "msvcrt")
UNKNOWN = None  # a condition this reader cannot decide: both branches count (a superset: never a name too few)


def typeshed() -> Path:
    import mypy

    return Path(mypy.__file__).resolve().parent / "typeshed" / "stdlib"


def _stub(module: str) -> Path | None:
    base = typeshed()
    for p in (base / f"{module}.pyi", base / module / "__init__.pyi"):
        if p.is_file():
            return p
    return None


def _value(node: ast.expr, platform: str) -> object:
    """A constant the conditions compare: sys.platform, sys.version_info, a literal; UNKNOWN otherwise."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys":
        if node.attr == "platform":
            return platform
        if node.attr == "version_info":
            return sys.version_info[:3]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
        return tuple(e.value for e in node.elts)  # type: ignore[attr-defined]
    return UNKNOWN


def _truth(node: ast.expr, platform: str) -> bool | None:
    if isinstance(node, ast.BoolOp):
        parts = [_truth(v, platform) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in parts else (None if None in parts else True)
        return True if True in parts else (None if None in parts else False)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _truth(node.operand, platform)
        return None if inner is None else not inner
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = _value(node.left, platform), _value(node.comparators[0], platform)
        if left is UNKNOWN or right is UNKNOWN:
            return None
        op = node.ops[0]
        if isinstance(left, tuple) and isinstance(right, tuple):
            left = left[:len(right)]
        try:
            return {ast.Eq: left == right, ast.NotEq: left != right, ast.Lt: left < right,  # type: ignore[operator]
                    ast.LtE: left <= right, ast.Gt: left > right, ast.GtE: left >= right}.get(  # type: ignore[operator]
                type(op))
        except TypeError:
            return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
        base, args = _value(node.func.value, platform), [_value(a, platform) for a in node.args]
        if isinstance(base, str) and args and isinstance(args[0], str):
            return base.startswith(args[0])
    return None


def _bound(body: list[ast.stmt], platform: str, out: set[str]) -> None:
    for node in body:
        if isinstance(node, ast.If):
            truth = _truth(node.test, platform)
            if truth in (True, None):
                _bound(node.body, platform, out)
            if truth in (False, None):
                _bound(node.orelse, platform, out)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            # a stub re-exports `from _socket import X as X` (and `*`: that module's names, read the same way)
            for alias in node.names:
                if alias.name == "*" and node.module:
                    out.update(names(node.module, platform))
                elif alias.asname == alias.name:
                    out.add(alias.name)
        elif isinstance(node, ast.TypeAlias if sys.version_info >= (3, 12) else ast.Pass):
            pass


@functools.cache
def names(module: str, platform: str) -> frozenset[str]:
    """The public names `module` has on `platform` (sys.platform's value there), by its stub."""
    stub = _stub(module)
    if stub is None:
        return frozenset()
    out: set[str] = set()
    _bound(ast.parse(stub.read_text(encoding="utf-8")).body, platform, out)
    return frozenset(n for n in out if not n.startswith("_"))


def missing(platform: str, module: str) -> frozenset[str]:
    """What Linux's `module` has and `platform`'s lacks."""
    return names(module, "linux") - names(module, platform)


def absent_modules(platform: str) -> tuple[str, ...]:
    """Modules that exist on Linux but define nothing on `platform` (resource, termios, ... on Windows)."""
    return tuple(m for m in MODULES if names(m, "linux") and not names(m, platform))


if __name__ == "__main__":
    system = sys.argv[1]
    print("absent modules:", ", ".join(absent_modules(system)))
    for m in MODULES:
        if m not in absent_modules(system) and missing(system, m):
            print(f"{m}: {', '.join(sorted(missing(system, m)))}")
