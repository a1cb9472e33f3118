"""The untrusted side: a forked process that imports a submission and runs probes on it.

It holds no reference outputs and makes no judgement. It receives inputs and sends back
outputs over a private pipe, as safetensors bytes (grader/sandbox/channel.py).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import linecache
import os
import socket
import sys
import time
import traceback
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

from grader import limits
from grader.registry import ALL_NAMES, BY_MODULE
from grader.sandbox import channel, common
from grader.worker import counting, probes, standins

MAX_MESSAGE = limits.WORKER_MESSAGE_CHARS
_ABSENT = object()
MAX_RESULT_ELEMENTS = limits.CASE_ELEMENTS  # per case; honest answers are a few thousand


class UnitFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the submission's files as importable modules, from memory. A step's file is its id's module
    (`causal_attention`), whichever name the file has; its other name (`step09_causal_attention`, registry.Step.stem)
    is the same module object, so a learner's `from step09_causal_attention import …` and `from causal_attention
    import …` both reach the learner's own file (or, for a later step's grading, the stand-ins put in its place)."""

    def __init__(self, units: list[tuple[str, str, str]]):
        self.sources: dict[str, tuple[str, str]] = {}
        for module, label, source in units:
            if module not in self.sources:
                self.sources[module] = (label, source)
        self.aliases = {name: step.id for name, step in BY_MODULE.items()
                        if name != step.id and step.id in self.sources and name not in self.sources}
        self.run: weakref.WeakSet[types.ModuleType] = weakref.WeakSet()  # module objects run (or running)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in self.sources:
            return importlib.util.spec_from_loader(fullname, self, origin=self.sources[fullname][0])
        if fullname in self.aliases:
            return importlib.util.spec_from_loader(fullname, self, origin=self.sources[self.aliases[fullname]][0])
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        if spec.name in self.aliases:  # the other name of a step's module: that module itself, imported (once)
            return importlib.import_module(self.aliases[spec.name])
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        if module in self.run:
            return  # reached by its step's other name: create_module returned the module, already run (or running)
        self.run.add(module)
        label, source = self.sources[module.__name__]
        _remember(label, source)
        exec(compile(source, label, "exec"), module.__dict__)


def _remember(label: str, source: str) -> None:
    linecache.cache[label] = (len(source), None, source.splitlines(True), label)


def describe_error(exc: BaseException, labels: set[str]) -> dict[str, Any]:
    """Exception name, message and the deepest line of the learner's own code."""
    where = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename in labels:
            where = {"file": frame.filename, "line": frame.lineno, "code": (frame.line or "")[:200]}
    if isinstance(exc, SyntaxError) and exc.filename in labels:
        where = {"file": exc.filename, "line": exc.lineno, "code": (exc.text or "").strip()[:200]}
    text = str(exc)
    return {"exception": type(exc).__name__, "message": text[:MAX_MESSAGE], "where": where}


def load_units(units: list[tuple[str, str, str]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Execute the submission. Returns (public names found, per-module load errors)."""
    finder = UnitFinder(units)
    sys.meta_path.insert(0, finder)
    ns: dict[str, Any] = {}
    errors: dict[str, Any] = {}
    labels = {label for _, label, _ in units}
    notebook: dict[str, Any] = {}  # module name -> module, for cell-by-cell execution
    for module, label, source in units:
        try:
            if label.startswith("cell "):
                mod = notebook.setdefault(module, types.ModuleType(module))
                sys.modules.setdefault(module, mod)
                _remember(label, source)
                exec(compile(source, label, "exec"), mod.__dict__)
            elif module not in sys.modules:
                importlib.import_module(module)
        except BaseException as exc:
            errors.setdefault(module, describe_error(exc, labels))
            if label.startswith("cell "):
                errors[module].setdefault("cells", []).append(label)
    for module in dict.fromkeys(m for m, _, _ in units):
        mod = sys.modules.get(module)
        for name in ALL_NAMES:
            if mod is not None and name in vars(mod) and name not in ns:
                ns[name] = vars(mod)[name]
    return ns, errors


@contextlib.contextmanager
def substituted(ns: dict[str, Any], names: tuple[str, ...], uses: list[str],
                ref: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Swap the stand-ins in for earlier steps' names, where the learner's code looks them up."""
    saved: list[tuple[dict[str, Any], str, Any]] = []
    view = dict(ns)
    for use in uses:
        if use not in ref:
            continue
        view[use] = ref[use]
        for name in names:
            obj = ns.get(name)
            mod = sys.modules.get(getattr(obj, "__module__", "") or "")
            if mod is not None:  # also where the learner never defined it (a wrapper-only file)
                saved.append((vars(mod), use, vars(mod).get(use, _ABSENT)))
                vars(mod)[use] = ref[use]
    try:
        yield view
    finally:
        for globs, use, old in reversed(saved):
            if old is _ABSENT:
                globs.pop(use, None)
            else:
                globs[use] = old


def _plain(value: Any) -> Any:
    """Facts cross as JSON: only plain containers and scalars."""
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, dict):
        return {str(k)[:200]: _plain(v) for k, v in list(value.items())[:200]}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in list(value)[:200]]
    return str(value)[:200]


