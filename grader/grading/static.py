"""Facts read from the submission's source text (never executed here): e.g. loops in a function."""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass
from typing import Any

from grader.grading.ingest import Submission, Unit
from grader.registry import BY_ID

LOOPS = (ast.For, ast.While, ast.AsyncFor, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# calls that loop in Python over their arguments: a loop by another name
LOOP_CALLS = {"map", "filter", "reduce", "starmap", "accumulate", "takewhile", "dropwhile", "groupby", "apply_",
              "vectorize", "apply_along_axis"}
# and iter(callable, sentinel), which calls a Python function until it returns the sentinel; and recursion (a
# function that refers back to itself through the names it reads): `loops` counts both (red team 10)
# the functions a check asks to be loop-free (step 4: "no Python loops")
LOOP_FREE = BY_ID["all_tokens"].names
# names and bindings `loops` may follow for one function before it gives up (the unit then counts as unread, so
# the loop point is not vouched for): honest code follows a few hundred
MAX_WORK = 200_000
# what can bind a function of the submission where a reading of its text cannot follow (another file's setattr,
# exec of a string, globals(), sys.modules, a swapped __code__): where one is used, "no Python loops" cannot be
# vouched for. Builtins count when called by their bare name (`model.eval()` is not eval)
DYNAMIC_BUILTINS = {"exec", "eval", "compile", "globals", "vars", "locals", "__import__"}
# calls that hand out a namespace to write in (gc's object lists, an attribute fetched by a computed name)
DYNAMIC_METHODS = {"import_module", "reload", "get_objects", "get_referents", "get_referrers", "attrgetter",
                   "methodcaller", "exec_module", "module_from_spec",
                   # builtins reached as an attribute (`len.__self__.globals()`): `.eval()` and `.compile()` are
                   # honest methods of nn.Module and torch/re, the rest never are
                   "globals", "exec", "setattr", "delattr", "vars", "locals", "__import__"}
DYNAMIC_DUNDERS = {"__code__", "__dict__", "__globals__", "__defaults__", "__kwdefaults__", "__call__", "__class__",
                   "__wrapped__"}
# attributes that are a namespace, or the way to write one, whenever they are read: `m.__dict__.update(...)`,
# `m.__setattr__(...)`, a frame's f_globals
DYNAMIC_ATTRS = {"__dict__", "__setattr__", "__getattribute__", "__globals__", "__code__", "__builtins__",
                 "f_globals", "f_locals", "f_builtins", "f_lineno", "f_trace", "f_trace_lines", "f_trace_opcodes",
                 # the ways to another object's namespace without naming it: a builtin's module (`len.__self__`),
                 # a descriptor's getter, every class there is, a module found from an object, a static lookup
                 "__self__", "__get__", "__subclasses__", "__bases__", "__base__", "__mro__", "getmodule",
                 "getattr_static"}
# hooks that run code at every line of later code and can make it skip lines without an exception (a tracer sets
# frame.f_lineno: a def the text shows may never run). Named at all (called, passed, imported), they count;
# `monitoring` (sys.monitoring) only as an attribute or import
DYNAMIC_HOOKS = {"settrace", "setprofile", "settrace_all_threads", "setprofile_all_threads", "monitoring",
                 # library functions that write an object's namespace on the caller's behalf: update_wrapper's
                 # default copies __dict__ (`update_wrapper(module, ns, assigned=())` rebinds a module's names)
                 "update_wrapper", "wraps"}
# builtins that bind or hand out a namespace: called by another name (`_s = setattr; _s(m, ...)`, `map(exec, ...)`),
# a bare name that is not the callee still counts
_VALUE_BUILTINS = DYNAMIC_BUILTINS | {"setattr", "getattr", "delattr"}
# modules whose import alone means code or names the text cannot follow: unittest.mock.patch sets attributes; the
# rest run code given as a string or bytes (pickle.loads, timeit, code.InteractiveInterpreter, cProfile.run, pdb,
# runpy, marshal) or hand out frames, modules and code objects (inspect, types)
_NAMESPACE_MODULES = {"builtins", "ctypes", "_ctypes", "unittest", "mock", "pickle", "_pickle", "copyreg", "marshal",
                      "timeit", "code", "codeop", "cProfile", "profile", "pdb", "bdb", "runpy", "inspect", "types",
                      "dill", "cloudpickle", "shelve"}
# names setattr/getattr must be shown never to be: what rebinds a function or opens a namespace
_UNSAFE_NAMES = frozenset({*LOOP_FREE, *DYNAMIC_DUNDERS, *DYNAMIC_ATTRS, *DYNAMIC_HOOKS, "modules"})
# every name _dynamic_lines looks for: a unit whose (normalised) text names none of them has no dynamic line
_TRIGGERS = (*DYNAMIC_BUILTINS, *DYNAMIC_METHODS, *DYNAMIC_DUNDERS, *DYNAMIC_ATTRS, *DYNAMIC_HOOKS, *_NAMESPACE_MODULES,
             "modules", "setattr", "getattr", "delattr", *LOOP_FREE)


_IDENTIFIER = re.compile(r"\w+")
_STAR = re.compile(r"import[\s\\]*\*")  # `import *`, `import*`, `import \\` + newline + `*`


@dataclass(frozen=True)
class _Ref:
    """What a module-level name is bound to: code (a def, a lambda, a class or any other expression, whose
    loops count), an import of a name of another unit (resolved later), a unit imported as a module, or
    something else (a library's function, a constant): nothing to count."""

    kind: str  # code | import | module | other | any (one of `alts`: a binding that may or may not have run)
    module: str = ""  # code: where it is; import, module: the unit imported from
    node: ast.AST | None = None
    label: str = ""  # code: the unit (file, cell) it is written in
    name: str = ""  # import: the name imported
    alts: tuple[_Ref, ...] = ()


_OTHER = _Ref("other")
_ABSENT = _Ref("absent")  # `del f` or `except E as f` in a branch: f may be unbound, a later module's f is graded


class _Namespaces:
    """The submission's modules, parsed on demand and executed symbolically: for each, what every
    module-level name is bound to once the module has run (the last binding wins, as when it runs)."""

    def __init__(self, sub: Submission):
        self.units: dict[str, list[Unit]] = {}
        for u in sub.units:
            self.units.setdefault(u.module, []).append(u)
        self.envs: dict[str, dict[str, _Ref]] = {}
        self.bound_in: dict[str, dict[str, str]] = {}  # module -> name -> the unit that bound it last
        self.busy: set[str] = set()
        # units this process could not parse for want of stack or memory: the worker, whose stack is shallower and
        # whose recursion limit the learner's own code may raise, can still load them
        self.unread: set[str] = set()
        # module -> name -> every value it was ever bound to: code reads a name when it runs, not when it is
        # written, so a name a function refers to is followed to all of them (`f = [_loopy][0]`, then a new _loopy)
        self.history: dict[str, dict[str, list[_Ref]]] = {}
        # every name and attribute the loop-free functions' code reads, followed or not (`_pairwise`, `softmax` of
        # torch.softmax): another file assigning one of them (`all_tokens._pairwise = f`, `torch.softmax = f`)
        # changes what runs without a binding the symbolic run sees
        self.read: set[str] = set()
        # id(env) -> the names bound since the unit began: what that unit bound (not a diff of the namespace after
        # every cell, which cost cells x names: 100 s for one notebook, red team 11)
        self.touched: dict[int, set[str]] = {}

    def env(self, module: str) -> dict[str, _Ref]:
        if module in self.envs:
            return self.envs[module]
        if module in self.busy or module not in self.units:  # an import cycle: what is bound so far
            return {}
        self.busy.add(module)
        env: dict[str, _Ref] = {}
        bound_in = self.bound_in.setdefault(module, {})
        rebinders: list[tuple[ast.Module, str]] = []
        touched = self.touched[id(env)] = set()
        for unit in self.units[module]:  # a notebook's cells run one after the other in one namespace
            touched.clear()
            try:
                tree = unit.parsed
                if isinstance(tree, Exception):
                    raise tree
                # a cell that raises halfway leaves what it bound so far, and the next cells still run: none of
                # a cell's bindings is sure to replace the one before. Whether it raised, only the worker knows,
                # and what the learner's code leaves of the worker's records can be forged (red team 9)
                self._run(tree.body, env, module, unit.label, may=unit.label.startswith("cell "))
                if "global" in unit.text:  # the walk costs ~1 ms a notebook cell
                    rebinders.append((tree, unit.label))
            except (SyntaxError, ValueError):
                pass  # the worker reports what does not load; what ran before it stays bound
            except (RecursionError, MemoryError):
                self.unread.add(unit.label)
            bound_in.update((k, unit.label) for k in touched if k in env)
        # code that declares `global f` may run after every later cell (a thread, a callback): after them all
        for tree, label in rebinders:
            touched.clear()
            try:
                self._globals(tree, env, module, label)
            except (RecursionError, MemoryError):
                self.unread.add(label)
            bound_in.update((k, label) for k in touched if k in env)
        del self.touched[id(env)]
        self.busy.discard(module)
        self.envs[module] = env
        return env

    def _value(self, expr: ast.expr, env: dict[str, _Ref], module: str, label: str) -> _Ref:
        if isinstance(expr, ast.Name):
            return env.get(expr.id, _OTHER)  # bound to what the name holds now, not later
        if isinstance(expr, ast.Attribute):
            ref = self._attribute(expr, env)
            if ref.kind != "other":
                return ref
        return _Ref("code", module, expr, label)

    def _attribute(self, expr: ast.Attribute, env: dict[str, _Ref]) -> _Ref:
        """`unit.name` or `unit.other_unit.name`, for units of the submission imported as modules."""
        chain: list[str] = []
        base: ast.expr = expr
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name):
            return _OTHER
        ref = env.get(base.id, _OTHER)
        for attr in reversed(chain):
            ref = self.resolve(ref)
            if ref.kind != "module":
                return _OTHER
            ref = _Ref("import", ref.module, name=attr)
        return ref

    def _bind(self, name: str, value: _Ref, env: dict[str, _Ref], module: str, may: bool) -> None:
        """Bind `name`; a binding that `may` not have run (in a branch, a loop, a try, a notebook cell) leaves
        the name holding either value."""
        old = env.get(name)
        if (touched := self.touched.get(id(env))) is not None:
            touched.add(name)
        self.history.setdefault(module, {}).setdefault(name, []).append(value)
        env[name] = _Ref("any", alts=(old, value)) if may and old is not None and old is not value else value

    def _bind_target(self, target: ast.expr, value: _Ref, env: dict[str, _Ref], module: str, may: bool) -> None:
        """Bind every name in `target` (`a`, `a, (b, c)`, `*a`) to `value`, the code its value comes from: a
        name in a nested target holds a part of it, whose loops are among the whole's."""
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                self._bind(n.id, value, env, module, may)

    def _side_bindings(self, node: ast.stmt, env: dict[str, _Ref], module: str, label: str) -> None:
        """Names a statement binds inside its expressions or patterns: `(f := _loopy)`, `case f:`. Each may or
        may not run (the walrus in a branch of a conditional expression)."""
        subject = self._value(node.subject, env, module, label) if isinstance(node, ast.Match) else None
        for n in _own_expressions(node):
            if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                self._bind(n.target.id, self._value(n.value, env, module, label), env, module, True)
            elif subject is not None:
                name = getattr(n, "name", None) if isinstance(n, ast.MatchAs | ast.MatchStar) else (
                    n.rest if isinstance(n, ast.MatchMapping) else None)
                if name:
                    self._bind(name, subject, env, module, True)

    def _globals(self, tree: ast.Module, env: dict[str, _Ref], module: str, label: str) -> None:
        """A function or class that declares `global f` may rebind f whenever it runs (at import, or later from
        another file): f may hold whatever that code binds it to."""
        todo: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]  # one walk, each node with its scope
        while todo:
            node, scope = todo.pop()
            if isinstance(node, ast.Global) and scope is not None:
                for name in node.names:
                    self._bind(name, _Ref("code", module, scope, label), env, module, True)
            inner = node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else scope
            todo.extend((c, inner) for c in ast.iter_child_nodes(node))

    def _run(self, body: list[ast.stmt], env: dict[str, _Ref], module: str, label: str, may: bool = False) -> None:
        todo: list[tuple[ast.stmt, bool]] = [(s, may) for s in reversed(body)]
        while todo:  # no recursion: a hostile file may nest blocks deeply
            node, may = todo.pop()
            # a def's decorators, defaults and annotations and a class's bases and keywords run here too (a walrus
            # there rebinds a module-level name: red team 9); their bodies are not module-level code
            self._side_bindings(node, env, module, label)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self._bind(node.name, _Ref("code", module, node, label), env, module, may)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if (isinstance(target, ast.Tuple | ast.List) and isinstance(node.value, ast.Tuple | ast.List)
                            and len(target.elts) == len(node.value.elts)):
                        for t, v in zip(target.elts, node.value.elts, strict=True):
                            self._bind_target(t, self._value(v, env, module, label), env, module, may)
                    else:
                        self._bind_target(target, self._value(node.value, env, module, label), env, module, may)
            elif isinstance(node, ast.AnnAssign):
                if node.value is not None:  # `f: int` alone binds nothing
                    self._bind_target(node.target, self._value(node.value, env, module, label), env, module, may)
            elif isinstance(node, ast.AugAssign):  # `f += x` is f.__iadd__(x): f's class decides what it holds
                self._bind_target(node.target, self._value(node.value, env, module, label), env, module, True)
            elif isinstance(node, ast.Delete):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        if may:
                            self._bind(target.id, _ABSENT, env, module, True)
                        else:
                            env.pop(target.id, None)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    if alias.asname:
                        ref = _Ref("module", alias.name) if alias.name in self.units else _OTHER
                        self._bind(alias.asname, ref, env, module, may)
                    else:
                        self._bind(top, _Ref("module", top) if top in self.units else _OTHER, env, module, may)
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                ours = source in self.units and source != module
                for alias in node.names:
                    if alias.name == "*":  # `__all__` may add names with an underscore and leave others out
                        for k, v in (self.env(source).items() if ours else ()):
                            self._bind(k, v, env, module, True)
                    elif source == module and not node.level:  # the module importing itself: what it holds now
                        self._bind(alias.asname or alias.name, env.get(alias.name, _OTHER), env, module, may)
                    else:
                        ref = _Ref("import", source, name=alias.name) if ours else _OTHER
                        self._bind(alias.asname or alias.name, ref, env, module, may)
            else:  # a block at the top level (if, try, with, for, while, match): each statement may not run
                for h in getattr(node, "handlers", None) or []:
                    if isinstance(h, ast.ExceptHandler) and h.name:  # unbound again when the handler ends
                        self._bind(h.name, _ABSENT, env, module, True)
                for field in ("finalbody", "orelse", "handlers", "cases", "body"):
                    for child in reversed(getattr(node, field, None) or []):
                        if isinstance(child, ast.stmt):
                            todo.append((child, True))
                        elif isinstance(child, ast.excepthandler | ast.match_case):
                            todo.extend((c, True) for c in reversed(child.body))
                if isinstance(node, ast.For | ast.AsyncFor):  # the target holds a part of what is iterated
                    self._bind_target(node.target, self._value(node.iter, env, module, label), env, module, True)
                elif isinstance(node, ast.With | ast.AsyncWith):
                    for i in node.items:
                        if i.optional_vars is not None:
                            self._bind_target(i.optional_vars, self._value(i.context_expr, env, module, label),
                                              env, module, True)

    def resolve(self, ref: _Ref) -> _Ref:
        """Follow imports (and imports of imports) to the code a name is bound to."""
        seen: set[tuple[str, str]] = set()
        while ref.kind == "import" and (ref.module, ref.name) not in seen:
            seen.add((ref.module, ref.name))
            ref = self.env(ref.module).get(ref.name, _OTHER)
        return ref if ref.kind != "import" else _OTHER

    def _bindings(self, ref: _Ref) -> list[_Ref]:
        """An import of a name stands for every value that name is ever bound to in its module."""
        if ref.kind != "import":
            return [ref]
        final = self.env(ref.module).get(ref.name, _OTHER)
        return [*self.history.get(ref.module, {}).get(ref.name, []), final]

    def may_be_absent(self, ref: _Ref) -> bool:
        todo, seen = [ref], set()
        while todo:
            r = todo.pop()
            if r.kind == "absent":
                return True
            if r.kind == "any" and id(r) not in seen:
                seen.add(id(r))
                todo.extend(a for a in r.alts if a is not None)
        return False

    def loops(self, start: _Ref, label: str) -> list[int | str]:
        """Lines of the loops in `start`'s code and, transitively, in the submission's module-level code it
        refers to by name (every value that name is ever bound to). Lines in another unit than `label` (where the
        name is bound) read "line (unit)"."""
        found: set[int | str] = set()
        seen: set[int] = set()
        # code -> the code it refers to by name, to find recursion (a loop by another name) once all is read
        edges: dict[int, set[int]] = {}
        where: dict[int, int | str] = {}
        todo: list[tuple[_Ref, int | None]] = [(start, None)]
        work = 0
        while todo:
            ref, parent = todo.pop()
            if ref.kind == "code" and ref.node is not None and parent is not None:
                edges.setdefault(parent, set()).add(id(ref.node))
            if id(ref) in seen or (ref.node is not None and id(ref.node) in seen):
                continue
            seen.add(id(ref))
            if ref.kind == "any":
                todo.extend((a, parent) for a in ref.alts if a is not None)
                continue
            if ref.kind == "import":
                todo.extend((b, parent) for b in self._bindings(ref))
                continue
            if ref.kind != "code" or ref.node is None:
                continue
            seen.add(id(ref.node))
            me = id(ref.node)
            if isinstance(ref.node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                where[me] = ref.node.lineno if ref.label == label else f"{ref.node.lineno} ({ref.label})"
            nodes = list(ast.walk(ref.node))
            for n in nodes:
                if isinstance(n, LOOPS) or (isinstance(n, ast.Call) and (
                        _called(n) in LOOP_CALLS or (_called(n) == "iter" and len(n.args) == 2))):
                    found.add(n.lineno if ref.label == label else f"{n.lineno} ({ref.label})")
            env = self.env(ref.module)
            history = self.history.get(ref.module, {})
            imported: dict[str, _Ref] = {}  # imports inside the code: `import helpers` in a function body
            for n in nodes:
                if isinstance(n, ast.ImportFrom) and (n.module or "") in self.units:
                    star = any(a.name == "*" for a in n.names)
                    todo.extend((r, me) for r in (self.env(n.module or "").values() if star else
                                                  [_Ref("import", n.module or "", name=a.name) for a in n.names]))
                elif isinstance(n, ast.Import):
                    for a in n.names:
                        if a.name in self.units:
                            imported[a.asname or a.name.split(".")[0]] = _Ref("module", a.name if a.asname else
                                                                              a.name.split(".")[0])
            # an annotation is evaluated once, when the def runs: what it names changing later changes nothing
            noted = {id(x) for n in nodes for a in (getattr(n, "annotation", None), getattr(n, "returns", None))
                     if isinstance(n, ast.arg | ast.FunctionDef | ast.AsyncFunctionDef) and a is not None
                     for x in ast.walk(a)}
            followed: set[tuple[str, ...]] = set()  # a name read many times is followed once (red team 11)
            for n in _free(ref.node):
                if id(n) not in noted:
                    self.read.add(n.id if isinstance(n, ast.Name) else n.attr)
                if (chain := _chain(n)) in followed:
                    continue
                followed.add(chain)
                work += 1 + len(history.get(chain[0], ()))
                if work > MAX_WORK:  # never silently loop-free: too much to follow is a unit not read
                    raise RecursionError("too many names and bindings to follow")
                if isinstance(n, ast.Attribute) and _root(n) in imported:
                    todo.append((self._attribute(n, imported), me))
                if isinstance(n, ast.Name):
                    todo.extend((r, me) for r in _distinct([*history.get(n.id, []), env.get(n.id, _OTHER)]))
                else:
                    todo.append((self._attribute(n, env), me))
                    todo.extend((self._attribute(n, {_root(n): h}), me) for h in _distinct(history.get(_root(n), [])))
        found.update(_recursive(edges, where))
        return sorted(found, key=_order)


def _chain(n: ast.Name | ast.Attribute) -> tuple[str, ...]:
    """`a.b.c` -> ("a", "b", "c"): what a read follows, whatever the occurrence."""
    parts: list[str] = []
    x: ast.expr = n
    while isinstance(x, ast.Attribute):
        parts.append(x.attr)
        x = x.value
    parts.append(x.id if isinstance(x, ast.Name) else "")
    return tuple(reversed(parts))


def _distinct(refs: list[_Ref]) -> list[_Ref]:
    """Each binding once: `g = g = ... = 0` binds one value under as many entries."""
    return list({id(r): r for r in refs}.values())


def _recursive(edges: dict[int, set[int]], where: dict[int, int | str]) -> set[int | str]:
    """The functions on a cycle of `edges` (one that refers back to itself, directly or through others): a
    recursion walks the tokens as a loop would. Their def lines."""
    out: set[int | str] = set()
    for node in where:
        stack, seen = list(edges.get(node, ())), set()
        while stack:  # can `node` reach itself?
            n = stack.pop()
            if n == node:
                out.add(where[node])
                break
            if n not in seen:
                seen.add(n)
                stack.extend(edges.get(n, ()))
    return out


def _own_expressions(node: ast.stmt) -> list[ast.AST]:
    """What a statement holds short of the statements inside it (a block's body is run statement by statement,
    each then looked at once; a def's or a class's body is not module-level code)."""
    out: list[ast.AST] = []
    todo = [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.stmt)]
    while todo:
        n = todo.pop()
        out.append(n)
        todo.extend(c for c in ast.iter_child_nodes(n) if not isinstance(c, ast.stmt))
    return out


