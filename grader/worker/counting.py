"""How much work one call does, counted where the learner's code runs: Python line events and torch calls.

Step 4 asks for its three functions without Python loops. A loop over the tokens, whatever its form (for, while, a
comprehension, recursion, map with a lambda, iter(f, sentinel), exec'd text, functools.reduce, a loop in a helper
module, a torch call per token made from C as in list(map(torch.dot, ...)), a TorchScript loop), does more work as
num_tokens grows: more line events, more torch calls, or more torch operations. `measure` counts the three for one
call; `grader.worker.probes.loops` calls a function at two sizes and the trusted check compares the counts
(grader/checks/all_tokens.py). Nothing is read from the text, so no list of the ways to write a loop is kept.

What is counted:
- lines: every 'line' event (sys.settrace) in any Python frame the call runs, the learner's files, exec'd text, the
  standard library and torch's Python code alike, except this module's own frames, the frames of torch's mode
  machinery (it runs once per torch call, which is counted anyway) and everything beneath torch's genuine tensor
  printing (a `print(x)` inside the function formats more numbers for more tokens, and is no loop of the learner's).
  Those are recognised by their code objects, collected at import before any learner code runs, never by a file name
  (exec'd text can claim any file name).
- calls: the torch functions and tensor methods called (a TorchFunctionMode: those torch itself calls inside one are
  not seen, so printing or einsum count once). Tensor.apply_/map_/map2_ call a Python callable per element, which
  may be C (math.exp) and so makes no line event, and tolist makes a Python number of each element (to be iterated
  in C: itertools, map): each counts as one call per element of the tensor.
- ops: the ATen operations run (a TorchDispatchMode), which also sees the operations of TorchScript code.

Whether the instruments stayed in place ("tampered"): the tracer was replaced or removed (checked after the call,
and through an audit hook in a worker: a sys.settrace or sys.setprofile during the call, even one undone before it
returns), a torch mode was popped, or a thread started (its work is not counted). The trusted side takes a count
made with any of these as no proof.

Untrusted side: this runs in the worker, on the learner's functions. What it reports is a fact like any other: the
learner's code could patch it, so it counts only once the function's outputs are right (grader/checks/vouching.py),
and code that studies the grader this way raises a flag for the instructor (grader/grading/flags.py).
"""

from __future__ import annotations

import _thread
import contextlib
import importlib
import inspect
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch._ops
import torch._tensor_str
import torch.overrides
import torch.utils._python_dispatch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# torch's lookups for a dispatch mode, where this torch has them (they run with the mode off its stack: UNCOUNTED)
for _name in ("torch._library.simple_registry", "torch._library.effects"):
    with contextlib.suppress(ImportError):
        importlib.import_module(_name)
# what `_local` reads of torch's mode stacks (torch >= 2.2 has them; without them no line is checked)
_STACKS = all(hasattr(torch._C, n) for n in ("_len_torch_function_stack", "_len_torch_dispatch_stack",
                                             "_is_torch_function_enabled", "_dispatch_tls_is_dispatch_key_excluded"))

# tensor methods that hand every element to Python: three call a Python callable once per element, and tolist makes a
# Python number of each (what is then done with them, in C or in Python, is per element)
PER_ELEMENT = frozenset({torch.Tensor.apply_, torch.Tensor.map_, torch.Tensor.map2_, torch.Tensor.tolist})