def _msg(msgid: str, **params: Any) -> dict[str, Any]:
    """A message as the English text plus its template and parameters: the grader words it in the report's
    language (the worker knows none)."""
    plain = {k: v if isinstance(v, int | float) else str(v)[:200] for k, v in params.items()}
    return {"message": str(probes.WrongType(msgid, **plain))[:MAX_MESSAGE], "msgid": msgid, "params": plain}


WORKER_PID = [0]  # set by serve(): the worker itself, as opposed to a process the learner's code forked


def _only_the_worker() -> None:
    """A process the learner's code forked returns (or raises) through the same code as the worker: it ends
    here, silently, before it could answer on the worker's channel in the worker's place."""
    if WORKER_PID[0] and os.getpid() != WORKER_PID[0]:  # 0: not in a worker (the trusted side runs the reference)
        common.hard_exit()


def _failed(exc: BaseException, ns: dict[str, Any], labels: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A probe that raised: what the learner reads (not started, missing, wrong type, memory, error)."""
    if isinstance(exc, NotImplementedError):
        return {"status": "not_started", **describe_error(exc, labels)}, {}
    if isinstance(exc, KeyError):
        missing = exc.args[0] if exc.args else None
        if missing in ALL_NAMES and missing not in ns:
            return {"status": "missing", **_msg("`{name}` is not defined", name=missing)}, {}
        return {"status": "error", **describe_error(exc, labels)}, {}
    if isinstance(exc, probes.WrongType):
        return {"status": "wrong_type", **_msg(exc.msgid, **exc.params)}, {}
    if isinstance(exc, MemoryError):
        return {"status": "memory", **describe_error(exc, labels)}, {}
    return {"status": "error", **describe_error(exc, labels)}, {}


def run_case(ns: dict[str, Any], case: dict[str, Any], inputs: dict[str, torch.Tensor],
             labels: set[str]) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    common.reset_torch_state(case["seed"])
    try:
        outputs = probes.PROBES[case["probe"]](ns, inputs, **case["params"])
    except BaseException as exc:
        _only_the_worker()
        return _failed(exc, ns, labels)
    _only_the_worker()
    tensors: dict[str, torch.Tensor] = {}
    facts: dict[str, Any] = {}
    for key, value in outputs.items():
        if isinstance(value, torch.Tensor):
            t = value.as_subclass(torch.Tensor) if type(value) is not torch.Tensor else value
            if t.is_complex() or t.layout != torch.strided:
                return {"status": "wrong_type", **_msg("{key}: unsupported tensor ({dtype}, {layout})", key=key,
                                                       dtype=str(t.dtype), layout=str(t.layout))}, {}
            tensors[key] = t
            if sum(v.numel() for v in tensors.values()) > MAX_RESULT_ELEMENTS:
                return {"status": "wrong_type", **_msg("{key}: a result of {n} elements is far larger than this "
                                                       "step's answer", key=key, n=t.numel())}, {}
        else:
            facts[key] = _plain(value)
    return {"status": "ok", "facts": facts}, tensors


def serve(transport: common.Transport, confine: Callable[[dict[str, Any]], dict[str, bool]]) -> None:
    """Worker main loop: receive the submission, confine this process (`confine`: the backend's, returning the
    layers it observes of itself), load the submission, then answer one request per step."""
    _, setup = channel.decode_request(transport.recv())
    cpu = {"forked": time.process_time()}  # where a worker's CPU goes: benchmarks/bench_grade.py prints it
    layers = dict(confine(setup.get("config") or {}))
    WORKER_PID[0] = os.getpid()  # after confine: in a PID namespace of its own the worker is 1
    counting.WORKER[0] = WORKER_PID[0]  # step 4's counting adds its audit hook here only
    printed = sys.stdout  # the capped output, taken before any learner code could replace it
    cpu["confined"] = time.process_time()
    # the layers, sent before a line of the submission runs: what the learner's code sends later on this
    # channel can never claim (or deny) a layer
    transport.send(channel.encode({}, {"layers": layers}))
    # where the strong sandbox is required, a worker whose own layers fall short imports nothing: the grader
    # refuses on the layers just sent, and not a line of the submission has run (each need: its alternatives)
    required = (setup.get("config") or {}).get("required") or []
    if not all(any(layers.get(k) is True for k in any_of) for any_of in required):
        return
    units = [tuple(u) for u in setup["units"]]
    labels = {label for _, label, _ in units}
    ns, errors = load_units(units)  # type: ignore[arg-type]
    _only_the_worker()  # a process the submission forked while it was imported
    kinds = {name: ("class" if isinstance(obj, type) else "callable" if callable(obj) else type(obj).__name__)
             for name, obj in ns.items()}
    cpu["loaded"] = time.process_time()
    transport.send(channel.encode({}, {"names": kinds, "errors": errors, "layers": layers, "cpu": cpu,
                                       "output_dropped": _dropped(printed)}))
    while True:
        try:
            request = transport.recv()
        except EOFError:
            return
        tensors, doc = channel.decode_request(request)
        report: dict[str, Any] = {}
        out: dict[str, torch.Tensor] = {}
        names = tuple(doc["names"])
        # the earlier steps' names are the public stand-ins (grader.worker.standins), never the reference
        with substituted(ns, names, doc["uses"], standins.STANDINS) as view:
            exhausted = None
            for case in doc["cases"]:
                cname = case["name"]
                if exhausted is not None:  # one memory bomb per step is enough
                    report[cname] = dict(exhausted)
                    continue
                inputs = {k.split("/", 1)[1]: v for k, v in tensors.items() if k.split("/", 1)[0] == cname}
                t0 = time.perf_counter()
                report[cname], outputs = run_case(view, case, inputs, labels)
                report[cname]["ms"] = round((time.perf_counter() - t0) * 1000, 2)  # informational only
                if report[cname]["status"] == "memory":
                    exhausted = report[cname]
                out.update({f"{cname}/{k}": v for k, v in outputs.items()})
        probes.clear_kept()  # a module kept for a later case of this step (probes.module) goes with it
        common.reset_torch_state(0)
        transport.send(channel.encode(out, {"cases": report, "cpu": time.process_time(),
                                            "output_dropped": _dropped(printed)}))


def _dropped(printed: Any) -> bool:
    """Did the learner print more than the cap (the rest was dropped)? A learner could forge it: a note only."""
    return getattr(printed, "dropped", False) is True


def entry(fd: int) -> None:
    """Forked from the zygote (the Linux backend): never let anything escape as a traceback on the grader's
    terminal."""
    if sys.platform != "linux":
        raise RuntimeError("a zygote's worker is the Linux backend's")
    try:
        from grader.sandbox import confine as linux

        def confine(config: dict[str, Any]) -> dict[str, bool]:
            linux.confine(config)
            return linux.LAYERS

        serve(common.SocketTransport(socket.socket(fileno=fd)), confine)
    except BaseException:
        pass
    finally:
        common.hard_exit()