def _order(x: int | str) -> tuple[bool, int, str]:
    return isinstance(x, str), x if isinstance(x, int) else 0, str(x)


def _root(n: ast.Attribute) -> str:
    root: ast.expr = n
    while isinstance(root, ast.Attribute):
        root = root.value
    return root.id if isinstance(root, ast.Name) else ""


def _free(root: ast.AST) -> list[ast.Name | ast.Attribute]:
    """The names `root` reads from the module (a Name, or an Attribute chain on a Name), each scope's own
    bindings left out: a function's parameters and assignments shadow a module-level name for its body and the
    functions inside it, never for the code around it (its decorators and defaults, a sibling function), and a
    name it declares global is the module's. A class body's names shadow nothing here (its methods do not see
    them; the body itself may read the module's before it binds its own)."""
    scope_of: dict[int, ast.AST | None] = {}  # node -> the innermost function scope it is read in
    parent: dict[int, ast.AST | None] = {id(root): None}
    todo: list[tuple[ast.AST, ast.AST | None]] = [(root, None)]
    bound: dict[int, set[str]] = {}
    declared: dict[int, set[str]] = {}
    reads: list[ast.Name | ast.Attribute] = []
    while todo:
        node, scope = todo.pop()
        scope_of[id(node)] = scope
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            outer = [*getattr(node, "decorator_list", []), *node.args.defaults,
                     *[d for d in node.args.kw_defaults if d is not None], *(
                         [a.annotation for a in ast.walk(node.args) if isinstance(a, ast.arg) and a.annotation]),
                     *([node.returns] if getattr(node, "returns", None) else [])]
            outer_ids = {id(o) for o in outer}
            todo.extend((o, scope) for o in outer)
            parent[id(node)] = scope
            bound[id(node)] = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            for child in ast.iter_child_nodes(node):
                if id(child) not in outer_ids and not isinstance(child, ast.arguments):
                    todo.append((child, node))
            continue
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                reads.append(node)
            elif scope is not None:
                bound.setdefault(id(scope), set()).add(node.id)
        elif isinstance(node, ast.Attribute) and _root(node):
            if isinstance(node.ctx, ast.Load):
                reads.append(node)
        elif isinstance(node, ast.Global) and scope is not None:
            declared.setdefault(id(scope), set()).update(node.names)
        todo.extend((c, scope) for c in ast.iter_child_nodes(node))

    def shadowed(name: str, scope: ast.AST | None) -> bool:
        while scope is not None:
            if name in bound.get(id(scope), set()) - declared.get(id(scope), set()):
                return True
            scope = parent.get(id(scope))
        return False

    return [r for r in reads if not shadowed(r.id if isinstance(r, ast.Name) else _root(r), scope_of[id(r)])]


