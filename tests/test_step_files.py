"""The step files' names (issue 25, "stub files ordered as the steps"): `step01_dot_scores.py` … `step14_gpt2_size.py`
(registry.Step.file), so that any file list shows them in step order, while a workspace or an upload that uses the
older names (`dot_scores.py`, Step.legacy_file), or a mix of both, grades exactly as before: a learner's
`from causal_attention import …` and `from step09_causal_attention import …` both reach the learner's own file
(grader.worker.serve.UnitFinder), and where a folder holds both names for one step the numbered file is graded and
the report's notes say that the other is not read (grader.submission.step_files)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from inproc import kata

from grader import submission
from grader.grading import engine
from grader.learner import init as init_mod
from grader.registry import BY_ID, BY_MODULE, STEPS

ROOT = Path(__file__).resolve().parent.parent
BUGGY = ROOT / "tests" / "fixtures" / "buggy"
# two steps made wrong in every layout: the mask filled with 0 (step 7), and the mask applied after the softmax in
# the CausalAttention that step 10 imports (step 9: the wrapper is graded on the stand-ins, so it still passes)
BUGS = {"causal_mask": "mask_fill_zero.py", "causal_attention": "ca_mask_after_softmax.py"}
# what is graded of each layout: a plain step, the two bugs, and every step whose file imports an earlier one
GRADED = ["dot_scores", "causal_mask", "causal_attention", "multihead_wrapper", "two_dim_output", "gpt2_size"]
STEP_IMPORT = re.compile(r"^from (?:step\d\d_)?(\w+) import", re.M)


def _source(step_id: str) -> str:
    bug = BUGS.get(step_id)
    return (BUGGY / bug if bug else ROOT / "solutions" / BY_ID[step_id].file).read_text(encoding="utf-8")


def _layout(folder: Path, numbered: set[str], import_other_name: bool = False) -> Path:
    """The reference (with BUGS) as a folder: the steps in `numbered` under their numbered file names, the others
    under their older ones. Each import of an earlier step names that step's file as it lies in the folder, or, with
    `import_other_name`, by its other name (so it resolves only through the worker's alias)."""
    folder.mkdir()
    for s in STEPS:
        def imported(m: re.Match) -> str:
            earlier = BY_MODULE[m[1]]
            as_laid = earlier.stem if earlier.id in numbered else earlier.id
            other = earlier.id if as_laid == earlier.stem else earlier.stem
            return f"from {other if import_other_name else as_laid} import"

        name = s.file if s.id in numbered else s.legacy_file
        (folder / name).write_text(STEP_IMPORT.sub(imported, _source(s.id)), encoding="utf-8")
    return folder


def _verdicts(report) -> dict[str, tuple]:  # type: ignore[no-untyped-def]
    """Per step: status, score and every check's name, score and message, the step files' names shown without
    their number (the one thing the layouts may change in a report)."""
    def unnumbered(text: str) -> str:
        return re.sub(r"\bstep\d\d_(\w+\.py)\b", r"\1", text)

    return {s.id: (s.status, s.score, s.max_score, unnumbered(s.message or ""),
                   [(c.name, c.score, c.passed, unnumbered(c.message or "")) for c in s.checks]) for s in report.steps}


def test_the_registry_numbers_every_step_file() -> None:
    for s in STEPS:
        assert s.file == f"step{s.number:02d}_{s.id}.py" and s.stem.isidentifier(), s
        assert s.legacy_file == f"{s.id}.py" and s.files == (s.file, s.legacy_file)
        assert BY_MODULE[s.stem] is s and BY_MODULE[s.id] is s
    assert sorted(s.file for s in STEPS) == [s.file for s in STEPS]  # 10 after 09: zero-padded


@pytest.mark.parametrize("folder", ["exercises", "solutions"])
def test_the_kata_lists_its_files_in_step_order(folder: str) -> None:
    assert sorted(f for f in os.listdir(ROOT / folder) if f.endswith(".py")) == [s.file for s in STEPS]


@pytest.mark.parametrize("folder", ["exercises", "solutions"])
def test_the_kata_imports_earlier_steps_by_their_numbered_names(folder: str) -> None:
    imported = {m[1] for s in STEPS for m in re.finditer(r"^from (\w+) import", (ROOT / folder / s.file).read_text(),
                                                          re.M) if m[1] in BY_MODULE}
    assert imported == {"step09_causal_attention", "step10_multihead_wrapper", "step11_multihead_attention"}


def test_a_new_workspace_lists_its_step_files_in_step_order(tmp_path: Path) -> None:
    ws = init_mod.init(tmp_path / "ws", lang="en")
    assert sorted(f for f in os.listdir(ws) if f.endswith(".py")) == [s.file for s in STEPS]
    readme = (ws / "README.md").read_text(encoding="utf-8")
    assert "starting with `step01_dot_scores.py`" in readme
    assert [readme.index(f"`{s.file}`") for s in STEPS] == sorted(readme.index(f"`{s.file}`") for s in STEPS)
    assert "dot_scores.py`" not in readme.replace("step01_dot_scores.py`", "")


def test_older_names_and_any_mix_grade_exactly_as_the_numbered_names(tmp_path: Path) -> None:
    every = {s.id for s in STEPS}
    odd = {s.id for s in STEPS if s.number % 2}
    folders = [_layout(tmp_path / "numbered", every), _layout(tmp_path / "older", set()),
               _layout(tmp_path / "mixed", odd), _layout(tmp_path / "crossed", odd, import_other_name=True)]
    crossed = (tmp_path / "crossed" / "multihead_wrapper.py").read_text(encoding="utf-8")
    assert "from causal_attention import" in crossed and (tmp_path / "crossed" / "step09_causal_attention.py").is_file()
    reports = engine.grade_many([str(f) for f in folders], steps=GRADED)
    numbered = _verdicts(reports[0])
    assert numbered["causal_mask"][0] == "partial" and numbered["causal_attention"][0] == "failed"
    assert numbered["multihead_wrapper"][0] == "passed"  # on the stand-ins, whatever step 9 does
    assert list(numbered) == GRADED and reports[0].score < reports[0].max_score
    for folder, report in zip(folders[1:], reports[1:], strict=True):
        assert _verdicts(report) == numbered, folder.name
        assert report.score == reports[0].score and report.notes == reports[0].notes == []


def test_a_step_under_both_names_grades_the_numbered_file_and_says_so(tmp_path: Path) -> None:
    ws = tmp_path / "both"
    shutil.copytree(ROOT / "solutions", ws)
    (ws / "dot_scores.py").write_text("def attention_scores(:\n")  # a stale copy that does not even parse
    (ws / "causal_attention.py").write_text("raise SystemExit('the older file ran')\n")
    shutil.copy(ROOT / "exercises" / BY_ID["causal_mask"].file, ws / BY_ID["causal_mask"].file)  # the stub...
    shutil.copy(ROOT / "solutions" / BY_ID["causal_mask"].file, ws / "causal_mask.py")  # ...beside the work
    wrapper = ws / BY_ID["multihead_wrapper"].file
    wrapper.write_text(wrapper.read_text().replace("from step09_causal_attention import",
                                                   "from causal_attention import"))
    files, both = submission.step_files(ws)
    assert files["dot_scores"].name == "step01_dot_scores.py" and files["causal_attention"].name == \
        "step09_causal_attention.py"
    assert both == [("step01_dot_scores.py", "dot_scores.py"), ("step07_causal_mask.py", "causal_mask.py"),
                    ("step09_causal_attention.py", "causal_attention.py")]
    report = engine.grade(ws)
    status = {s.id: s.status for s in report.steps}
    assert status["causal_mask"] == "not_started"  # the numbered file, a stub, is what is graded
    assert all(v == "passed" for k, v in status.items() if k != "causal_mask"), status
    assert report.notes == [
        "step01_dot_scores.py and dot_scores.py are both step 1's file: step01_dot_scores.py is graded, "
        "dot_scores.py is not read",
        "step07_causal_mask.py and causal_mask.py are both step 7's file: step07_causal_mask.py is graded, "
        "causal_mask.py is not read",
        "step09_causal_attention.py and causal_attention.py are both step 9's file: step09_causal_attention.py is "
        "graded, causal_attention.py is not read"]


def test_a_workspace_with_the_older_names_is_still_one_for_every_command(tmp_path: Path) -> None:
    ws = tmp_path / "exercises"
    ws.mkdir()
    for s in STEPS:
        shutil.copy(ROOT / "exercises" / s.file, ws / s.legacy_file)
    assert submission.is_workspace(ws) and submission.step_path(ws, BY_ID["causal_mask"]) == ws / "causal_mask.py"
    assert submission.step_path(tmp_path, BY_ID["causal_mask"]) == tmp_path / "step07_causal_mask.py"  # to write
    shutil.copy(ROOT / "solutions" / BY_ID["dot_scores"].file, ws / "dot_scores.py")
    checked = kata("--lang", "en", "check", "dot_scores", "softmax", "--path", str(ws))
    assert checked.returncode == 1 and "passed" in checked.stdout
    tip = "".join(checked.stdout.split())  # the table wraps a long path anywhere
    assert f"next:edit{ws / 'softmax.py'};" in tip, tip  # the file that is there, not one to create
    (ws / "causal_mask.py").write_text("def causal_mask(num_tokens):\n    return 42\n")
    done = kata("--lang", "en", "reset", "causal_mask", "--path", str(ws), input="y\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (ws / "causal_mask.py").read_text(encoding="utf-8") == \
        (ROOT / "exercises" / BY_ID["causal_mask"].file).read_text(encoding="utf-8")
    assert not (ws / BY_ID["causal_mask"].file).exists()
