"""The README's commands, run as a learner would: their output and exit code, through the top-level Click group in
this process (tests/inproc.py: real grading, through the session's zygote), and each verb once as a real process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from inproc import kata as run_in_process

ROOT = Path(__file__).resolve().parent.parent


def kata(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return run_in_process(*args, cwd=cwd)


def process(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_grade_solutions_full_marks_and_exercises_not_started() -> None:
    """The README's first command as a real process (the cold path: the command forks its grading process from a
    zygote of its own and never imports torch, tests/test_forked.py)."""
    sol = process("grade", "solutions", "--format", "json")
    assert sol.returncode == 0, sol.stderr
    doc = json.loads(sol.stdout)
    assert doc["schema_version"] == 1
    assert doc["score"] == doc["max_score"] > 0
    assert all(s["status"] == "passed" for s in doc["steps"])
    ex = json.loads(process("grade", "exercises", "--format", "json").stdout)
    assert ex["score"] == 0
    assert {s["status"] for s in ex["steps"]} == {"not_started"}
    assert len(ex["steps"]) == 14


def test_the_quickstarts_comments_say_what_grade_and_check_exit_with(tmp_path: Path) -> None:
    """Issue 38: `attn-kata grade exercises/  # every step "not started"` exits 0 where `check` exits 1; the
    quickstart says so. Its grade lines, as written, exit 0; `check` on the same stubs exits 1."""
    import shlex

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("In a clone of this repository:", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1) for line in block.splitlines() if line.startswith("attn-kata grade ")]
    assert len(lines) == 2 and "still exit 0" in lines[1][1], lines
    for command, comment in lines:
        done = kata(*shlex.split(command)[1:], "--format", "json")
        assert done.returncode == 0, (command, done.stderr)
        statuses = {s["status"] for s in json.loads(done.stdout)["steps"]}
        assert statuses == ({"not_started"} if "not started" in comment else {"passed"}), (command, statuses)
    assert "`grade` exits 0 whenever it produced a report" in readme and "exits 1 until every step" in readme
    # a copy: check records progress, which would then show in the checkout's own `list`
    shutil.copytree(ROOT / "exercises", tmp_path / "exercises", ignore=shutil.ignore_patterns(".attn-kata"))
    assert kata("check", "--path", str(tmp_path / "exercises")).returncode == 1


def test_check_exit_code_follows_the_steps(tmp_path: Path) -> None:
    ws = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", ws)
    failing = kata("check", "dot_scores", "--path", str(ws))
    assert failing.returncode == 1
    assert "not started" in failing.stdout
    shutil.copy(ROOT / "solutions" / "step01_dot_scores.py", ws / "step01_dot_scores.py")
    passing = kata("check", "1", "--path", str(ws))
    assert passing.returncode == 0, passing.stdout
    assert "next is step 2, softmax" in passing.stdout  # what was asked passes: the tip moves on
    listed = kata("list", "--path", str(ws))
    assert "passed (5/5)" in listed.stdout
    done = tmp_path / "done"
    shutil.copytree(ROOT / "solutions", done)
    finished = kata("--lang", "zh", "check", "--path", str(done))
    assert finished.returncode == 0 and "本章完成" in finished.stdout, finished.stdout
    # a later broken save does not lock the solution again, whether graded by check or by watch
    shutil.copy(ROOT / "exercises" / "step01_dot_scores.py", ws / "step01_dot_scores.py")
    assert kata("check", "dot_scores", "--path", str(ws)).returncode == 1
    shown = kata("solution", "dot_scores", "--path", str(ws))
    assert shown.returncode == 0, shown.stdout
    assert "def attention_scores" in shown.stdout


def test_one_exception_raised_by_every_case_is_said_once(tmp_path: Path) -> None:
    ws = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", ws)
    stub = ws / "step01_dot_scores.py"
    stub.write_text(stub.read_text().replace("raise NotImplementedError  # your code here", "return inputs.T @ query"))
    for lang, same in (("en", "(the same error as above)"), ("zh", "（与上面的错误相同）")):
        out = kata("--lang", lang, "check", "dot_scores", "--path", str(ws)).stdout
        assert out.count("RuntimeError") == 1 and out.count(same) >= 3, out


def test_hints_reveal_one_level_at_a_time_in_both_languages(tmp_path: Path) -> None:
    first = kata("hint", "causal_mask", "--path", str(tmp_path))
    assert "hint 1/3" in first.stdout and "hint 2/3" not in first.stdout
    second = kata("--lang", "zh", "hint", "causal_mask", "--path", str(tmp_path))
    assert "提示 2/3" in second.stdout  # the label is translated too (grader/i18n.py)
    assert "掩码" in second.stdout


def test_bad_input_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    missing = kata("grade", str(tmp_path / "nope.ipynb"), "--format", "json")
    assert missing.returncode == 2  # one line, never a report of 12 errors (README: exit codes)
    assert not missing.stdout and "no such file" in missing.stderr and missing.stderr.count("\n") == 1
    unknown = kata("check", "no_such_step")
    assert unknown.returncode == 2 and "unknown step" in unknown.stderr
    assert "Traceback" not in unknown.stderr


@pytest.mark.parametrize("fmt", ["json", "table", "gradescope"])
def test_an_upload_that_cannot_be_read_is_a_report_with_the_reason(tmp_path: Path, fmt: str) -> None:
    """A file the grader rejects on reading (not JSON, a cell source that is not text, over the size cap) is every
    step's error with that one reason, in every format: never a traceback (it was a KeyError from checks not yet
    loaded, and on Gradescope a 0 with "the autograder failed"); Gradescope's format says it once, as its run does."""
    bad = tmp_path / "broken.ipynb"
    bad.write_text('{"cells": [{"cell_type": "code", "source": 7}], "nbformat": 4, "nbformat_minor": 5}')
    proc = kata("grade", str(bad), "--format", fmt)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
    if fmt == "json":
        doc = json.loads(proc.stdout)
        assert doc["score"] == 0 and len(doc["steps"]) == 14
        assert {s["status"] for s in doc["steps"]} == {"error"}
        assert all("not text" in s["checks"][0]["message"] or "cell" in s["checks"][0]["message"]
                   for s in doc["steps"]), doc["steps"][0]
    elif fmt == "gradescope":  # Gradescope's one verdict for what cannot be graded: a 0, the reason once, no test
        doc = json.loads(proc.stdout)
        assert doc["score"] == 0 and doc["tests"] == [], doc
        assert doc["output"].startswith("Not graded: ") and "cell" in doc["output"], doc["output"]