def _called(call: ast.Call) -> str:
    """The name a call is made by: `f(...)` -> f, `a.b.f(...)` -> f."""
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _dynamic_lines(tree: ast.AST, read: frozenset[str] = frozenset(), unsafe: _Unsafe | None = None) -> list[int]:
    """Lines that may bind names where the symbolic run cannot see: a call of a DYNAMIC_BUILTINS name or of a
    DYNAMIC_METHODS method, setattr or getattr by a name that may be an unsafe one (_may_be_unsafe), a read of a
    DYNAMIC_ATTRS attribute or of `__builtins__`, `sys.modules`, an import of `builtins`, and an assignment to a
    DYNAMIC_DUNDERS attribute or to an attribute named like a loop-free function."""
    lines = []
    unsafe = unsafe or _Unsafe(read)
    scopes: dict[int, dict[str, set[str]]] | None = None  # call -> its function's loop variables, when needed
    callees: set[int] = set()  # ast.walk visits a call before its callee
    libraries: set[str] | None = None  # the names this file binds only by importing torch (numpy, math), when needed
    # `import sys as s`: s.modules is sys.modules (the aliases are known once the one walk is done)
    sys_names = {"sys"}
    modules_reads: list[ast.Attribute] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            sys_names.update(a.asname for a in n.names if a.name == "sys" and a.asname)
        elif isinstance(n, ast.Attribute) and n.attr == "modules" and isinstance(n.value, ast.Name):
            modules_reads.append(n)
        if isinstance(n, ast.Name) and n.id in _VALUE_BUILTINS and isinstance(n.ctx, ast.Load) and id(n) not in callees:
            lines.append(n.lineno)  # `_s = setattr`, `map(exec, ...)`: called under another name
        if isinstance(n, ast.Call):
            callees.add(id(n.func))
            f = n.func
            if isinstance(f, ast.Name):
                if f.id in ("setattr", "getattr"):
                    scopes = _loops_by_call(tree) if scopes is None else scopes
                    if len(n.args) < 2 or _may_be_unsafe(n.args[1], scopes.get(id(n), {}), unsafe):
                        lines.append(n.lineno)
                elif f.id in DYNAMIC_BUILTINS:
                    lines.append(n.lineno)
            elif isinstance(f, ast.Attribute) and (f.attr in DYNAMIC_METHODS or (
                    isinstance(f.value, ast.Name) and f.value.id == "builtins")):
                lines.append(n.lineno)
        elif _opens_a_namespace(n):
            lines.append(n.lineno)  # type: ignore[attr-defined]
        elif isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Attribute) and (t.attr in DYNAMIC_DUNDERS or t.attr in LOOP_FREE):
                    lines.append(n.lineno)
                elif isinstance(t, ast.Attribute) and t.attr in read:
                    libraries = _library_names(tree) if libraries is None else libraries
                    if not _library_object(n.value, libraries):
                        lines.append(n.lineno)
    lines += [n.lineno for n in modules_reads if isinstance(n.value, ast.Name) and n.value.id in sys_names]
    return sorted(set(lines))


