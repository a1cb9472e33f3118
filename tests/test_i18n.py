"""Two languages: every learner-facing text comes from the gettext catalogue (grader/i18n.py).

(a) the catalogue is complete and compiled: every msgid a fresh `pybabel extract` finds in grader/ has a
    Chinese msgstr with the same {placeholders}, and the committed .mo is a fresh compile of the .po;
(b) `--lang zh` output (the real CLI, table and JSON) has no English word left once code, identifiers,
    numbers, shapes, paths and the learner's own exception text are taken out;
(c) `--lang en` output has no CJK character.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "grader" / "locale"
PO = LOCALE / "zh" / "LC_MESSAGES" / "attn_kata.po"
MO = PO.with_suffix(".mo")
BUGGY = ROOT / "tests" / "fixtures" / "buggy"

# English words allowed in Chinese output, each for a reason:
ALLOWED = {
    "torch",  # the library's name (torch.dot, torch.softmax…): never translated
    "softmax", "dropout", "Dropout",  # the chapter's own Chinese text keeps these terms in English (§3.3, §3.5.2)
    "token",  # likewise: the chapter writes "输入 token", "未来token"
    "query", "key", "value",  # the chapter's gloss: 查询（query）、键（key）、值（value）
    "keys", "queries", "values",  # the book's local variable names in code the hints quote (keys = x @ W_key)
    "NaN", "Inf",  # floating-point values, named as Python prints them
    "dim",  # torch's keyword argument (softmax(…, dim=-1)), quoted in hints
    "inf",  # -inf / -torch.inf: the value the mask fills in
    "attn", "kata",  # the program's name, attn-kata
    "journey",  # the book's example sentence ("Your journey starts with one step"), quoted as data
    "zh", "en",  # the --lang values
    "Python",  # a proper noun ("no Python loops")
} | set(dir(builtins))  # Python's own names: True, list, float… (a returned type is named as Python names it)


def _parameters() -> set[str]:
    """Parameter names of the public functions and classes (inputs, query, scores, d_in…): identifiers."""
    import inspect

    sys.path.insert(0, str(ROOT))
    from grader.grading import reference

    ns = reference.namespace()
    names: set[str] = set()
    for obj in ns.values():
        try:
            target = obj.__init__ if isinstance(obj, type) else obj
            names |= set(inspect.signature(target).parameters)
        except (TypeError, ValueError):
            pass
    return names - {"self"}


CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
LEARNER_EXC = [
    # "你的代码抛出了 RuntimeError，位于 f.py 第 3 行：`code`：<the learner's message>" and "抛出了 X：<message>"
    re.compile(r"抛出了 \w+(?:，位于 .*? 第 \d+ 行：`[^`]*`)?：.*?(?=│|$)", re.M),
    # an import error: "SyntaxError: <Python's message>（f.py 第 3 行：`code`）"
    re.compile(r"\b\w*(?:Error|Exception|Warning)\b: .*?(?=（|│|$)", re.M),
]


def english_words(text: str, allowed: set[str]) -> list[str]:
    for pattern in LEARNER_EXC:
        text = pattern.sub(" ", text)
    text = re.sub(r"`[^`\n]*`", " ", text)  # code in backticks
    text = re.sub(r"^\S+: [\d.]+ / [\d.]+", " ", text, flags=re.M)  # the table's title: the submission's file name
    text = re.sub(r"=\s*\([^()\n]*\)", " ", text)  # named shapes: (2, 6, 4) = (batch, num_tokens, d_out)
    words = []
    for token in re.split(r"[\s\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef│┃━─┏┓┗┛┡┩└┘┳┻╇┼✗⚑•…,;:!?\"'“”‘’]+",
                          text):
        core = token.strip("()[]{}<>")
        if (not core or re.search(r"[\d_./\\=@*+\-<>\[\]()]", core)  # numbers, shapes, identifiers, paths, code
                or re.search(r"[a-z][A-Z]", core)):  # CamelCase
            continue
        for w in re.findall(r"[A-Za-z]{3,}", core):
            if w not in allowed:
                words.append(w)
    return words


def kata(*args: str, lang: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """In this process (tests/inproc.py: the command's output and exit code, real grading)."""
    from inproc import kata as run_in_process

    env = {**os.environ, "COLUMNS": "2000", "ATTN_KATA_LANG": "", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    return run_in_process("--lang", lang, *args, cwd=cwd, env=env)


# ------------------------------------------------------------------------------------ (a) the catalogue


def test_every_msgid_has_a_chinese_translation() -> None:
    found = {msgid for _, _, msgid, *_ in extract_from_dir(str(ROOT / "grader"), method_map=[("**.py", "python")],
                                                            keywords={"_": None, "N_": None})}
    assert len(found) > 200
    catalog = read_po(PO.open("rb"))
    have = {m.id: m.string for m in catalog if m.id}
    missing = sorted(m for m in found if not have.get(m))
    assert not missing, f"msgids without a Chinese msgstr (see CONTRIBUTING.md, Translations): {missing}"
    fields = re.compile(r"\{[^{}]*\}")
    for msgid in found:
        assert sorted(fields.findall(msgid)) == sorted(fields.findall(have[msgid])), msgid
        assert not any("fuzzy" in m.flags for m in catalog if m.id == msgid), msgid


def test_committed_mo_is_a_fresh_compile_of_the_po() -> None:
    buf = io.BytesIO()
    write_mo(buf, read_po(PO.open("rb")))
    assert MO.read_bytes() == buf.getvalue(), "run `pybabel compile -d grader/locale -D attn_kata`"


def test_translations_load_and_fall_back() -> None:
    from grader import i18n

    with i18n.using("zh"):
        assert i18n._("attention weights") == "注意力权重"
        assert i18n.status("not_started") == "未开始"
    with i18n.using("en"):
        assert i18n._("attention weights") == "attention weights"
        assert i18n.status("not_started") == "not started"
    assert i18n.translate("zh", "a msgid nobody wrote") == "a msgid nobody wrote"


# ------------------------------------------------------------------------------------ (b)/(c) the real CLI

# one submission (a directory like exercises/) that makes every kind of message: step file <- what it holds
SUBMISSION = {
    "step01_dot_scores.py": "def attention_scores(inputs, query):\n    while True:\n        pass\n",  # a time-out
    "step02_softmax.py": "def attention_weights(scores)\n    return scores\n",  # an import error (SyntaxError)
    "step03_context_vector.py": "def context_vector(attn_weights, inputs):\n    return [1.0, 2.0]\n",  # a wrong type
    "step04_all_tokens.py": "all_loops.py",  # Python loops
    "step05_self_attention_v1.py": "v1_plain_tensors.py",  # plain tensors instead of nn.Parameter
    "step07_causal_mask.py": "mask_float.py",  # a float mask
    "step08_dropout.py": "drop_keep_prob.py",  # p taken as the keep probability
    "step09_causal_attention.py": "ca_mask_not_cut.py",  # the learner's code raises (RuntimeError), a diagnosis
    "step10_multihead_wrapper.py": "wrap_plain_list.py",  # a wrong structure
    "step11_multihead_attention.py": "mha_no_out_proj.py",  # a missing parameter
    "step12_weight_transfer.py": "tr_query_key_swapped.py",  # wrong values
}  # self_attention_v2.py is left out: not started
# each step's time-out: a hang guard, long enough for every honest step on a loaded machine (dot_scores above
# waits it out once per run)
STEP_TIMEOUT = "10"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Every command's output in each language: {lang: {what: text}}."""
    sub = tmp_path_factory.mktemp("i18n") / "sub_1"
    shutil.copytree(ROOT / "exercises", sub)
    (sub / "step06_self_attention_v2.py").unlink()
    for name, content in SUBMISSION.items():
        (sub / name).write_text(content if "\n" in content else (BUGGY / content).read_text(encoding="utf-8"))
    ws = tmp_path_factory.mktemp("ws") / "exercises"
    shutil.copytree(ROOT / "exercises", ws)
    shutil.copy(BUGGY / "dot_sum_wrong_dim.py", ws / "step01_dot_scores.py")
    out: dict[str, dict[str, str]] = {}
    for lang in ("zh", "en"):
        got: dict[str, str] = {}
        table = kata("grade", str(sub), "--timeout", STEP_TIMEOUT, lang=lang)
        assert table.returncode == 0, table.stderr
        got["grade (table)"] = table.stdout + table.stderr
        js = kata("grade", str(sub), "--timeout", STEP_TIMEOUT, "--format", "json", lang=lang)
        assert js.returncode == 0, js.stderr
        doc = json.loads(js.stdout)
        texts = list(doc["notes"])
        for s in doc["steps"]:
            texts += [s["title"], s["message"]] + [d["message"] for d in s.get("diagnoses", [])]
            texts += [t for c in s["checks"] for t in (c["name"], c["message"])]
        got["grade (json)"] = "\n".join(texts)
        check = kata("check", "--path", str(ws), "--timeout", STEP_TIMEOUT, lang=lang)
        assert check.returncode == 1
        got["check"] = check.stdout + check.stderr
        for step in ("dot_scores", "causal_attention", "weight_transfer"):
            hint = kata("hint", step, "--path", str(ws), "--all", lang=lang)
            got[f"hint {step}"] = hint.stdout + hint.stderr
        for _ in range(3):
            hint = kata("hint", "multihead_attention", "--path", str(ws), lang=lang)
        got["hint multihead_attention"] = hint.stdout + hint.stderr
        got["list"] = kata("list", "--path", str(ws), lang=lang).stdout
        got["bad step"] = kata("hint", "no_such_step", lang=lang).stderr.splitlines()[-1]
        out[lang] = got
    return out


def test_the_outputs_cover_errors_timeouts_wrong_types_and_imports(outputs: dict[str, dict[str, str]]) -> None:
    en = "\n".join(outputs["en"].values())
    for needle in ("is there an infinite loop", "your code raised RuntimeError", "expected a torch.Tensor",
                   "SyntaxError", "not started", "diagnosis:", "hint 3/3", "that was the last hint"):
        assert needle in en, needle
    zh = "\n".join(outputs["zh"].values())
    for needle in ("是不是有死循环", "你的代码抛出了 RuntimeError", "应为 torch.Tensor", "SyntaxError", "未开始",
                   "诊断：", "提示 3/3", "这是最后一个提示", "注意力权重", "上下文向量"):
        assert needle in zh, needle


def test_chinese_output_has_no_english_words(outputs: dict[str, dict[str, str]]) -> None:
    allowed = ALLOWED | _parameters()
    leftovers = {what: sorted(set(english_words(text, allowed))) for what, text in outputs["zh"].items()}
    leftovers = {k: v for k, v in leftovers.items() if v}
    assert not leftovers, leftovers
    # and the scanner does read these outputs: the English ones are full of words it reports
    assert all(len(english_words(outputs["en"][what], allowed)) >= 3 for what in ("grade (table)", "check", "list"))
    assert len(set(english_words(outputs["en"]["grade (json)"], allowed))) > 100


def test_english_output_has_no_cjk(outputs: dict[str, dict[str, str]]) -> None:
    found = {what: CJK.findall(text)[:10] for what, text in outputs["en"].items() if CJK.search(text)}
    assert not found, found


def test_the_scanner_finds_english() -> None:
    """The check above is not vacuous: untranslated text is caught, code and learner messages are not."""
    allowed = ALLOWED | {"inputs", "query"}
    assert english_words("形状为 (2, 6)，expected (3,)", allowed) == ["expected"]
    assert english_words("你的代码抛出了 IndexError：index out of range", allowed) == []
    assert english_words("请用 `torch.triu(x, diagonal=1)` 与 self.W_query 和 CausalAttention", allowed) == []
    assert english_words("inputs @ query 得到 ω", allowed) == []