BAD_CLI = {  # each once gave a traceback, blocked or replaced a device (red team 8)
    "timeout_nan": ["grade", "{ok}", "--timeout", "nan"],
    "batch_timeout_nan": ["batch", "{tmp}", "--out", "{tmp}/out", "--timeout", "nan"],
    "secret_fifo": ["grade", "{ok}", "--secret", "@{fifo}"],
    "secret_endless": ["grade", "{ok}", "--secret", "@/dev/zero"],
    "html_device": ["grade", "{ok}", "--html", "/dev/full"],
    "out_device": ["grade", "{ok}", "--format", "json", "--out", "/dev/full"],
    "gradescope_root_file": ["gradescope", "run", "--root", "/dev/null"],
    "gradescope_zip_nowhere": ["gradescope", "build", "--out", "/proc/x.zip"],
    "gradescope_zip_device": ["gradescope", "build", "--out", "/dev/full"],
    "prairielearn_root_file": ["prairielearn", "run", "--root", "/dev/null"],
}


@pytest.mark.parametrize("name", list(BAD_CLI))
def test_bad_paths_and_values_are_one_line_not_a_traceback(tmp_path: Path, name: str) -> None:
    """Exit 2 with one clear line, before any grading; a device given as an output is never replaced (as root,
    os.replace over /dev/full once made it a regular file), a FIFO given as the key file never blocks."""
    import os
    import stat

    ok = tmp_path / "ok.py"
    shutil.copy(ROOT / "solutions" / "step01_dot_scores.py", ok)
    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)
    args = [a.format(ok=ok, tmp=tmp_path, fifo=fifo) for a in BAD_CLI[name]]
    proc = kata(*args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-500:])
    # one line of ours, or click's usage error (its usage line, then one line saying what is wrong)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(("attn-kata:", "Error: Invalid value")), proc.stderr
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode) and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_gradescope_format_has_the_spec_keys() -> None:
    out = kata("grade", "solutions", "--format", "gradescope")
    doc = json.loads(out.stdout)
    assert doc["score"] == doc["max_score"]
    assert {"name", "score", "max_score", "output", "visibility"} <= set(doc["tests"][0])
    assert "execution_time" in doc