_LIBRARIES = {"torch", "numpy", "math"}


def _library_names(tree: ast.AST) -> set[str]:
    """The names `tree` binds only by importing torch (numpy, math): never by another import, an assignment, a
    def, a class or a parameter. One walk per file (a walk per store was stores x size)."""
    imported: set[str] = set()
    other: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import | ast.ImportFrom):
            source = (n.module or "") if isinstance(n, ast.ImportFrom) else ""
            relative = isinstance(n, ast.ImportFrom) and bool(n.level)
            for a in n.names:
                name = a.asname or a.name.split(".")[0]
                library = (source or a.name).split(".")[0] in _LIBRARIES and not relative
                (imported if library else other).add(name)
        elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            other.add(n.id)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            other.add(n.name)
        elif isinstance(n, ast.arg):
            other.add(n.arg)
    return imported - other


def _library_object(value: ast.expr | None, libraries: set[str]) -> bool:
    """`nn.Softmax(dim=-1)`: a call of torch (numpy, math) with constant arguments, by a name this file binds only by
    importing it (`libraries`). Stored under a name the loop-free functions read (`self.softmax = ...` in a later
    step's __init__), it holds no code of the submission, so it cannot bring loops in (red team 10: honest code
    lost the loop point for it)."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute | ast.Name):
        return False
    root = _root(value.func) if isinstance(value.func, ast.Attribute) else value.func.id
    consts = [*value.args, *(k.value for k in value.keywords)]
    return root in libraries and all(isinstance(c, ast.Constant) or (
        isinstance(c, ast.UnaryOp) and isinstance(c.operand, ast.Constant)) for c in consts)


def _opens_a_namespace(n: ast.AST) -> bool:
    """A read of a DYNAMIC_ATTRS attribute, `__builtins__`, a DYNAMIC_HOOKS name, or an import of
    `builtins` or of ctypes (which writes any object's memory, a module's dict included, with no name in the text)."""
    if isinstance(n, ast.Attribute):
        return n.attr in DYNAMIC_ATTRS or n.attr in DYNAMIC_HOOKS  # `sys.modules`: _dynamic_lines, by any alias
    if isinstance(n, ast.Name):
        return n.id == "__builtins__" or (n.id in DYNAMIC_HOOKS and n.id != "monitoring")
    if isinstance(n, ast.Import):
        return any(a.name.split(".")[0] in _NAMESPACE_MODULES for a in n.names)
    return isinstance(n, ast.ImportFrom) and ((n.module or "").split(".")[0] in _NAMESPACE_MODULES
                                              or any(a.name in DYNAMIC_HOOKS for a in n.names)
                                              or (n.module == "sys" and any(a.name == "modules" for a in n.names)))


def _loops_by_call(tree: ast.AST) -> dict[int, dict[str, set[str]]]:
    """For each call inside a function, that innermost function's _constant_loops. A module-level name is never
    pinned down: another cell or file may rebind it before a function reads it. One walk: each function's own
    scope is read once (a walk of each whole subtree cost depth x size: 95 nested defs, 3 minutes; red team 12)."""
    out: dict[int, dict[str, set[str]]] = {}
    todo: list[tuple[ast.AST, dict[str, set[str]] | None]] = [(tree, None)]
    while todo:
        node, loops = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            loops = _constant_loops(node)
        elif isinstance(node, ast.Call) and loops is not None:
            out[id(node)] = loops
        todo.extend((c, loops) for c in ast.iter_child_nodes(node))
    return out


def _own_scope(fn: ast.AST) -> list[ast.AST]:
    """`fn` and what it holds, short of the bodies of the functions (and classes) defined inside it: their names
    are their own."""
    out: list[ast.AST] = []
    todo = [fn]
    while todo:
        n = todo.pop()
        out.append(n)
        if n is not fn and isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue  # its name (and decorators, defaults) belong here; what it binds inside does not
        todo.extend(ast.iter_child_nodes(n))
    return out


def _constant_loops(tree: ast.AST) -> dict[str, set[str]]:
    """Names whose every binding in `tree` (a function) is a `for` over a tuple or list of strings written out
    (`for name in ("W_query", "W_key")`): the strings each may hold. A name bound any other way (an assignment,
    a parameter, an import, a def, `except ... as`, a match, global/nonlocal) is left out."""
    strings: dict[str, set[str]] = {}
    other: set[str] = set()
    targets: set[int] = set()
    nodes = _own_scope(tree)
    for n in nodes:
        if isinstance(n, ast.For | ast.AsyncFor | ast.comprehension) and isinstance(n.target, ast.Name):
            targets.add(id(n.target))
            it = n.iter
            if isinstance(it, ast.Tuple | ast.List) and it.elts and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in it.elts):
                strings.setdefault(n.target.id, set()).update(e.value for e in it.elts)  # type: ignore[attr-defined]
            else:
                other.add(n.target.id)
    for n in nodes:
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del) and id(n) not in targets:
            other.add(n.id)
        elif isinstance(n, ast.arg):
            other.add(n.arg)
        elif isinstance(n, ast.Global | ast.Nonlocal):
            other.update(n.names)
        elif isinstance(n, ast.alias):
            other.add((n.asname or n.name).split(".")[0])
        elif (isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n is not tree) or (
                isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and n.name):
            other.add(n.name)  # type: ignore[arg-type]
        elif isinstance(n, ast.MatchMapping) and n.rest:
            other.add(n.rest)
    return {k: v for k, v in strings.items() if k not in other}


def _prefix(expr: ast.expr) -> str | None:
    """The text a string expression surely starts with ("" when nothing is sure), or None if it is no string
    expression this reading knows: a constant, an f-string, `"b" + name`."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.JoinedStr):
        first = expr.values[0] if expr.values else None
        return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _prefix(expr.left)
    return None


