"""Translate at the edge (issue 27): the engine, the runner, the checks, the diagnoses and the flags word nothing;
they make `grader.i18n.Text` messages (a msgid and its parameters, parts joined), and a report is worded for its
reader by `Report.worded(lang)` or a renderer. Every golden file stays byte-identical in both languages
(tests/test_golden.py, test_i18n.py); this file holds the mechanism and the boundary."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

from grader import i18n
from grader.grading.engine import grade
from grader.registry import BY_ID
from grader.report import Report, clean

ROOT = Path(__file__).resolve().parent.parent
BUGGY = ROOT / "tests" / "fixtures" / "buggy"
# the core: nothing here takes a language; what is worded there is worded by the reader's side
CORE = ["grader/checks", "grader/grading/engine.py", "grader/grading/runner.py", "grader/grading/diagnose.py",
        "grader/grading/flags.py", "grader/grading/ingest.py", "grader/grading/reference.py"]


def _lang_parameters(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            a = node.args
            if any(x.arg == "lang" for x in a.posonlyargs + a.args + a.kwonlyargs):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        if isinstance(node, ast.withitem) and "using(" in ast.unparse(node.context_expr):
            found.append(f"{path.relative_to(ROOT)}:{node.context_expr.lineno} (i18n.using)")
    return found


def test_the_core_takes_no_language() -> None:
    files = [p for c in CORE for p in ((ROOT / c).rglob("*.py") if (ROOT / c).is_dir() else [ROOT / c])]
    assert len(files) > 20
    assert [hit for p in files for hit in _lang_parameters(p)] == []


def test_a_text_is_english_until_worded() -> None:
    with i18n.deferred():
        budget = i18n._("stopped after {timeout:g} s: is there an infinite loop?").format(timeout=2.5)
        joined = i18n.join("; ", [i18n._("not started"), "learner's own words"])
        cut = clean(budget + " \x1b[31m")  # a control character is dropped, after wording too
    assert isinstance(budget, i18n.Text) and budget == "stopped after 2.5 s: is there an infinite loop?"
    assert budget.worded("zh") == i18n.translate("zh", "stopped after {timeout:g} s: is there an infinite loop?"
                                                 ).format(timeout=2.5) != str(budget)
    assert joined.worded("zh") == i18n.translate("zh", "not started") + "; learner's own words"
    assert "\x1b" not in cut.worded("zh") and cut.worded("zh").startswith(budget.worded("zh"))
    assert json.dumps({"m": budget}) == json.dumps({"m": str(budget)})
    assert pickle.loads(pickle.dumps(budget)).worded("zh") == budget.worded("zh")
    assert i18n._("not started") == "not started" and not isinstance(i18n._("not started"), i18n.Text)


def test_a_report_is_worded_for_its_reader() -> None:
    """The engine's report as it is is the English one; worded in Chinese, every message a learner reads changes
    language (a diagnosis, a check's name and message, the step's title), and nothing else changes."""
    report = grade(str(BUGGY / "mask_fill_zero.py"), steps=["causal_mask"])
    en, zh = report.worded("en"), report.worded("zh")
    assert json.dumps(report.to_dict()) == json.dumps(en.to_dict())
    step, zstep = report.steps[0], zh.steps[0]
    assert (zstep.score, zstep.status, zstep.detail) == (step.score, step.status, step.detail)
    assert step.diagnoses and zstep.diagnoses[0]["message"] == step.diagnoses[0]["message"].worded("zh")
    assert zstep.diagnoses[0]["message"] != step.diagnoses[0]["message"]
    assert zstep.title == i18n.step_title(BY_ID["causal_mask"], "zh") != step.title
    assert [c.name for c in zstep.checks] == [i18n.translate("zh", c.name) for c in step.checks]
    assert all(type(v) is str for c in zstep.checks for v in (c.name, c.message))


def test_an_unworded_report_crosses_a_process_as_json() -> None:
    """A grading process sends its report unworded (Report.to_data, grader/grading/forked.py and the batch's
    chunks); its starter words it: the same report in either language as wording it in the grading process,
    a non-finite number in a message included (JSON holds none)."""
    report = grade(str(BUGGY / "mask_fill_zero.py"), steps=["causal_mask", "softmax"])
    with i18n.deferred():
        report.notes.append(i18n._("max abs diff {d:.3g}").format(d=float("inf")))
    again = Report.from_data(json.loads(json.dumps(report.to_data(), allow_nan=False)))
    for lang in ("en", "zh"):
        assert json.dumps(again.worded(lang).to_dict()) == json.dumps(report.worded(lang).to_dict())
    assert again.worded("zh").to_dict() != again.worded("en").to_dict()
