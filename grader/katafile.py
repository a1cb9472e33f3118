"""One reading of a kata file (issue 38), serving the four things made from it: the stub (`reset`, and the stubs in
exercises/ are made so), the notebook's cell for a step (`init --notebook`), nbgrader's solution regions and the
README's signature table (`python -m grader.dev`). `parse` walks the file's syntax tree once; each transform reads
the same docstring, imports, function bodies and public definitions, so they cannot drift apart.

Named katafile, not kata: a wheel carries the kata's own files in grader/kata/ (grader.settings.BUNDLED_KATA)."""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable
from dataclasses import dataclass

STUB_LINE = "raise NotImplementedError  # your code here"


@dataclass(frozen=True)
class Body:
    """A function's body after its docstring (1-based lines, inclusive): what the stub replaces and what nbgrader
    marks as the solution. `solution_first` also takes the comments right above the first statement."""

    name: str  # the function's name (a method's: Class.method)
    first: int  # the first statement, or its first decorator
    solution_first: int
    last: int
    col: int  # the first statement's indent


@dataclass(frozen=True)
class Import:
    lines: range
    source: str
    module: str | None  # `from X import ...`'s X; None for `import X`


@dataclass(frozen=True)
class KataFile:
    text: str
    docstring: range | None  # the module docstring's lines
    imports: tuple[Import, ...]  # top-level imports
    bodies: tuple[Body, ...]  # top-level functions and methods, in file order (nbgrader's regions)
    stub_spans: tuple[tuple[int, int, int], ...]  # (first, last, indent) of every outermost body (the stub's)
    definitions: dict[str, ast.FunctionDef | ast.ClassDef]  # top-level functions and classes, by name

    # ------------------------------------------------------------------ the four transforms

    def stub(self) -> str:
        """Each function body after its docstring becomes `raise NotImplementedError  # your code here`."""
        lines = self.text.splitlines(keepends=True)
        for start, end, col in reversed(self.stub_spans):
            lines[start - 1:end] = [" " * col + STUB_LINE + "\n"]
        return "".join(lines)

    def cell(self, kata_modules: Collection[str]) -> tuple[str, list[str]]:
        """As a notebook cell: (the code without its module docstring and imports, the imports it needs from
        outside the kata). Imports of the kata's own steps are dropped: earlier cells define those names."""
        drop = self._dropped()
        code = "\n".join(line for n, line in enumerate(self.text.splitlines(), start=1) if n not in drop)
        return code.strip("\n") + "\n", self.outside_imports(kata_modules)

    def solution_regions(self, kata_modules: Collection[str]) -> tuple[str, list[str]]:
        """As nbgrader's source cell: (the code with `### BEGIN SOLUTION` / `### END SOLUTION` around every function
        body, without its module docstring and imports; the imports it needs from outside the kata)."""
        drop = self._dropped()
        begin = {b.solution_first: " " * b.col for b in self.bodies}
        end = {b.last: " " * b.col for b in self.bodies}
        out: list[str] = []
        for n, line in enumerate(self.text.splitlines(), start=1):
            if n in drop:
                continue
            if n in begin:
                out.append(f"{begin[n]}### BEGIN SOLUTION")
            out.append(line)
            if n in end:
                out.append(f"{end[n]}### END SOLUTION")
        return "\n".join(out).strip("\n") + "\n", self.outside_imports(kata_modules)

    def signatures(self, names: Iterable[str]) -> list[str]:
        """Each of `names` as the learner calls it: `f(a, b=1)`, a class by its constructor."""
        out = []
        for name in names:
            node = self.definitions[name]
            if isinstance(node, ast.ClassDef):
                init = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
                args = init.args
                args = ast.arguments(posonlyargs=[], args=args.args[1:], vararg=args.vararg,
                                     kwonlyargs=args.kwonlyargs, kw_defaults=args.kw_defaults, kwarg=args.kwarg,
                                     defaults=args.defaults)
            else:
                args = node.args
            bare = ast.arguments(
                posonlyargs=[ast.arg(a.arg) for a in args.posonlyargs], args=[ast.arg(a.arg) for a in args.args],
                vararg=args.vararg and ast.arg(args.vararg.arg),
                kwonlyargs=[ast.arg(a.arg) for a in args.kwonlyargs], kw_defaults=args.kw_defaults,
                kwarg=args.kwarg and ast.arg(args.kwarg.arg), defaults=args.defaults)
            out.append(f"{name}({ast.unparse(bare)})")
        return out

    # ------------------------------------------------------------------ shared parts

    def outside_imports(self, kata_modules: Collection[str]) -> list[str]:
        return [i.source for i in self.imports if i.module is None or i.module.split(".")[0] not in kata_modules]

    def _dropped(self) -> set[int]:
        drop = set(self.docstring or ())
        for i in self.imports:
            drop.update(i.lines)
        return drop


def _lines(node: ast.stmt) -> range:
    return range(node.lineno, (node.end_lineno or node.lineno) + 1)


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def parse(text: str) -> KataFile:
    """Read a kata file (a solution or a stub) once."""
    tree = ast.parse(text)
    lines = text.splitlines()
    docstring: range | None = None
    imports: list[Import] = []
    bodies: list[Body] = []
    definitions: dict[str, ast.FunctionDef | ast.ClassDef] = {}

    def body_of(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> None:
        body = fn.body
        doc_end = None
        if body and _is_docstring(body[0]):
            doc_end = body[0].end_lineno or body[0].lineno
            body = body[1:]
        if not body:
            return
        first, last = body[0].lineno, body[-1].end_lineno or body[-1].lineno
        solution_first = first
        floor = doc_end if doc_end is not None else fn.lineno
        while solution_first - 1 > floor and lines[solution_first - 2].strip().startswith("#"):
            solution_first -= 1  # comments right above the first statement belong to the solution
        start = min([first, *(d.lineno for d in getattr(body[0], "decorator_list", []))])
        bodies.append(Body(name, start, solution_first, last, body[0].col_offset))

    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            docstring = _lines(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            imports.append(Import(_lines(node), ast.get_source_segment(text, node) or "", module))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body_of(node, node.name)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    body_of(item, f"{node.name}.{item.name}")
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            definitions[node.name] = node
    return KataFile(text, docstring, tuple(imports), tuple(bodies), _stub_spans(tree), definitions)


def _stub_spans(tree: ast.Module) -> tuple[tuple[int, int, int], ...]:
    """Every function's body after its docstring, nested ones inside their parent's span dropped: (first line or
    its decorator, the function's last line, the indent)."""
    spans: list[tuple[int, int, int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        first = 1 if body and _is_docstring(body[0]) else 0
        if first >= len(body):
            continue
        stmt = body[first]
        start = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
        spans.append((start, node.end_lineno or stmt.end_lineno or start, stmt.col_offset))
    spans.sort()
    outer: list[tuple[int, int, int]] = []
    for span in spans:
        if outer and span[0] <= outer[-1][1]:
            continue
        outer.append(span)
    return tuple(outer)
