"""Classic mistakes are recognised by behaviour and named (grader/grading/diagnose.py).

Every buggy fixture gets exactly the diagnoses listed here (most get none: their bug is not one of the
classic mistakes), no correct submission's outputs match a mistake model (the diagnosis itself is run on
them, not only the engine, which never diagnoses a passed step), and each classic mistake is proven by at
least one fixture.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import re
from pathlib import Path

import pytest
import torch
from rich.console import Console

from grader import checks
from grader.checks import CaseResult, Outcome
from grader.grading import diagnose
from grader.grading.engine import collect, grade, grade_many, prepared
from grader.i18n import using
from grader.registry import BY_ID
from grader.render import reporters
from grader.report import Report

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
BUGGY = FIXTURES / "buggy"
BUGGY_NAMES = sorted(p.stem for p in BUGGY.glob("*.py"))

# fixture -> step -> the diagnoses it must get (exactly); a buggy fixture not listed must get none
DIAGNOSED: dict[str, dict[str, list[str]]] = {
    # softmax over the wrong dim
    "softmax_dim0": {"softmax": ["softmax_wrong_dim"]},
    "all_softmax_dim0": {"all_tokens": ["softmax_wrong_dim"]},
    "v2_softmax_dim0": {"self_attention_v2": ["softmax_wrong_dim"]},
    # missing or wrong √d_k scaling
    "v1_no_scale": {"self_attention_v1": ["scale_missing"]},
    "v2_no_scale": {"self_attention_v2": ["scale_missing"]},
    "mask_no_scale": {"causal_mask": ["scale_missing"]},
    "wrap_on_buggy_ca": {"causal_attention": ["scale_missing"]},
    "mha_combined_qkv_no_scale": {"multihead_attention": ["scale_missing"]},  # one combined q|k|v layer
    # the new parametrisations' bugs (issue 12): recognised by behaviour, however the weights are held
    "mha_qkv_param_no_scale": {"multihead_attention": ["scale_missing"]},  # one combined q|k|v Parameter
    "ca_einsum_scores_transposed": {"causal_attention": ["query_key_swapped"]},  # raw Parameters, einsum
    "mha_in_proj_merge_without_transpose": {"multihead_attention": ["heads_merge_without_transpose"]},  # in_proj
    "v1_scale_dk": {"self_attention_v1": ["scale_by_d_k"]},
    "mha_scale_d_out": {"multihead_attention": ["scale_wrong_dim"]},
    # mask filled with 0 instead of −inf
    "mask_fill_zero": {"causal_mask": ["mask_fill_zero"]},
    "ca_mask_fill_zero": {"causal_attention": ["mask_fill_zero"]},
    # diagonal masked
    "mask_diagonal0": {"causal_mask": ["mask_diagonal"]},
    "ca_diagonal0": {"causal_attention": ["mask_diagonal"]},
    # mask applied after softmax
    "mask_after_softmax": {"causal_mask": ["mask_after_softmax"]},
    "ca_mask_after_softmax": {"causal_attention": ["mask_after_softmax"]},
    # mask not cut to num_tokens
    "ca_mask_not_cut": {"causal_attention": ["mask_not_cut"]},
    "mha_mask_not_cut": {"multihead_attention": ["mask_not_cut"]},
    # dropout without rescaling, wrongly rescaled, p read as "keep", active in eval
    "drop_no_rescale": {"dropout": ["dropout_no_rescale"]},
    "ca_dropout_no_rescale": {"causal_attention": ["dropout_no_rescale"]},
    "drop_times_keep": {"dropout": ["dropout_rescale_wrong"]},
    "drop_keep_prob": {"dropout": ["dropout_keep_prob"]},
    "drop_ignores_training": {"dropout": ["dropout_in_eval"]},
    "ca_dropout_in_eval": {"causal_attention": ["dropout_in_eval"]},
    # heads concatenated on the wrong dim, stacked, sharing weights, merged without transposing back
    "wrap_cat_dim1": {"multihead_wrapper": ["heads_cat_wrong_dim"]},
    "wrap_stack": {"multihead_wrapper": ["heads_stacked"]},
    "wrap_shared_heads": {"multihead_wrapper": ["heads_share_weights"]},
    "mha_merge_without_transpose": {"multihead_attention": ["heads_merge_without_transpose"]},
    # queries and keys swapped
    "v1_qk_swapped": {"self_attention_v1": ["query_key_swapped"]},
    "ca_qk_swapped": {"causal_attention": ["query_key_swapped"]},
    # masked_fill (no underscore) with its result thrown away: the weights of no mask at all (issue 26)
    "mask_masked_fill_discarded": {"causal_mask": ["mask_discarded"]},
    "ca_masked_fill_discarded": {"causal_attention": ["mask_discarded"]},
    "mha_masked_fill_discarded": {"multihead_attention": ["mask_discarded"]},
    # a function that changes the tensor it was given (issue 26): the in-place dropouts lose points elsewhere too
    "dot_inplace": {"dot_scores": ["input_changed_in_place"]},
    "drop_inplace": {"dropout": ["input_changed_in_place"]},
    "drop_inplace_functional": {"dropout": ["input_changed_in_place"]},
    "drop_inplace_index": {"dropout": ["input_changed_in_place"]},
    # dropout on the wrong tensor, seen in the exact placement cases (steps 9 and 11, issue 26)
    "ca_dropout_on_scores": {"causal_attention": ["dropout_on_scores"]},
    "ca_dropout_on_values": {"causal_attention": ["dropout_on_values"]},
    "ca_dropout_on_context": {"causal_attention": ["dropout_on_context"]},
    "mha_dropout_on_scores": {"multihead_attention": ["dropout_on_scores"]},
    "mha_dropout_on_values": {"multihead_attention": ["dropout_on_values"]},
    "mha_dropout_on_context": {"multihead_attention": ["dropout_on_context"]},
    "mha_dropout_after_out_proj": {"multihead_attention": ["dropout_after_out_proj"]},
}

CLASSIC = {"softmax_wrong_dim", "scale_missing", "scale_by_d_k", "scale_wrong_dim", "mask_fill_zero",
           "mask_diagonal", "mask_after_softmax", "mask_not_cut", "dropout_no_rescale", "dropout_in_eval",
           "heads_cat_wrong_dim", "heads_stacked", "heads_share_weights", "query_key_swapped", "mask_discarded",
           "input_changed_in_place", "dropout_on_scores", "dropout_on_values", "dropout_on_context",
           "dropout_after_out_proj"}

CORRECT = [FIXTURES / "correct" / "book_verbatim.py", FIXTURES / "correct" / "vectorised_einsum.py",
           FIXTURES / "correct" / "loops.py", FIXTURES / "correct" / "workspace", ROOT / "solutions"]


def diagnoses(report: Report) -> dict[str, list[str]]:
    return {s.id: [d["id"] for d in s.diagnoses] for s in report.steps if s.diagnoses}


@functools.cache
def buggy_reports(secret: str = "") -> dict[str, Report]:
    """All buggy fixtures, judged together (one pytest session for the checks)."""
    reports = grade_many([str(BUGGY / f"{n}.py") for n in BUGGY_NAMES], secret=secret)
    return dict(zip(BUGGY_NAMES, reports, strict=True))


def test_the_table_lists_real_fixtures_and_covers_every_classic_mistake() -> None:
    assert set(DIAGNOSED) <= set(BUGGY_NAMES)
    named = {i for steps in DIAGNOSED.values() for ids in steps.values() for i in ids}
    assert not CLASSIC - named, CLASSIC - named
    assert named <= set(diagnose.messages())


@pytest.mark.parametrize("name", BUGGY_NAMES)
def test_buggy_fixture_gets_exactly_its_diagnosis(name: str) -> None:
    assert diagnoses(buggy_reports()[name]) == DIAGNOSED.get(name, {})


@pytest.mark.parametrize("path", CORRECT, ids=lambda p: p.name)
def test_correct_submissions_match_no_mistake_model(path: Path) -> None:
    """The engine only diagnoses steps that lost points, so a correct report's empty diagnoses prove nothing:
    run the diagnosis itself on every step a correct submission wrote, as if it had failed."""
    plans, refs = prepared("")
    col = collect(str(path))
    assert set(col.learner) & set(checks.DIAGNOSES), "no diagnosed step was run"
    for sid, cases in col.learner.items():
        assert diagnose.ids(Outcome(sid, plans[sid], cases, refs[sid])) == [], sid


def test_the_diagnosis_runs_on_passed_outcomes_too() -> None:
    """What the test above relies on: fed a buggy fixture's outcome, the diagnosis does name the mistake (it is
    not the engine's gate that keeps the correct submissions' lists empty)."""
    plans, refs = prepared("")
    col = collect(str(BUGGY / "mask_fill_zero.py"), steps=["causal_mask"])
    assert diagnose.ids(Outcome("causal_mask", plans["causal_mask"], col.learner["causal_mask"],
                                refs["causal_mask"])) == ["mask_fill_zero"]


def test_shared_heads_are_named_from_the_probes_report_not_its_wording() -> None:
    """wrap_shared_heads is recognised from the probe's template id and parameters (which parameter the grader
    asked for, which ones the module has), so a translated or reworded message changes nothing."""
    plans, refs = prepared("")
    learner = collect(str(BUGGY / "wrap_shared_heads.py"), steps=["multihead_wrapper"]).learner["multihead_wrapper"]
    assert any(r.msgid and r.status == "wrong_type" for r in learner.values())  # what this test is about

    def judged(cases: dict[str, CaseResult]) -> list[str]:
        return diagnose.ids(Outcome("multihead_wrapper", plans["multihead_wrapper"], cases, refs["multihead_wrapper"]))

    assert judged(learner) == ["heads_share_weights"]
    with using("zh"):
        translated = {c: dataclasses.replace(r, message=r.text()) for c, r in learner.items()}
    assert all(translated[c].message != r.message for c, r in learner.items() if r.msgid)
    assert judged(translated) == ["heads_share_weights"]
    reworded = {c: dataclasses.replace(r, message="parameter missing") for c, r in learner.items()}
    assert judged(reworded) == ["heads_share_weights"]
    # and the text alone, without the template and its parameters, is not read
    text_only = {c: dataclasses.replace(r, msgid="", params={}) for c, r in learner.items()}
    assert judged(text_only) == []


@pytest.mark.parametrize("name", ["drop_keep_prob", "drop_no_rescale", "ca_dropout_no_rescale", "ca_qk_swapped",
                                  "mha_scale_d_out", "wrap_cat_dim1", "wrap_shared_heads", "mask_fill_zero",
                                  "mha_masked_fill_discarded", "drop_inplace_index", "ca_dropout_on_context",
                                  "mha_dropout_on_values", "mha_dropout_on_scores", "mha_dropout_after_out_proj"])
def test_diagnoses_do_not_depend_on_the_secret(name: str) -> None:
    report = grade(str(BUGGY / f"{name}.py"), secret="another term's secret")
    assert diagnoses(report) == DIAGNOSED[name]


def test_messages_exist_in_both_languages_with_the_book_section() -> None:
    for diag_id in diagnose.messages():
        en = diagnose.message(diag_id, "causal_mask")
        zh = diagnose.message(diag_id, "causal_mask").worded("zh")
        assert "§3.5.1" in en
        assert "见书 §3.5.1" in zh
        assert not re.search(r"[\u4e00-\u9fff]", en), en  # the catalogue, not a fallback, gives each language
        assert re.search(r"[\u4e00-\u9fff]", zh.split("（见书")[0]), zh
    assert BY_ID["causal_attention"].section in diagnose.message("mask_not_cut", "causal_attention")


def test_report_json_and_table_show_the_diagnosis_in_the_report_language() -> None:
    en = grade(str(BUGGY / "mask_fill_zero.py"), steps=["causal_mask"])
    zh = grade(str(BUGGY / "mask_fill_zero.py"), steps=["causal_mask"]).worded("zh")
    doc = json.loads(reporters.to_json(en))
    assert doc["steps"][0]["diagnoses"] == [{"id": "mask_fill_zero",
                                             "message": diagnose.message("mask_fill_zero", "causal_mask")}]
    assert json.loads(reporters.to_json(zh))["steps"][0]["diagnoses"][0]["message"].startswith("未来位置")
    console = Console(record=True, width=200)
    reporters.table(en, console)
    assert "⚑ diagnosis: future scores are filled with 0" in console.export_text()
    console = Console(record=True, width=200)
    reporters.table(zh, console, lang="zh")
    assert "⚑ 诊断：未来位置" in console.export_text()


@pytest.mark.parametrize("step", sorted(diagnose.diagnosed_steps()))
def test_odd_outputs_never_raise_and_get_no_diagnosis(step: str) -> None:
    plans, refs = prepared("")
    odd = {
        "scalar": {c: CaseResult("ok", {"out": torch.tensor(1.0)}, {}) for c in plans[step]},
        "ints": {c: CaseResult("ok", {k: torch.zeros(3, dtype=torch.long) for k in r.tensors},
                               {"structure": "?"}) for c, r in refs[step].items()},
        "errors": {c: CaseResult("error", {}, {}, "boom", None, "ValueError") for c in plans[step]},
    }
    for learner in odd.values():
        assert diagnose.diagnose(Outcome(step, plans[step], learner, refs[step])) == []


def test_dropout_that_drops_nothing_is_not_called_unscaled() -> None:
    plans, refs = prepared("")
    same = {c: CaseResult("ok", {"out": case.inputs["attn_weights"].clone()}, {})
            for c, case in plans["dropout"].items()}
    assert diagnose.ids(Outcome("dropout", plans["dropout"], same, refs["dropout"])) == []


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_place_a_learner_reads_carries_the_diagnosis(lang: str) -> None:
    """The HTML report and the feedback file say the diagnosis, as the terminal and Gradescope do (issue 12)."""
    from grader.instructor.gradebook import feedback_text
    from grader.render import html_report

    report = grade(str(BUGGY / "mha_qkv_param_no_scale.py"), steps=["multihead_attention"]).worded(lang)
    said = [d["message"] for s in report.steps for d in s.diagnoses]
    assert said and all("√d_k" in m for m in said)
    page = html_report.render(report, lang=lang)
    feedback = feedback_text("ada", report.to_dict(), lang=lang)
    for message in said:
        assert html.escape(message) in page
        assert message in feedback


def test_silent_names_in_another_order_are_named_in_the_diagnosis(tmp_path: Path) -> None:
    """Projections whose names say nothing (a, b, c) are taken as query, key, value in the order they are
    defined (tests/fixtures/correct/p_silent_names.py: full marks). Defined key, query, value instead, the
    values differ, and the diagnosis says which names were taken by order and how to name them, in both
    languages; the book-order twin gets no such diagnosis."""
    src = (FIXTURES / "correct" / "p_silent_names.py").read_text()
    i = src.index("class MultiHeadAttention")
    swapped = src[:i] + src[i:].replace("q, k, v = (f(x)", "k, q, v = (f(x)", 1)  # a is the key layer now
    p = tmp_path / "kqv.py"
    p.write_text(swapped)
    for lang, words in (("en", "in the order your __init__ defines them"), ("zh", "__init__")):
        step = grade(p, steps=["multihead_attention"]).worded(lang).steps[0]
        assert step.score < step.max_score
        found = [d for d in step.diagnoses if d["id"] == "roles_by_order"]
        assert found and words in found[0]["message"] and "a.weight" in found[0]["message"], step.diagnoses
    twin = grade(FIXTURES / "correct" / "p_silent_names.py", steps=["multihead_attention"]).steps[0]
    assert twin.score == twin.max_score and not twin.diagnoses


def test_a_silent_name_is_quoted_cleaned(tmp_path: Path) -> None:
    """The names in the roles_by_order diagnosis are the learner's own (nn.Module.add_module takes any string):
    control characters never reach a report, and each is capped."""
    src = (FIXTURES / "correct" / "p_silent_names.py").read_text()
    i = src.index("class MultiHeadAttention")
    tail = src[i:].replace("q, k, v = (f(x)", "k, q, v = (f(x)", 1).replace(
        'self.a = nn.Linear(d_in, d_out, bias=qkv_bias)',
        'self.add_module("\\x1b[2J" + "z" * 300, nn.Linear(d_in, d_out, bias=qkv_bias))\n'
        '        self.a = getattr(self, "\\x1b[2J" + "z" * 300)', 1)
    p = tmp_path / "odd.py"
    p.write_text(src[:i] + tail)
    step = grade(p, steps=["multihead_attention"]).steps[0]
    found = [d["message"] for d in step.diagnoses if d["id"] == "roles_by_order"]
    assert found and "\x1b" not in found[0] and "z" * 60 not in found[0] and "[2J" in found[0], step.diagnoses


def test_a_message_suggests_no_cause_the_evidence_does_not_show() -> None:
    """A context vector of the wrong shape gets no upstream gradient at all: its gradient check says the shape, never
    "no gradient reaches …: avoid .detach()" (nothing was detached); numbers read as every message writes them."""
    report = grade(BUGGY / "ctx_wrong_dim.py", steps=["context_vector"])
    messages = [c.message for c in report.steps[0].checks if not c.passed]
    grad = [c.message for c in report.steps[0].checks if c.name.startswith("gradients")]
    assert grad and "shape" in grad[0] and "detach" not in grad[0], grad
    assert not any("no gradient reaches" in m for m in messages), messages
    sums = grade(BUGGY / "softmax_dim0.py", steps=["softmax"])
    rows = [c.message for c in sums.steps[0].checks if c.name.startswith("every row")]
    assert rows and not re.search(r"\d\.\d{7,}", rows[0]), rows  # 6 significant digits, not 17
