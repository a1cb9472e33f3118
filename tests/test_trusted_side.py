"""The trusted side treats everything from a worker as hostile data. Here hostile worker data is fed straight
into it, with no worker: the channel's decoder, the schema (grader.sandbox.wire), engine._parse_response and the
checks run by engine.judge. Nothing may escape as an exception; what does not fit is an error or a failed
check that says so; and memory stays bounded (broadcast bombs: two tensors whose comparison would
broadcast to N × N)."""

from __future__ import annotations

import contextlib
import copy
import json
import resource
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from grader.checks import CaseResult
from grader.grading import engine
from grader.grading.engine import Collected
from grader.registry import BY_ID, STEPS
from grader.sandbox import channel, wire

SECRET = "trusted-side-test"
MALFORMED = "the worker sent a malformed result"
# a (1, N) against an (N, 1) broadcasts to 144 M elements, 576 MB of float32 for each temporary: clearly over
# the bound below, and still survivable should a regression let one through (3 N took 22 GB and was OOM-killed)
N = 12_000
MAX_GROWTH_KB = 500 * 1024  # coarse: the whole judging of every bomb, not a timing


def plans_refs() -> tuple[dict, dict]:
    return engine.prepared(SECRET)


def honest(step: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """A step's answer as an honest worker running the reference sends it."""
    _plans, refs = plans_refs()
    doc: dict[str, Any] = {"cases": {}, "cpu": 0.25}
    tensors: dict[str, torch.Tensor] = {}
    for name, r in refs[step].items():
        entry: dict[str, Any] = {"status": r.status, "ms": 1.5}
        if r.status == "ok":
            entry["facts"] = copy.deepcopy(r.facts)
            tensors.update({f"{name}/{k}": v for k, v in r.tensors.items()})
        else:
            entry.update(message=r.message, exception=r.exception, where=r.where)
        doc["cases"][name] = entry
    return doc, channel.decode(channel.encode(tensors, {}))[0]  # as they cross: plain, without autograd


def wire_round_trip(doc: Any, tensors: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], Any]:
    """What the trusted side gets: the bytes decoded, as session.Worker.receive does."""
    return channel.decode(channel.encode(tensors, doc))


def parse(step: str, doc: Any, tensors: dict[str, Any]) -> dict[str, CaseResult]:
    plans, _refs = plans_refs()
    return engine._parse_response(plans[step], tensors, doc)


def judge(answers: list[tuple[str, dict[str, CaseResult]]]) -> list:
    """Each (step, parsed cases) judged as one submission's step; returns their StepResults."""
    cols = []
    for step, cases in answers:
        col = Collected("hostile", [BY_ID[step]])
        col.learner[step] = cases
        cols.append(col)
    return [r.steps[0] for r in engine.judge(cols, secret=SECRET)]


def maxrss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def assert_sane(cases: dict[str, CaseResult], asked: set[str]) -> None:
    assert set(cases) == asked
    for r in cases.values():
        assert isinstance(r, CaseResult)
        assert r.status in wire.STATUSES
        assert isinstance(r.facts, dict) and isinstance(r.tensors, dict)
        assert all(type(t) is torch.Tensor for t in r.tensors.values())
        if r.exception == wire.MALFORMED:
            assert r.status == "error" and r.message.startswith(MALFORMED), r.message


# ------------------------------------------------------------------------------ the honest answer still passes


@pytest.mark.parametrize("step", [s.id for s in STEPS])
def test_an_honest_answer_passes(step: str) -> None:
    tensors, doc = wire_round_trip(*honest(step))
    cases = parse(step, doc, tensors)
    assert all(r.exception != wire.MALFORMED for r in cases.values()), cases
    (result,) = judge([(step, cases)])
    assert result.status == "passed", [(c.name, c.message) for c in result.checks if not c.passed]


# ------------------------------------------------------------------------------ broadcast bombs


BOMB_SHAPES = (((1, N), (N, 1)), ((1, 1, N), (1, N, 1)))  # x[0] of the second pair broadcasts too


def bombs(step: str) -> Iterator[tuple[str, dict[str, Any], dict[str, torch.Tensor]]]:
    """The honest answer with two outputs of one case replaced by a (1, N) and an (N, 1) tensor (or a
    (1, 1, N) and a (1, N, 1)), the rest left honest so that the checks get as far as comparing them: for
    every two outputs of every case. Any two compared without checking their shapes first broadcast to N × N."""
    doc, tensors = honest(step)
    by_case: dict[str, list[str]] = {}
    for name in sorted(tensors):
        by_case.setdefault(name.split("/", 1)[0], []).append(name)
    for names in by_case.values():
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                for sa, sb in BOMB_SHAPES:
                    dtype = tensors[a].dtype if tensors[a].is_floating_point() else torch.float32
                    yield f"{a} {sa}, {b} {sb}", doc, {**tensors, a: torch.rand(sa, dtype=dtype),
                                                       b: torch.rand(sb, dtype=dtype)}