def test_every_format_can_be_written_to_a_file(tmp_path: Path) -> None:
    """--out holds what stdout would have shown, the table included (it was once written empty)."""
    for fmt in ("table", "json", "gradescope"):
        out = tmp_path / f"report.{fmt}"
        proc = kata("grade", "solutions", "--step", "dot_scores", "--format", fmt, "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        text = out.read_text(encoding="utf-8")
        assert "dot_scores" in text or "dot" in text, (fmt, text[:200])
        if fmt == "table":
            assert "dot_scores" in text and "\x1b[" not in text, text
        else:
            assert json.loads(text)


def test_lang_before_or_after_the_subcommand_and_version() -> None:
    from grader.cli import lang_first

    assert lang_first(["check", "--lang", "zh", "x"]) == ["--lang", "zh", "check", "x"]
    assert lang_first(["hint", "--lang=zh", "1"]) == ["--lang=zh", "hint", "1"]
    assert lang_first(["grade", "--", "--lang", "zh"]) == ["grade", "--", "--lang", "zh"]  # a path after --
    after = kata("list", "--lang", "zh")
    before = kata("--lang", "zh", "list")
    assert after.returncode == before.returncode == 0, after.stderr
    assert after.stdout == before.stdout
    assert "运行" in after.stdout and "步骤" in after.stdout
    missing = kata("list", "--lang")
    assert missing.returncode == 2 and "--lang" in missing.stderr
    version = kata("--version")
    assert version.returncode == 0 and version.stdout.startswith("attn-kata, version ")


def test_the_secret_can_come_from_a_file_and_a_typed_one_is_warned_about(tmp_path: Path) -> None:
    """--secret @FILE reads the key (other users see a typed one in `ps`): the same report as the key typed,
    which gets a note on stderr; a missing file is a usage error (exit 2)."""
    key = tmp_path / "key.txt"
    key.write_text("term-2 key\n")
    # a wrong answer's messages quote values of the hidden inputs, which the key draws
    args = ("grade", str(ROOT / "tests" / "fixtures" / "buggy" / "dot_abs.py"), "--step", "dot_scores", "--format",
            "json")
    from_file = kata(*args, "--secret", f"@{key}")
    typed = kata(*args, "--secret", "term-2 key")
    assert from_file.returncode == typed.returncode == 0, from_file.stderr
    assert from_file.stdout == typed.stdout
    assert "visible to other users" in typed.stderr and "visible" not in from_file.stderr
    other = kata(*args, "--secret", "another key")
    assert other.returncode == 0 and other.stdout != typed.stdout  # the key is used, not ignored
    missing = kata(*args, "--secret", f"@{tmp_path / 'nope'}")
    assert missing.returncode == 2 and "cannot read the key" in missing.stderr


def test_grade_cases_per_upload(tmp_path: Path) -> None:
    """`grade --cases-per-upload`: the hidden cases keyed by the upload (as on Gradescope and PrairieLearn), so a
    table of the course cases' answers (test_gradescope._replay: 5/5 without the flag) earns nothing, and the same
    upload graded twice gets the same report."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_gradescope import COURSE_SECRET, _replay

    upload = tmp_path / "upload"
    upload.mkdir()
    (upload / "attention.py").write_text(_replay(COURSE_SECRET), encoding="utf-8")
    base = ("grade", str(upload), "--format", "json", "--step", "dot_scores", "--secret", COURSE_SECRET,
            "--allow-weak-sandbox")
    shared = kata(*base)
    assert shared.returncode == 0, shared.stderr
    assert json.loads(shared.stdout)["score"] == 5
    keyed = [kata(*base, "--cases-per-upload") for _ in range(2)]
    assert all(k.returncode == 0 for k in keyed), keyed[0].stderr
    assert json.loads(keyed[0].stdout)["score"] == 0
    assert keyed[0].stdout == keyed[1].stdout


def test_a_mistyped_step_gets_a_did_you_mean() -> None:
    from click.testing import CliRunner

    from grader.cli import main

    out = CliRunner().invoke(main, ["--lang", "en", "--no-daemon", "hint", "casual_mask"])
    assert out.exit_code == 2
    assert "did you mean 'causal_mask'" in out.output
    far = CliRunner().invoke(main, ["--lang", "en", "--no-daemon", "hint", "zzzz"])
    assert far.exit_code == 2 and "did you mean" not in far.output and "attn-kata list" in far.output


def _verbs() -> list[str]:
    from grader.cli import main

    return sorted(main.commands)


@pytest.mark.parametrize("verb", _verbs())
def test_every_verb_runs_as_a_process(verb: str) -> None:
    """The in-process tests above bypass the entry point: each verb once as the installed `attn-kata` starts it
    (its help: the verb is registered and its module imports in a fresh interpreter), the same help as in-process."""
    proc = subprocess.run([str(Path(sys.executable).parent / "attn-kata"), verb, "--help"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"Usage: attn-kata {verb} "), proc.stdout
    assert proc.stdout == kata(verb, "--help").stdout