class _Unsafe:
    """_UNSAFE_NAMES and the names the loop-free functions read, made once per reading: a set, and the same names
    sorted to find one that starts with a prefix in log time (a scan of all of them per setattr cost reads x
    setattrs: red team 12)."""

    def __init__(self, read: frozenset[str] = frozenset()):
        self.names = _UNSAFE_NAMES | read
        self.sorted = sorted(self.names)

    def starts_with(self, prefix: str) -> bool:
        i = bisect.bisect_left(self.sorted, prefix)
        return i < len(self.sorted) and self.sorted[i].startswith(prefix)


def _may_be_unsafe(expr: ast.expr, loops: dict[str, set[str]], unsafe: _Unsafe) -> bool:
    """May this attribute name (setattr's or getattr's second argument) be one of _UNSAFE_NAMES? Only a name the
    text pins down is safe: a constant, a loop variable over written-out strings, or a string that starts with
    something no unsafe name starts with (f"layer_{i}", "b" + name)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value in unsafe.names
    if isinstance(expr, ast.Name) and expr.id in loops:
        return bool(loops[expr.id] & unsafe.names)
    prefix = _prefix(expr)
    return not prefix or unsafe.starts_with(prefix)


def analyse(sub: Submission) -> dict[str, Any]:
    """{"loops": {name: lines}} for the names that must be loop-free, each as the worker will find it: bound in
    the first module (in the order the worker loads them) that binds it, by whatever binding comes last; and
    {"unread": [unit labels]}, the units of those modules this process could not parse (too deeply nested);
    {"rebound": {name: [unit labels]}}: where a name with loops is bound in more than one notebook cell (a later,
    loop-free def may not have run: the learner is told to remove or rename the version with loops)."""
    spaces = _Namespaces(sub)
    loops: dict[str, list[int | str]] = {}
    done: set[str] = set()
    rebound: dict[str, list[str]] = {}
    for module, units in spaces.units.items():
        # parsing costs: only the modules that mention one of the names (or may bring it in with `import *`)
        if not any(name in u.text or _STAR.search(u.text) for u in units for name in LOOP_FREE):
            continue
        try:
            env = spaces.env(module)
            for name in LOOP_FREE:
                if name in env and name not in done:
                    found = spaces.loops(env[name], spaces.bound_in[module].get(name, units[0].label))
                    loops[name] = sorted({*loops.get(name, []), *found}, key=_order)
                    cells = list(dict.fromkeys(r.label for r in spaces.history.get(module, {}).get(name, [])
                                               if r.kind == "code" and r.label.startswith("cell ")))
                    if found and len(cells) > 1:
                        rebound[name] = cells
                    if not spaces.may_be_absent(env[name]):  # else the worker may take a later module's
                        done.add(name)
        except (RecursionError, MemoryError):
            # never silently loop-free: a unit too deep for us to parse may define these names, with loops
            spaces.unread.update(u.label for u in units)
    # every unit, whether or not it names the functions: another file may rebind them by a computed name. A
    # unit naming none of the triggers has nothing to find: it is not walked (a walk is ~1 ms a notebook cell)
    dynamic = []
    read = frozenset(spaces.read - {"self", "cls"})
    # a write to one of those is an attribute (`.name`, with anything Python allows between: a line continuation, a
    # comment inside brackets) or a setattr (a trigger): a unit that names one at all is walked. (A regex for
    # `.name` across comments backtracked, exponentially and then quadratically: red teams 11, 12)
    unsafe = _Unsafe(read)
    for unit in sub.units:
        if not any(t in unit.text for t in _TRIGGERS) and read.isdisjoint(_IDENTIFIER.findall(unit.text)):
            continue
        tree = unit.parsed  # a unit that does not parse here is reported above (unread) or by the worker
        if not isinstance(tree, Exception):
            try:
                dynamic += [f"{line} ({unit.label})" for line in _dynamic_lines(tree, read, unsafe)]
            except (RecursionError, MemoryError):  # `setattr(x, a + a + ... + a)`: too deep to tell, never safe
                spaces.unread.add(unit.label)
    return {"loops": loops, "unread": sorted(spaces.unread), "dynamic": dynamic[:5], "rebound": rebound}