def test_broadcast_bombs_are_refused_by_shape_in_bounded_memory() -> None:
    # warm up: the reference, pytest and the checks' modules are loaded before the measure starts
    judge([(s.id, parse(s.id, *honest(s.id))) for s in STEPS])
    answers = []
    for s in STEPS:
        for what, doc, tensors in bombs(s.id):
            tensors, doc = wire_round_trip(doc, tensors)
            cases = parse(s.id, doc, tensors)
            assert_sane(cases, set(cases))
            assert all(r.exception != wire.MALFORMED for r in cases.values()), what
            answers.append((what, s.id, cases))
    assert len(answers) > 300
    before = maxrss_kb()
    results = judge([(step, cases) for _what, step, cases in answers])
    growth = maxrss_kb() - before
    assert growth < MAX_GROWTH_KB, f"judging the bombs grew the peak memory by {growth // 1024} MB"
    for (what, _step, _cases), r in zip(answers, results, strict=True):
        for c in r.checks:
            assert "internal grader error" not in c.message, (what, c.name, c.message)
            assert c.passed or c.message, (what, c.name)
    # passed only where no check reads either output (weight_transfer's out_v2, the "square" v1 weights)
    assert sum(r.status != "passed" for r in results) > 0.9 * len(results)


def test_the_dropout_bomb_that_used_7_gb() -> None:
    """causal_attention's dropout check compared a sample with the eval output before their shapes."""
    doc, tensors = honest("causal_attention")
    tensors["dropout/eval"] = torch.rand(1, 1, N)
    tensors["dropout/sample"] = torch.rand(1, N, 1)  # sample[0] against eval[0]: (N, 1) with (1, N)
    tensors, doc = wire_round_trip(doc, tensors)
    cases = parse("causal_attention", doc, tensors)
    before = maxrss_kb()
    (r,) = judge([("causal_attention", cases)])
    assert maxrss_kb() - before < MAX_GROWTH_KB
    (check,) = [c for c in r.checks if c.name.startswith("dropout:")]
    assert not check.passed and f"shape (1, 1, {N}), expected (1, " in check.message, check.message


# ------------------------------------------------------------------------------ deeply nested or huge JSON


def forged(header: Any, body: bytes = b"") -> bytes:
    head = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(head)) + head + body


@pytest.mark.parametrize("depth", [33, 1000, 200_000])
def test_deeply_nested_json_is_a_channel_error(depth: int) -> None:
    deep = "[" * depth + "]" * depth
    nested_doc = forged({"__metadata__": {"kata": json.dumps({"cases": {"a": {"facts": {"x": "@"}}}}).replace(
        '"@"', deep)}})
    nested_header = forged(b'{"__metadata__":{"kata":"{}"},"x":' + b"[" * depth + b"]" * depth + b"}")
    for data in (nested_doc, nested_header):
        with pytest.raises(channel.ChannelError, match="nested deeper"):
            channel.decode(data)


def test_nesting_within_the_bound_is_read() -> None:
    doc = {"cases": {}}
    inner: Any = 1
    for _ in range(channel.MAX_JSON_DEPTH - 1):
        inner = [inner]
    doc["x"] = inner
    assert channel.decode(channel.encode({}, doc))[1] == doc


def test_json_depth_ignores_brackets_in_strings_and_counts_mixed_brackets() -> None:
    assert channel.json_depth(b'{"a": "[[[[{{{{", "b": [{"c": "]]]\\"[["}]}') == 3
    assert channel.json_depth('[{"a": [{}]}]') == 4
    assert channel.json_depth(b"[[]") > channel.MAX_JSON_DEPTH  # unbalanced


def test_json_depth_of_an_open_string_takes_linear_time() -> None:
    """An unterminated string of escaped quotes (red team 15): a pattern that needs the closing quote retried from
    every quote, quadratic (this 1 MB: about an hour); json.loads refuses the text afterwards."""
    for text in (b'"' + b'\\"' * 500_000, b'"' + b'\\"' * 500_000 + b"\\", b'{"a": "' + b"[" * 1_000_000):
        t0 = time.perf_counter()
        channel.json_depth(text)
        assert time.perf_counter() - t0 < 10
        with pytest.raises(channel.ChannelError):
            channel._loads(text, "test")
    assert channel.json_depth(b'["a\\"]", "\\\\", [[]]]') == 3  # an escaped quote, an escaped backslash