def _codes_in(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes_in(const)


def _codes_of(obj: Any) -> Iterator[types.CodeType]:
    """The code objects of a function (its nested functions and comprehensions too), or of a class's functions."""
    if isinstance(obj, staticmethod | classmethod):
        obj = obj.__func__
    if isinstance(obj, property):
        for f in (obj.fget, obj.fset, obj.fdel):
            if f is not None:
                yield from _codes_of(f)
        return
    obj = inspect.unwrap(obj) if callable(obj) else obj
    if isinstance(obj, types.FunctionType):
        yield from _codes_in(obj.__code__)
    elif isinstance(obj, type):
        for member in vars(obj).values():
            yield from _codes_of(member)


def _module_codes(module: types.ModuleType) -> set[types.CodeType]:
    """Code objects of the functions and classes a module defines (not those it imports)."""
    out: set[types.CodeType] = set()
    for obj in vars(module).values():
        if getattr(obj, "__module__", None) == module.__name__:
            out.update(_codes_of(obj))
    return out


@dataclass
class Counts:
    lines: int = 0
    calls: int = 0
    ops: int = 0
    tampered: set[str] = field(default_factory=set)


class _State:
    counts: Counts | None = None  # the call being measured, if any
    thread: int = 0  # the thread it runs in
    quiet: int = 0  # depth of genuine tensor printing: nothing beneath it is counted
    inside: int = 0  # depth of the modes' own handlers, where torch has taken the mode off its stack
    depth: tuple[int, int] = (0, 0)  # the function and dispatch mode stacks' sizes with both modes on


_STATE = _State()


class _Calls(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        counts = _STATE.counts
        if counts is not None and not _STATE.quiet:
            counts.calls += 1
            if func in PER_ELEMENT and args and isinstance(args[0], torch.Tensor):
                counts.calls += args[0].numel()
        _STATE.inside += 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            _STATE.inside -= 1


class _Ops(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # else torch wraps __torch_dispatch__ in a dynamo guard whose first call imports torch._dynamo
        # (seconds, and a cache folder a worker may not write)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        counts = _STATE.counts
        if counts is not None and not _STATE.quiet:
            counts.ops += 1
        _STATE.inside += 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            _STATE.inside -= 1


def _local(frame: types.FrameType, event: str, arg: Any) -> Callable | None:
    counts = _STATE.counts
    if event == "line" and counts is not None:
        counts.lines += 1
        # a line run with the modes off (DisableTorchFunction, _disable_current_modes, a popped mode) makes torch
        # calls no mode counts; the modes are put back before the call returns, so it is seen here or nowhere
        if _STACKS and not _STATE.inside and (_depths() != _STATE.depth or not torch._C._is_torch_function_enabled()
                                  or torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python)):
            counts.tampered.add("modes")
    return _local


def _depths() -> tuple[int, int]:
    return (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()) if _STACKS else (0, 0)


def _quiet_local(frame: types.FrameType, event: str, arg: Any) -> Callable | None:
    if event == "return":
        _STATE.quiet -= 1
    return _quiet_local


def _global(frame: types.FrameType, event: str, arg: Any) -> Callable | None:
    """sys.settrace's hook: a new frame (event 'call')."""
    counts = _STATE.counts
    if counts is None:
        return None
    if _thread.get_ident() != _STATE.thread:  # threading.settrace brought it to a thread the call started
        counts.tampered.add("thread")
        return None
    code = frame.f_code
    if _STATE.quiet or code in OURS:
        return None
    if code in QUIET:
        _STATE.quiet += 1
        return _quiet_local
    if code in UNCOUNTED:
        return None  # its own lines only: what it calls is traced
    return _local


# collected at import, in the zygote, before any learner code runs: identities the learner cannot forge (OURS, this
# module's own code, at its end)
OURS: set[types.CodeType] = set()
# torch's printing of a tensor (print(x), f"{x}") and what it calls
QUIET = _module_codes(torch._tensor_str) | {c for m in (torch.Tensor.__repr__, torch.Tensor.__format__)
                                           for c in _codes_of(m)}
# torch's mode machinery, run once per torch call or operation (each counted): handle_torch_function, the modes'
# enter and exit, OpOverload.__call__, torch._library's lookups for a dispatch mode (the rule of an operation, its
# effects), and contextlib's context managers, through which torch takes a mode off its stack while it calls it
UNCOUNTED = set().union(*(_module_codes(m) for m in (
    torch.overrides, torch.utils._python_dispatch, torch._ops, contextlib,
    *(m for name, m in list(sys.modules.items()) if name.startswith("torch._library.") and m is not None))))


class _Audit:
    """One audit hook per process (hooks cannot be removed): while a call is measured, a sys.settrace or
    sys.setprofile by anyone but `measure` marks it. Added in a worker only (`arm`), never in the trusted process."""

    added = False
    ours = False  # set while measure itself calls sys.settrace

    @classmethod
    def hook(cls, event: str, args: Any) -> None:
        counts = _STATE.counts
        if counts is not None and not cls.ours and event in ("sys.settrace", "sys.setprofile"):
            counts.tampered.add("trace")
        if event == "attn_kata.counting":
            cls.added = True

    @classmethod
    def arm(cls) -> bool:
        """Add the hook (once) and see it answer: a hook the learner added first may refuse ours silently."""
        if not cls.added:
            sys.addaudithook(cls.hook)
            sys.audit("attn_kata.counting")
        return cls.added


def _settrace(fn: Callable | None) -> None:
    _Audit.ours = True
    try:
        sys.settrace(fn)
    finally:
        _Audit.ours = False


WORKER = [0]  # the worker's pid, set by grader.worker.serve: only there is the audit hook added (`_Audit`)


def measure(fn: Callable[..., Any], args: list[Any]) -> tuple[Any, Counts]:
    """Call fn(*args) and count its work."""
    counts = Counts()
    if WORKER[0] and os.getpid() == WORKER[0] and not _Audit.arm():
        counts.tampered.add("trace")
    previous, previous_threads = sys.gettrace(), threading.gettrace()
    threads = _thread._count()
    calls, ops = _Calls(), _Ops()
    with calls, ops:
        _STATE.counts, _STATE.thread, _STATE.quiet, _STATE.inside = counts, _thread.get_ident(), 0, 0
        _STATE.depth = _depths()
        threading.settrace(_global)
        _settrace(_global)
        try:
            result = fn(*args)
        finally:
            if sys.gettrace() is not _global:
                counts.tampered.add("trace")
            _settrace(previous)
            threading.settrace(previous_threads)  # type: ignore[arg-type]
            _STATE.counts = None
            if not _on_the_stacks(calls, ops):
                counts.tampered.add("modes")
    if _thread._count() != threads:
        counts.tampered.add("thread")
    return result, counts


def _on_the_stacks(calls: _Calls, ops: _Ops) -> bool:
    """Are both modes still the innermost of their stacks, and torch functions on?"""
    try:
        n_f, n_d = torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()
        return (n_f > 0 and torch._C._get_function_stack_at(n_f - 1) is calls and n_d > 0
                and torch._C._get_dispatch_stack_at(n_d - 1) is ops and torch._C._is_torch_function_enabled())
    except Exception:  # an API this torch lacks: no proof either way, so none
        return False


OURS.update(_module_codes(sys.modules[__name__]))
