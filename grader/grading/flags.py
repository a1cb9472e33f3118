"""Signs that a submission studies the grader rather than the chapter, for the instructor to look at.

The checks judge behaviour, and what the worker reports about itself counts only beside right outputs (docs/
design.md §5); but code that knows it is graded (it reads the probe's frames, patches the grader's modules,
overrides what nn.Module reports of itself) can still behave one way under the grader and another elsewhere, and no
output check tells. None of that is needed by the chapter's code, so it is worth a human's look: each sign found is
listed, with where it is, in the JSON report (`flags`) and the batch's summary. A flag never changes a score, and
the scan reads the text only (trusted side, never running it); honest code of any shape raises none
(tests/test_flags.py runs it on the solutions and every fixture).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from grader.grading.ingest import Submission
from grader.i18n import N_, deferred, translate

GRADER = N_("uses the grader's own modules")
SCAFFOLDING = frozenset({"check"})  # what the kata's generated notebooks import from `grader` (learner/init.py)
FRAMES = N_("reads the call stack's frames")
HEAP = N_("searches the interpreter's objects (gc)")
OVERRIDE = N_("overrides `{name}`, which the grader asks a module about itself")
PATCH = N_("replaces a part of torch or of Python's builtins")
OUTSIDE = N_("reaches outside Python (ctypes, /proc, processes, sockets)")
MODES = N_("switches off torch's function or dispatch modes, with which the grader counts step 4's work")

# what nn.Module reports of itself, or does when the grader moves it: redefining it is not the chapter's business
REPORTING = frozenset({"_apply", "named_buffers", "buffers", "named_parameters", "parameters", "state_dict",
                       "load_state_dict", "_load_from_state_dict", "named_modules", "modules", "named_children",
                       "children", "__getattribute__", "__dir__", "__class__", "__instancecheck__"})
FRAME_ATTRS = frozenset({"_getframe", "f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gi_frame",
                         "cr_frame", "currentframe", "getouterframes", "getinnerframes", "settrace", "setprofile"})
HEAP_ATTRS = frozenset({"get_objects", "get_referrers", "get_referents"})
# what takes torch's modes off their stacks, or turns them off (grader/worker/counting.py counts with them)
MODES_ATTRS = frozenset({"DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchDispatch",
                         "_disable_current_modes", "_pop_mode", "_pop_mode_temporarily", "_pop_torch_function_stack",
                         "_pop_torch_dispatch_stack", "_unset_dispatch_mode", "_set_torch_function_mode"})
OUTSIDE_MODULES = frozenset({"ctypes", "_ctypes", "subprocess", "socket", "_socket", "multiprocessing", "mmap",
                             "signal", "pty", "resource"})
OUTSIDE_CALLS = frozenset({"fork", "forkpty", "system", "popen", "execv", "execve", "kill", "killpg",
                           "process_vm_readv", "pidfd_open", "ptrace"})
PATCHED_ROOTS = frozenset({"torch", "nn", "F", "builtins", "__builtins__", "sys"})
# what a unit's text must hold for the scan to parse it (most of a class's notebooks hold none): plain substrings,
# which Python finds faster than one regular expression of alternatives, then two anchored expressions
NEEDLES = ("grader", "frame", "f_back", "f_locals", "f_globals", "f_builtins", "settrace", "setprofile", "get_obj",
           "get_referr", "get_referents", "setattr", "delattr", "builtins", "ctypes", "subprocess", "socket",
           "multiprocessing", "mmap", "signal", "pty", "resource", "fork", "popen", "system", "exec", "kill",
           "process_vm", "pidfd", "ptrace", "/proc", "Disable", "_disable", "_pop_", "_unset_dispatch",
           "_set_torch_function")
_REPORTING = "|".join(sorted(REPORTING))
DEFINES = re.compile(rf"def\s+(?:{_REPORTING})\b")  # a literal start: found fast
# a line assigning to something of torch, nn, F, builtins or sys (`torch.softmax = f`, `a, nn.Module.x = ...`) or to
# a name nn.Module reports (`CausalAttention.named_buffers = f`), or a del
STORE_ROOTS = ("torch", "nn", "F", "builtins", "__builtins__", "sys")
_REPORTED_ATTRS = tuple(f".{name}" for name in REPORTING)


def may_store(text: str) -> bool:
    """Does a line assign to something of torch, nn, F, builtins or sys (`torch.softmax = f`, `a, nn.Module.x = ...`)
    or to a name nn.Module reports (`CausalAttention.named_buffers = f`), or del? Then the unit's parse is walked.
    Line by line, in time linear in the text (a regex for it backtracked quadratically in a line's length, twice
    over: red teams 11, 12)."""
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("del") and stripped[3:4] in ("", " ", "\t", "("):
            return True
        if "=" not in line:
            continue
        left = line.split("=", 1)[0]
        if line[len(left) + 1:len(left) + 2] == "=" or left.endswith(("!", "<", ">")):
            continue  # a comparison
        targets = [t.strip() for t in left.split(",")]
        if any(t.startswith(STORE_ROOTS) for t in targets) or "".join(left.split()).endswith(_REPORTED_ATTRS):
            return True
    return False
# configuration a notebook may set on torch without replacing anything of it
ALLOWED_STORES = ("torch.backends.",)


def scan(sub: Submission) -> list[dict[str, str]]:
    """[{"where": "cell 3, line 2", "what": ...}], one per sign and place, unworded (grader.i18n.Text)."""
    out: list[dict[str, str]] = []
    seen: set[tuple[Any, ...]] = set()
    for unit in sub.units:
        text = unit.text  # as Python reads its names (NFKC)
        if not any(n in text for n in NEEDLES) and not DEFINES.search(text) and not may_store(text):
            continue
        tree = unit.parsed  # made once per unit; identifiers in it are as Python reads them (NFKC)
        if isinstance(tree, Exception):
            continue  # the worker reports what does not load
        for node in ast.walk(tree):
            for msgid, params in _signs(node):
                line = getattr(node, "lineno", 0)
                key = (unit.label, line, msgid, tuple(sorted(params.items())))
                if key not in seen:
                    seen.add(key)
                    with deferred():
                        out.append({"where": translate(None, N_("{unit}, line {line}")).format(unit=unit.label,
                                                                                               line=line),
                                    "what": translate(None, msgid).format(**params)})
    return out


def _root(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _signs(node: ast.AST) -> list[tuple[str, dict[str, str]]]:
    signs: list[tuple[str, dict[str, str]]] = []
    if isinstance(node, ast.Import | ast.ImportFrom):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        if isinstance(node, ast.ImportFrom):
            names += [f"{node.module}.{a.name}" if node.module else a.name for a in node.names]
        roots = {n.split(".")[0] for n in names}
        # the kata's own scaffolding (`init --notebook` writes `from grader import check`) is no sign
        scaffolding = isinstance(node, ast.ImportFrom) and node.module == "grader" and node.level == 0 and all(
            a.name in SCAFFOLDING for a in node.names)
        if "grader" in roots and not scaffolding:
            signs.append((GRADER, {}))
        if roots & OUTSIDE_MODULES:
            signs.append((OUTSIDE, {}))
        if isinstance(node, ast.ImportFrom) and node.module in ("sys", "inspect") and any(
                a.name in FRAME_ATTRS for a in node.names):
            signs.append((FRAMES, {}))
        if isinstance(node, ast.ImportFrom) and node.module == "gc" and any(a.name in HEAP_ATTRS for a in node.names):
            signs.append((HEAP, {}))
        if isinstance(node, ast.ImportFrom) and any(a.name in MODES_ATTRS for a in node.names):
            signs.append((MODES, {}))
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        v = node.value
        if v == "grader" or v.startswith("grader."):
            signs.append((GRADER, {}))
        elif v.startswith("/proc/") or v in ("/proc", "ctypes", "subprocess", "socket"):
            signs.append((OUTSIDE, {}))
    elif isinstance(node, ast.Attribute):
        if node.attr in FRAME_ATTRS:
            signs.append((FRAMES, {}))
        elif node.attr in HEAP_ATTRS and _root(node) == "gc":
            signs.append((HEAP, {}))
        elif node.attr in OUTSIDE_CALLS and _root(node) in ("os", "posix", "pty"):
            signs.append((OUTSIDE, {}))
        elif node.attr in MODES_ATTRS:
            signs.append((MODES, {}))
        if isinstance(node.ctx, ast.Store | ast.Del) and _root(node.value) in PATCHED_ROOTS and not (
                ast.unparse(node).startswith(ALLOWED_STORES)):
            signs.append((PATCH, {}))
        elif isinstance(node.ctx, ast.Store) and node.attr in REPORTING:
            signs.append((OVERRIDE, {"name": node.attr}))
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del) and _root(node.value) in (
            "sys", "builtins", "__builtins__"):
        signs.append((PATCH, {}))  # sys.modules["torch"] = ..., builtins.__dict__["len"] = ...
    elif isinstance(node, ast.ClassDef):
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name in REPORTING:
                signs.append((OVERRIDE, {"name": item.name}))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
        if node.args and _root(node.args[0]) in PATCHED_ROOTS:
            signs.append((PATCH, {}))
        elif len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in REPORTING:
            signs.append((OVERRIDE, {"name": str(node.args[1].value)}))
    return signs