@pytest.mark.parametrize("make", [
    lambda: {"cases": {}, "s": "x" * (channel.MAX_STRING + 1)},
    lambda: {"cases": {}, "k": [0] * (channel.MAX_JSON_NODES + 1)},
])
def test_huge_documents_are_a_channel_error(make: Any) -> None:
    with pytest.raises(channel.ChannelError):
        channel.decode(channel.encode({}, make()))


def test_a_recursion_error_in_the_parser_is_a_channel_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: Any, **_k: Any) -> Any:
        raise RecursionError

    monkeypatch.setattr(channel.json, "loads", boom)
    with pytest.raises(channel.ChannelError):
        channel.decode(channel.encode({}, {"cases": {}}))


# ------------------------------------------------------------------------------ wrong types at every level

WRONG: list[Any] = [None, True, 0, 7, -1.5, "", "x", [], [None], {}, {"k": None}, [[[]]]]


def _walk(doc: Any) -> Iterator[tuple[tuple, Any]]:
    stack: list[tuple[tuple, Any]] = [((), doc)]
    while stack:
        path, v = stack.pop()
        yield path, v
        if isinstance(v, dict):
            stack.extend(((*path, k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend(((*path, i), x) for i, x in enumerate(v))


def _set(doc: Any, path: tuple, value: Any, delete: bool = False) -> Any:
    doc = copy.deepcopy(doc)
    if not path:
        return value
    holder = doc
    for p in path[:-1]:
        holder = holder[p]
    if delete:
        del holder[path[-1]]
    else:
        holder[path[-1]] = value
    return doc


def mutations(doc: Any) -> Iterator[tuple[str, Any]]:
    """Every value of `doc`, at every level, replaced by each value of another type or shape; every entry
    removed; every object given an unexpected field."""
    for path, v in list(_walk(doc)):
        for w in WRONG:
            if not (type(w) is type(v) and w == v):
                yield f"{path} = {w!r}", _set(doc, path, copy.deepcopy(w))
        if path:
            yield f"del {path}", _set(doc, path, None, delete=True)
        if isinstance(v, dict):
            yield f"{path} + extra", _set(doc, path, {**v, "extra": 1})
        if isinstance(v, str) and path:
            yield f"{path} huge", _set(doc, path, v + "y" * 100_000)


HELLO = {
    "names": {"attention_scores": "callable", "SelfAttention_v1": "class", "causal_mask": "int"},
    "errors": {
        "causal_attention": {"exception": "SyntaxError", "message": "invalid syntax",
                             "where": {"file": "causal_attention.py", "line": 3, "code": "x = ("}},
        "notebook": {"exception": "NameError", "message": "name 'q' is not defined", "where": None,
                     "cells": ["cell 2", "cell 5"]},
    },
    "layers": {"landlock_filesystem": True, "pid_namespace": False},
    "cpu": {"forked": 0.01, "loaded": 0.25},
}


def test_an_honest_hello_is_read() -> None:
    names, errors = wire.validate_hello(copy.deepcopy(HELLO))
    assert names == HELLO["names"]
    assert errors["causal_attention"]["where"] == HELLO["errors"]["causal_attention"]["where"]
    assert errors["notebook"]["cells"] == ["cell 2", "cell 5"] and errors["causal_attention"]["cells"] == []


def test_wrong_types_at_every_level_of_the_hello() -> None:
    accepted = 0
    problems: list[tuple[str, wire.Malformed]] = []
    for what, doc in mutations(HELLO):
        try:
            names, errors = wire.validate_hello(doc)
        except wire.Malformed as exc:
            problems.append((what, exc))
            continue
        accepted += 1  # still fits (e.g. "where": None, a name's kind ""): then it is well typed
        assert all(type(k) is str and type(v) is str for k, v in names.items()), what
        for err in errors.values():
            assert set(err) == {"exception", "message", "where", "cells"}, what
            assert type(err["exception"]) is str and type(err["message"]) is str, what
            assert err["where"] is None or (type(err["where"]["file"]) is str and type(err["where"]["code"]) is str
                                            and type(err["where"]["line"]) in (int, type(None))), what
            assert all(type(c) is str for c in err["cells"]), what
            assert isinstance(engine._load_error_text(err), str)
    assert len(problems) > 100 and accepted > 0
    assert all(str(exc).startswith(MALFORMED) and exc.detail.startswith(MALFORMED) for _what, exc in problems)


@pytest.mark.parametrize("bad", [
    {**HELLO, "errors": {"causal_attention": ["SyntaxError", "x"]}},  # was: AttributeError in the engine
    {**HELLO, "errors": {"causal_attention": {**HELLO["errors"]["causal_attention"], "where": ["f", 1]}}},
    {**HELLO, "names": {"attention_scores": ["callable"]}},
    {**HELLO, "names": {"not_a_kata_name": "callable"}},
    {**HELLO, "names": {"attention_scores": "x" * 10**6}},
    {**HELLO, "layers": {"landlock_filesystem": "yes"}},
    {**HELLO, "cpu": {"loaded": float("nan")}},
    {**HELLO, "cpu": {"loaded": 10**400}},
    [HELLO], "hello", None,
])
def test_a_malformed_hello_is_refused_with_a_message(bad: Any) -> None:
    with pytest.raises(wire.Malformed, match="malformed result"):
        wire.validate_hello(bad)


def test_the_engine_reads_an_unchecked_bad_error_entry_without_raising() -> None:
    assert engine._load_error_text(["SyntaxError", "x"]).startswith(MALFORMED)  # type: ignore[arg-type]
    text = engine._load_error_text({"exception": "E", "message": "m", "where": ["f", 1]})
    assert text.startswith("E: m")


@pytest.mark.parametrize("step", ["dot_scores", "causal_attention", "multihead_wrapper"])
def test_wrong_types_at_every_level_of_the_answer(step: str) -> None:
    doc, tensors = honest(step)
    answers = []
    for what, bad in mutations(doc):
        cases = parse(step, bad, tensors)
        assert_sane(cases, set(doc["cases"]))
        if step == "dot_scores" or len(answers) % 5 == 0:  # judging each costs ~25 ms: a sample of the larger
            answers.append((what, cases))
    results = judge([(step, cases) for _what, cases in answers])
    for (what, cases), r in zip(answers, results, strict=True):
        assert r.status in ("passed", "partial", "failed"), what
        bad_cases = [c for c in cases.values() if c.exception == wire.MALFORMED]
        if bad_cases:
            assert r.status != "passed", what
            assert r.detail == "no_result", (what, r.detail)
            assert r.message.startswith(MALFORMED) or any(c.exception == "NoResult" for c in cases.values()), what
        for c in r.checks:
            assert "internal grader error" not in c.message, (what, c.name, c.message)


def test_a_malformed_answer_as_a_whole_makes_every_case_an_error() -> None:
    doc, tensors = honest("dot_scores")
    for bad_doc, bad_tensors in [
        ({**doc, "cases": {**doc["cases"], "not_asked": {"status": "ok"}}}, tensors),
        ({**doc, "extra": 1}, tensors),
        (doc, {**tensors, "not_asked/out": torch.zeros(2)}),
        (doc, {**tensors, "no-slash": torch.zeros(2)}),
        (doc, {**tensors, "book/": torch.zeros(2)}),
        (doc, {f"book/k{i}": torch.zeros(4_000_000, dtype=torch.bool) for i in range(5)}),
        ([doc], tensors), (None, tensors), ("cases", tensors),
    ]:
        cases = parse("dot_scores", bad_doc, bad_tensors)
        assert_sane(cases, set(doc["cases"]))
        assert all(r.exception == wire.MALFORMED for r in cases.values())


@pytest.mark.parametrize("change", [
    lambda d, t: t.update({"book/out": torch.zeros(3, dtype=torch.complex64)}),
    lambda d, t: t.update({"book/out": torch.zeros(3, dtype=torch.float8_e4m3fn)}),
    lambda d, t: t.update({"book/out": torch.zeros([1] * (wire.MAX_NDIM + 1))}),
    lambda d, t: t.update({"book/big": torch.zeros(wire.MAX_CASE_ELEMENTS + 1, dtype=torch.bool)}),
    lambda d, t: t.update({"book/structure": torch.zeros(3)}),  # a tensor where a check reads a fact
    lambda d, t: d["cases"]["book"].update(status="error"),  # tensors for a case that did not run
    lambda d, t: d["cases"]["book"].update(status="passed"),
    lambda d, t: d["cases"]["book"].update(facts={"x": [[[[[[[[[1]]]]]]]]]}),
    lambda d, t: d["cases"]["book"].update(facts={"x": list(range(wire.MAX_FACT_NODES))}),
    # within the caps on values and on each string, but far more text than any honest fact (red team 9: ~56 MB a
    # step held until the chunk is judged)
    lambda d, t: d["cases"]["book"].update(facts={"x": ["\U0001f600" * 1000] * 20}),
    lambda d, t: d["cases"]["book"].update(facts={f"k{i:0>200}": 1 for i in range(100)}),
    lambda d, t: d["cases"]["book"].update(facts={"structure": {"params": 3}}),
    lambda d, t: d["cases"]["book"].update(facts={"grads": {"W": "yes"}}),
    lambda d, t: d["cases"]["book"].update(message="m" * 100_000),
    lambda d, t: d["cases"]["book"].update(params={"name": {"nested": 1}}),
    lambda d, t: d["cases"]["book"].update(where={"file": "f.py", "line": "3", "code": ""}),
    lambda d, t: d["cases"]["book"].update(ms=float("inf")),
])
def test_a_malformed_case_is_that_case_s_error(change: Any) -> None:
    doc, tensors = honest("dot_scores")
    change(doc, tensors)
    with contextlib.suppress(Exception):  # not encodable here (json.dumps refuses inf): then fed as is
        tensors, doc = wire_round_trip(doc, tensors)
    cases = parse("dot_scores", doc, tensors)
    assert_sane(cases, set(doc["cases"]))
    assert cases["book"].exception == wire.MALFORMED
    assert [n for n, r in cases.items() if r.exception == wire.MALFORMED] == ["book"]
    (r,) = judge([("dot_scores", cases)])
    assert r.status == "partial" and r.detail == "no_result" and MALFORMED in r.message
    failed = [c for c in r.checks if not c.passed]
    assert failed and all(MALFORMED in c.message for c in failed), [c.message for c in failed]


S = "\udcff"  # a lone surrogate: JSON's "\\udcff" escape decodes to one, and no UTF-8 writer can encode it


def test_lone_surrogates_from_a_worker_become_replacement_characters() -> None:
    """An honest learner's exception message may hold a lone surrogate (red team 8, finding 1): the wire passes on
    U+FFFD in its place, in every string and key, rather than refusing what says what the code raised. The
    answer as a whole, and each case, is still read: no surrogate reaches a report's writer (a file, the batch's
    socket, which once died on one and took a chunk of classmates with it)."""
    hello = copy.deepcopy(HELLO)
    hello["names"]["attention_scores"] = "function" + S
    hello["errors"]["causal" + S] = {"exception": "E" + S, "message": "m" + S, "cells": ["cell" + S],
                                      "where": {"file": "f" + S, "line": 1, "code": "c" + S}}
    _tensors, hello = wire_round_trip(hello, {})
    names, errors = wire.validate_hello(hello)
    json.dumps([names, errors], ensure_ascii=False).encode()  # strict UTF-8: raises on a surrogate
    assert names["attention_scores"] == "function\ufffd"
    assert errors["causal\ufffd"] == {"exception": "E\ufffd", "message": "m\ufffd", "cells": ["cell\ufffd"],
                                      "where": {"file": "f\ufffd", "line": 1, "code": "c\ufffd"}}

    doc, tensors = honest("self_attention_v1")
    doc["cases"]["fwd"]["facts"]["grads"]["W" + S] = True
    doc["cases"]["fwd"]["facts"]["extra" + S] = ["v" + S, {"k" + S: "w" + S}]
    doc["cases"]["single"] = {"status": "error", "exception": "ValueError", "message": "m" + S, "msgid": "x" + S,
                              "params": {"p" + S: "v" + S}, "where": {"file": "f" + S, "line": 2, "code": "c" + S}}
    tensors = {k: v for k, v in tensors.items() if not k.startswith("single/")}
    tensors, doc = wire_round_trip(doc, tensors)
    entries, by_case = wire.validate_answer(doc, tensors, doc["cases"])
    assert all(isinstance(e, dict) for e in entries.values()), entries
    json.dumps(entries, ensure_ascii=False).encode()
    fwd, single = entries["fwd"]["facts"], entries["single"]
    assert fwd["grads"]["W\ufffd"] is True and fwd["extra\ufffd"] == ["v\ufffd", {"k\ufffd": "w\ufffd"}]
    assert (single["message"], single["msgid"], single["params"]) == ("m\ufffd", "x\ufffd", {"p\ufffd": "v\ufffd"})
    assert single["where"] == {"file": "f\ufffd", "line": 2, "code": "c\ufffd"}
    assert set(by_case) == {"fwd", "wide", "book"}  # (a tensor's name cannot hold one: safetensors refuses it)


def test_a_case_left_out_is_still_no_result() -> None:
    doc, tensors = honest("dot_scores")
    del doc["cases"]["book"]
    tensors = {k: v for k, v in tensors.items() if not k.startswith("book/")}
    cases = parse("dot_scores", doc, tensors)
    assert cases["book"].exception == "NoResult" and cases["random"].status == "ok"
