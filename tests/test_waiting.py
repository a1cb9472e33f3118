"""A point that waits for the outputs to match the reference (issue 37): a neutral mark and the words "waits until
your outputs match the reference", never a red ✗ over "nothing wrong found here"; its JSON status is "waiting", and
Gradescope and PrairieLearn get it as a failed test with 0 points and those words."""

from __future__ import annotations

import functools
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from grader.grading.engine import grade
from grader.platforms import gradescope
from grader.render.html_report import render as html_render
from grader.render.reporters import table
from grader.report import Report

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "buggy" / "all_softmax_dim0.py"
WAITS = {"en": "waits until your outputs match the reference", "zh": "这一分要等你的输出与参考答案一致后才计入"}
LOOPS = "all_tokens.no_python_loops"


@functools.cache
def graded(lang: str) -> Report:
    return grade(str(FIXTURE), secret="").worded(lang)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_json_says_waiting_with_the_words(lang: str) -> None:
    d = graded(lang).to_dict()
    check = next(c for s in d["steps"] for c in s["checks"] if c["id"] == LOOPS)
    assert check["status"] == "waiting" and check["score"] == 0 and not check["passed"]
    assert WAITS[lang] in check["message"]
    assert "nothing wrong" not in check["message"]
    others = [c for s in d["steps"] for c in s["checks"] if not c["passed"] and c["id"] != LOOPS]
    assert others and all(c["status"] == "failed" for c in others)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_terminal_gives_it_a_neutral_mark(lang: str) -> None:
    out = io.StringIO()
    table(graded(lang), Console(file=out, width=120, color_system=None), lang=lang)
    lines = out.getvalue().splitlines()
    said = next(i for i, line in enumerate(lines) if WAITS[lang][:12] in line)
    mark = next(line for line in reversed(lines[:said + 1]) if "✗" in line or "○" in line)
    assert "○" in mark and "✗" not in mark, "\n".join(lines)


def test_gradescope_gets_a_failed_test_with_0_and_the_words() -> None:
    test = next(t for t in gradescope.document(graded("en"))["tests"] if t["extra_data"]["id"] == LOOPS)
    assert test["status"] == "failed" and test["score"] == 0 and WAITS["en"] in test["output"]
    json.dumps(test)


def test_the_html_report_marks_it_as_waiting() -> None:
    page = html_render(graded("en"))
    assert 'class="wait"' in page
