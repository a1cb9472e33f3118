"""A class that one student cannot disturb (issue 11): one batch over a messy folder, real subprocesses and real
files; plus discovery's rules one at a time, and the command line's contract (exit codes, escaping)."""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from inproc import kata as run_in_process
from machine import scaled

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import submissions  # noqa: E402

from grader.instructor import discovery  # noqa: E402
from grader.registry import STEPS  # noqa: E402

ESC = "\x1b[2J\x1b[32mall submissions graded"


def _run(args: list[str]) -> subprocess.CompletedProcess:
    """In this process (tests/inproc.py: output and exit code, real grading); Ctrl-C's test runs a process."""
    env = {**os.environ, "ATTN_KATA_SECRET": "s3cret", "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    return run_in_process("--lang", "en", *args, cwd=ROOT, env=env)


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _workspace_members(prefix: str = "") -> dict[str, bytes]:
    return {f"{prefix}{f.name}": f.read_bytes() for f in sorted((ROOT / "solutions").glob("*.py"))}


def _v3(sources: list[str], outputs: int = 0) -> str:
    cells = [{"cell_type": "code", "input": s, "language": "python", "metadata": {}, "collapsed": False,
              "outputs": [{"output_type": "stream", "stream": "stdout", "text": "x" * outputs}] if outputs else []}
             for s in sources]
    return json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": ""},
                       "worksheets": [{"cells": cells, "metadata": {}}]})


def _big_outputs(mb: int) -> str:
    nb = json.loads(submissions.notebook_source())
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "y" * (mb << 20)}]
    return json.dumps(nb)


@pytest.fixture(scope="module")
def messy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess, float]:
    d = tmp_path_factory.mktemp("messy") / "class"
    d.mkdir()
    # honest students, in every shape an upload takes
    shutil.copytree(ROOT / "solutions", d / "ann" / "project" / "exercises",
                    ignore=shutil.ignore_patterns("__pycache__"))  # a workspace one level down (and more)
    shutil.copytree(ROOT / "solutions", d / "dan", ignore=shutil.ignore_patterns("__pycache__"))
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in _workspace_members("exercises/").items():
            zf.writestr(name, data)
    _zip(d / "olga.zip", {"olga/olga_inner.zip": inner.getvalue()})  # nested zips
    (d / "pat.ipynb").write_text(submissions.notebook_source())
    (d / "quinn.ipynb").write_text(_v3([s for _, s in submissions.cells()]))  # nbformat 3
    (d / "rita.ipynb").write_text(_big_outputs(3))  # 3 MB of outputs, little code
    # hostile or broken
    os.mkfifo(d / "zed.py")  # would block a naive discovery forever
    _zip(d / "mallory_300_1_sub.zip", {"zoe_200_1_attention.py": b"x = 1\n"})  # forges a classmate's identity
    (d / "zoe_200_1_attention.ipynb").write_text(submissions.notebook_source())  # ... who is in the class too
    # honest code that prints 20 MB at import: its prints are capped, never an error
    shutil.copytree(ROOT / "solutions", d / "loud", ignore=shutil.ignore_patterns("__pycache__"))
    (d / "loud" / "step01_dot_scores.py").write_text("print('x' * (20 << 20))\n"
                                              + (ROOT / "solutions" / "step01_dot_scores.py").read_text())
    (d / "eve[b]" / "[").mkdir(parents=True)  # rich markup in names: "[/b]" reaches the end-of-batch list
    (d / "eve[b]" / "[" / "b]one.ipynb").write_text(submissions.notebook_source())
    (d / "eve[b]" / "[" / "b]two.ipynb").write_text(submissions.notebook_source())
    (d / f"{ESC}.py").write_text("def (\n")  # escape sequences in a name (listed at the end: unreadable)
    (d / "empty_folder").mkdir()
    (d / "hollow.py").write_bytes(b"")
    (d / "broken.py").write_bytes(b"def f(:\n    pass\n")
    (d / "garbage.ipynb").write_bytes(bytes(range(256)) * 8)
    (d / "notnb.ipynb").write_bytes(b'{"nbformat": 4, "this is": "not a notebook"}')
    (d / "badcell.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                                 "cells": [{"cell_type": "code", "source": ["x = 1\n", 3],
                                                            "metadata": {}, "outputs": []}]}))
    (d / "huge.py").write_text("x = 1\n" * 600_000)  # 3.6 MB of code
    # a disk filler (honest answers, after filling every place it can write), a memory bomb for the trusted side
    # (a 1 GiB answer), a submission whose every function hangs
    shutil.copytree(ROOT / "solutions", d / "filler", ignore=shutil.ignore_patterns("__pycache__"))
    fill = ("import os\n"
            "for place in ('.', '/tmp', '/dev/shm', os.environ.get('TMPDIR', '/tmp')):\n"
            "    try:\n"
            "        for i in range(400):\n"
            "            with open(os.path.join(place, f'fill{os.getpid()}_{i}'), 'wb') as f:\n"
            "                f.write(bytes(8 << 20))\n"
            "    except OSError:\n"
            "        pass\n")
    (d / "filler" / "step01_dot_scores.py").write_text(fill + (ROOT / "solutions" / "step01_dot_scores.py").read_text())
    shutil.copytree(ROOT / "solutions", d / "bomb", ignore=shutil.ignore_patterns("__pycache__"))
    (d / "bomb" / "step01_dot_scores.py").write_text(
        "import torch\ndef attention_scores(inputs, query):\n    return torch.zeros(1 << 28)\n")
    names = sorted({n for s in STEPS for n in s.names})
    (d / "hang.py").write_text("".join(f"def {n}(*a, **k):\n    while True:\n        pass\n\n\n" for n in names))
    out = d.parent / "out"
    t0 = time.monotonic()
    proc = _run(["batch", str(d), "--out", str(out), "--jobs", "2", "--timeout", "10"])
    return d, out, proc, time.monotonic() - t0


HONEST_WORKSPACES = {"ann", "dan", "olga", "filler", "loud"}
HONEST_NOTEBOOKS = {"pat", "quinn", "rita", "zoe"}
EXPECTED = {"zed": "rejected", "mallory": "graded", "bomb": "graded", "hang": "over_budget",
            "eve[b]": "ambiguous", f"{ESC}": "unreadable",
            "empty_folder": "empty", "hollow": "empty", "broken": "unreadable", "garbage": "unreadable",
            "notnb": "unreadable", "badcell": "unreadable", "huge": "too_large",
            **{s: "graded" for s in HONEST_WORKSPACES | HONEST_NOTEBOOKS}}


def _rows(out: Path) -> dict[str, dict[str, str]]:
    rows = list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text(encoding="utf-8"))))
    assert len(rows) == len({r["student"] for r in rows})
    # the formula guard's quote and the escapes of control characters (csv_cell) undone: keyed by the real name
    return {r["student"].lstrip("'").replace("\\x1b", "\x1b"): r for r in rows}


def test_every_student_gets_exactly_one_record_with_the_right_status(messy) -> None:
    _, out, proc, seconds = messy
    assert proc.returncode == 1, proc.stderr[-3000:]  # some could not be graded: listed, exit 1
    rows = _rows(out)
    assert {k: r["status"] for k, r in rows.items()} == EXPECTED
    # identity comes from the upload's own name: mallory's zip names no one, the real zoe keeps her name
    assert "zoe (2)" not in rows and rows["zoe"]["submission"] == "zoe_200_1_attention.ipynb"
    for name in EXPECTED:
        if EXPECTED[name] not in ("graded", "over_budget"):
            assert rows[name]["reason"], name
            assert rows[name]["total"] == "0"
    assert "syntax error" in rows["broken"]["reason"]
    assert "not a readable notebook" in rows["badcell"]["reason"]
    assert "not a regular file" in rows["zed"]["reason"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["records"] == summary["total"] == len(EXPECTED)
    assert summary["statuses"] == {"ambiguous": 1, "empty": 2, "graded": 11, "over_budget": 1, "rejected": 1,
                                   "too_large": 1, "unreadable": 5}
    assert {n["student"]: n["status"] for n in summary["not_graded"]} == {  # names as one line: ESC escaped
        discovery.escape_controls(k): v for k, v in EXPECTED.items() if v not in ("graded", "over_budget")}
    assert rows["hang"]["total"] == "0"
    bomb = json.loads((out / "reports" / "bomb.json").read_text(encoding="utf-8"))
    assert {s["id"]: s["status"] for s in bomb["steps"]}["dot_scores"] != "passed"
    assert bomb["score"] == bomb["max_score"] - 5  # only its own bombed step lost
    assert seconds < scaled(300)  # measured: about 25 s on the shared 2-core machine (the hang costs ~20 s of it)


def test_honest_students_get_full_marks_in_every_shape(messy) -> None:
    _, out, _, _ = messy
    rows = _rows(out)
    for name in HONEST_WORKSPACES:
        assert rows[name]["total"] == rows[name]["max_score"], name
    reports = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in (out / "reports").glob("*.json")}
    for name in HONEST_NOTEBOOKS:  # nbformat 3, big outputs: the same as the plain notebook, every step passed
        steps = {s["id"]: s for s in reports[name]["steps"]}
        assert all(steps[s]["status"] == "passed" for s in submissions.ORDER), (name, steps)
        assert reports[name]["score"] == reports["pat"]["score"]
    assert rows["ann"]["submission"] == "ann/project/exercises"
    # loud's 20 MB of prints were capped: said once in its report, and only there
    loud = json.loads((out / "reports" / "loud.json").read_text(encoding="utf-8"))
    assert loud["notes"].count("printed output over 1 MiB was dropped") == 1, loud["notes"]
    assert not any("dropped" in n for r in reports.values() if r is not reports.get("loud") for n in r["notes"])


def test_feedback_names_the_one_real_problem_once(messy) -> None:
    _, out, _, _ = messy
    text = (out / "feedback" / "broken.txt").read_text(encoding="utf-8")
    assert text.count("syntax error") == 1
    assert "work on step" not in text
    assert "could not be graded" in (out / "feedback" / "hollow.txt").read_text(encoding="utf-8")


def test_the_terminal_output_is_clean_and_out_holds_only_results(messy) -> None:
    _, out, proc, _ = messy
    both = proc.stdout + proc.stderr
    assert "\x1b[2J" not in both and "Traceback" not in both and "MarkupError" not in both
    assert "eve[b]: ambiguous: several .ipynb files: [/b]one.ipynb" in both  # shown as it is, not parsed
    assert "\\x1b[2J" in both  # the escape shown, not obeyed
    assert sorted(p.name for p in out.iterdir()) == ["class.html", "class.json", "feedback", "gradebook.csv",
                                                      "index.sqlite", "reports", "sources.json", "summary.json"]


# ---------------------------------------------------------------- discovery's rules, one at a time


def test_a_fifo_never_blocks_discovery(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "zed.py")
    (tmp_path / "amy").mkdir()
    os.mkfifo(tmp_path / "amy" / "attention.ipynb")
    entries = discovery.discover(tmp_path, tmp_path / ".staging")
    assert {e.student: e.status for e in entries} == {"zed": "rejected", "amy": "empty"}


def test_nested_archives_share_one_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each archive alone fits the student's budget (2 MiB here); the outer one and the one inside it together
    do not: one budget per student across nested archives, not one per archive."""
    monkeypatch.setattr(discovery, "Budget", functools.partial(discovery.Budget, total=2 << 20))
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:  # incompressible: no ratio check, only the budget
        zf.writestr("part0.py", os.urandom(700 * 1024))
        zf.writestr("part1.py", os.urandom(700 * 1024))
    staging = tmp_path / "out" / ".staging"
    alone = _zip(tmp_path / "nils.zip", {"x/part.py": os.urandom(1400 * 1024)})
    assert discovery.open_archive(alone, staging, discovery.Budget()).path is not None
    nested = _zip(tmp_path / "nora.zip", {"a.zip": inner.getvalue()})
    found = discovery.open_archive(nested, staging, discovery.Budget())
    assert found.path is None and "expands past" in found.reason


def test_ambiguity_is_reported_not_guessed(tmp_path: Path) -> None:
    (tmp_path / "a.ipynb").write_text("{}")
    (tmp_path / "b.ipynb").write_text("{}")
    found = discovery.locate(tmp_path)
    assert found.path is None and found.status == "ambiguous" and "a.ipynb" in found.reason


def test_a_student_archive_never_names_a_classmate(tmp_path: Path) -> None:
    _zip(tmp_path / "mallory.zip", {"zoe_200_1_attention.py": b"x = 1\n"})
    _zip(tmp_path / "yan_12_3_x.zip", {"zoe_200_1_a.py": b"x = 1\n", "ugo_201_1_a.py": b"y = 2\n"})
    entries = discovery.discover(tmp_path, tmp_path / ".staging")
    assert sorted(e.student for e in entries) == ["mallory", "yan"]


# ---------------------------------------------------------------- the command line's contract


def test_cli_contract_missing_inputs_outputs_and_numbers(tmp_path: Path) -> None:
    missing = _run(["grade", "/nonexistent/alice.ipynb"])
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0, missing.stderr
    assert "no such file" in missing.stderr
    no_dir = _run(["batch", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert no_dir.returncode == 2 and no_dir.stderr.strip().count("\n") == 0
    unwritable = _run(["grade", "solutions", "--format", "json", "--out", str(tmp_path / "no" / "r.json")])
    assert unwritable.returncode == 2 and "cannot write" in unwritable.stderr and not unwritable.stdout
    assert "Traceback" not in unwritable.stderr
    html = _run(["grade", "solutions", "--html", str(tmp_path)])
    assert html.returncode == 2 and "directory" in html.stderr
    for cmd in (["grade", "solutions"], ["check"], ["batch", str(tmp_path), "--out", str(tmp_path / "o")]):
        bad = _run([*cmd, "--timeout", "-1"])
        assert bad.returncode == 2, (cmd, bad.stderr)


def test_grade_finds_a_nested_workspace_and_escapes_names(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "solutions", tmp_path / "kim" / "exercises", ignore=shutil.ignore_patterns("__pycache__"))
    doc = json.loads(_run(["grade", str(tmp_path / "kim"), "--format", "json"]).stdout)
    assert doc["score"] == doc["max_score"]
    named = tmp_path / f"[bold]{ESC}.py"
    named.write_text("x = 1\n")
    table = _run(["grade", str(named)])
    assert table.returncode == 0, table.stderr
    assert "\x1b[2J" not in table.stdout and "MarkupError" not in table.stderr and "Traceback" not in table.stderr
    assert "[bold]\\x1b[2J" in table.stdout  # markup shown as text, the escape sequence written out
    (tmp_path / "crash.py").write_text("raise RuntimeError('boom at import')\n")
    once = _run(["grade", str(tmp_path / "crash.py")])  # one problem for every step: said once
    assert once.stdout.count("! RuntimeError") == 1, once.stdout


def test_feedback_says_a_whole_submission_problem_once() -> None:
    from grader.instructor.gradebook import feedback_text

    steps = [{"id": s, "title": s, "status": "error", "score": 0, "max_score": 5, "checks": [],
              "message": "RuntimeError: boom"} for s in submissions.ORDER]
    text = feedback_text("ann", {"submission": "a.py", "score": 0, "max_score": 60, "steps": steps})
    assert text.count("boom") == 1 and "work on step" not in text


def test_a_submission_that_hangs_everywhere_costs_about_its_budget(tmp_path: Path) -> None:
    """Every name of every step hangs: the submission is graded on what finished (nothing) with the status
    over_budget, in about two step time-outs (its wall-clock budget), not one per step; a classmate is untouched."""
    d = tmp_path / "class"
    d.mkdir()
    names = sorted({n for s in STEPS for n in s.names})
    (d / "hang.py").write_text("".join(f"def {n}(*a, **k):\n    while True:\n        pass\n\n\n" for n in names))
    shutil.copytree(ROOT / "solutions", d / "honest", ignore=shutil.ignore_patterns("__pycache__"))
    t0 = time.monotonic()
    proc = _run(["batch", str(d), "--out", str(tmp_path / "out"), "--jobs", "2", "--timeout", "2"])
    seconds = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]  # graded (on what finished): not an ungraded record
    rows = _rows(tmp_path / "out")
    assert rows["hang"]["status"] == "over_budget" and rows["hang"]["total"] == "0"
    assert rows["honest"]["status"] == "graded" and rows["honest"]["total"] == rows["honest"]["max_score"]
    assert "used up their time budget" in proc.stdout
    assert seconds < scaled(60), seconds  # one time-out per step would be 2 s x every step, plus a re-import each


def test_nbgrader_reads_a_malformed_notebook_as_that_students_zero(tmp_path: Path) -> None:
    from grader.platforms.nbgrader.autograde import read_notebook

    bad = [{"cells": [{"cell_type": "code", "source": ["x = 1\n", 3], "metadata": {}}]}, {"cells": [5]},
           {"cells": [{"cell_type": "code", "source": "x", "metadata": {"nbgrader": 7}}]}, {"cells": 3}, [1]]
    for i, nb in enumerate(bad):
        (tmp_path / f"{i}.ipynb").write_text(json.dumps(nb))
        assert read_notebook(tmp_path / f"{i}.ipynb") == (None, [])
    (tmp_path / "ok.ipynb").write_text(submissions.notebook_source())
    nb, cells = read_notebook(tmp_path / "ok.ipynb")
    assert nb is not None and cells


@pytest.mark.parametrize("command", ["check", "grade"])
def test_ctrl_c_exits_130(tmp_path: Path, command: str) -> None:
    import signal

    ws = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", ws)
    (ws / "step01_dot_scores.py").write_text("def attention_scores(*a, **k):\n    while True:\n        pass\n")
    args = ["check", "dot_scores", "--path", str(ws)] if command == "check" else ["grade", str(ws)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "grader", "--lang", "en", *args, "--timeout", "60"], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(6)  # well into grading: the step hangs for up to 60 s
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err


# ---------------------------------------------------------------- what one upload's names, bytes and shape can do
# (red team 8: findings 2, 3, 5, 7, 8, 13 and a symbolic link to itself)

BOOK = ROOT / "tests" / "fixtures" / "correct" / "book_verbatim.py"


def _many_cells(empty: int, blank: str = "") -> str:
    nb = json.loads(submissions.notebook_source())
    nb["cells"] += [{"cell_type": "code", "source": blank, "metadata": {}, "outputs": [], "execution_count": None}
                    for _ in range(empty)]
    return json.dumps(nb)


def test_a_class_is_graded_whatever_one_upload_does_to_the_file_system(tmp_path: Path) -> None:
    """Zips whose members cannot be written (a member both a file and a folder, a 300-byte folder name), a name
    that is not UTF-8, a link to itself, a BOM, a notebook of 5000 code cells: each student gets one record, the
    honest ones full marks. OUT is the class folder, and a second run does not take OUT's folders for students."""
    d = tmp_path / "class"
    d.mkdir()
    book = BOOK.read_bytes()
    (d / "amy_1_2.py").write_bytes(book)  # the honest classmate
    _zip(d / "zoe_1_2.zip", {"x": b"plain file", "x/attention.py": book})
    _zip(d / "yan_1_2.zip", {"a" * 300 + "/attention.py": book})
    (d / os.fsdecode(b"bob\xff\xfe_1_2.py")).write_bytes(book)  # Latin-1 bytes, as an old zip tool leaves them
    os.symlink("loop.py", d / "loop.py")
    (d / "ben_1_2.py").write_bytes(b"\xef\xbb\xbf" + book)  # Notepad's "UTF-8 with BOM"
    (d / "cara_1_2.ipynb").write_text(_many_cells(5000))
    runs = [_run(["batch", str(d), "--out", str(d), "--jobs", "1", *resume]) for resume in ([], ["--resume"])]
    for proc in runs:
        assert proc.returncode == 1, proc.stderr[-3000:]  # some could not be graded: listed, exit 1
        assert "Traceback" not in proc.stderr and "cannot write" not in proc.stderr, proc.stderr[-3000:]
        rows = _rows(d)
        assert {k: r["status"] for k, r in rows.items()} == {
            "amy": "graded", "bob\\xff\\xfe": "graded", "ben": "graded", "zoe": "rejected", "yan": "rejected",
            "loop": "rejected", "cara": "too_large"}
        for name in ("amy", "bob\\xff\\xfe", "ben"):
            assert rows[name]["total"] == rows[name]["max_score"], name
        assert rows["bob\\xff\\xfe"]["submission"] == "bob\\xff\\xfe_1_2.py"
        assert "could not be extracted (File exists)" in rows["zoe"]["reason"]
        assert "File name too long" in rows["yan"]["reason"] and str(d) not in rows["yan"]["reason"]
        assert rows["loop"]["reason"] == "is a symbolic link"
        assert rows["cara"]["reason"].endswith(" code cells; the limit is 4096")
    assert (d / "reports" / "bob_xff_xfe.json").is_file()


def test_a_name_that_is_not_utf8_is_shown_escaped_and_still_read(tmp_path: Path) -> None:
    from grader.grading import ingest

    path = tmp_path / os.fsdecode(b"sol\xff.py")
    path.write_bytes(BOOK.read_bytes())
    sub = ingest.read_submission(path)
    assert sub.name == sub.units[0].label == "sol\\xff.py"
    assert sub.units[0].source == BOOK.read_text(encoding="utf-8")
    (tmp_path / os.fsdecode(b"kim\xe9")).mkdir()
    (tmp_path / os.fsdecode(b"kim\xe9") / os.fsdecode(b"a\xe9.ipynb")).write_text(submissions.notebook_source())
    entry = {e.student: e for e in discovery.discover(tmp_path, tmp_path / "out" / ".staging")}["kim\\xe9"]
    assert entry.source == "kim\\xe9/a\\xe9.ipynb" and entry.path is not None and entry.path.is_file()
    entry.source.encode("utf-8")  # what every writer does with it


def test_python_source_is_decoded_as_python_decodes_it(tmp_path: Path) -> None:
    from grader.grading import ingest

    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbfx = 1\n")
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n")
    (tmp_path / "bad.py").write_bytes(b"x = '\xff'\n")  # no cookie, not UTF-8: replaced, left to the parser
    assert ingest.read_submission(tmp_path / "bom.py").units[0].source == "x = 1\n"
    assert "name = 'café'" in ingest.read_submission(tmp_path / "latin.py").units[0].source
    assert ingest.read_submission(tmp_path / "bad.py").units[0].source == "x = '\ufffd'\n"


def test_empty_cells_are_not_units_and_code_cells_are_capped(tmp_path: Path) -> None:
    from grader.grading import ingest

    few = json.loads(submissions.notebook_source())
    n = len(few["cells"])
    (tmp_path / "few.ipynb").write_text(_many_cells(3, " \n\t"))
    units = ingest.read_submission(tmp_path / "few.ipynb").units
    assert [u.label for u in units] == [f"cell {i}" for i in range(1, n + 1)]  # the blank cells n+1.. are not units
    (tmp_path / "cap.ipynb").write_text(_many_cells(ingest.MAX_CODE_CELLS - n))
    assert ingest.read_submission(tmp_path / "cap.ipynb").units == units  # at the cap: read
    (tmp_path / "many.ipynb").write_text(_many_cells(ingest.MAX_CODE_CELLS - n + 1))
    with pytest.raises(ingest.SubmissionError) as exc:
        ingest.read_submission(tmp_path / "many.ipynb")
    assert exc.value.kind == "too_large" and f"{ingest.MAX_CODE_CELLS + 1} code cells" in str(exc.value)


def test_hashes_read_no_further_than_ingest_does(tmp_path: Path) -> None:
    """A file past ingest's cap is hashed by its first bytes and its size: bytes beyond the cap (which nothing
    reads) do not change the hash, its size does, and so does any byte within the cap. Sparse: no disk used."""
    from grader.grading import ingest
    from grader.grading.cases_key import content_digest

    cap = ingest.MAX_NOTEBOOK_BYTES + 1  # ingest reads at most this much of a file (past it, it rejects)
    sizes = {"a": cap + (8 << 20), "b": cap + (8 << 20), "c": cap + (8 << 20) + 1, "d": cap + (8 << 20)}
    edits = {"b": cap + (4 << 20), "d": cap - 1}  # b: a byte past the cap; d: the last byte within it
    for name, size in sizes.items():
        (tmp_path / name).mkdir()
        with open(tmp_path / name / "t.ipynb", "wb") as f:
            f.truncate(size)
            if name in edits:
                f.seek(edits[name])
                f.write(b"x")
    for digest in (discovery.content_hash, content_digest):
        for upload in ("", "t.ipynb"):  # a folder, and the file itself
            h = {name: digest(tmp_path / name / upload) for name in sizes}
            assert h["a"] == h["b"] and len({h["a"], h["c"], h["d"]}) == 3, (digest, upload)


# ---------------------------------------------------------------- whose row is whose (red team 9: findings 4, 5)


def _batch_rows(d: Path, out: Path) -> dict[str, dict[str, str]]:
    proc = _run(["batch", str(d), "--out", str(out), "--jobs", "1", "--step", "all_tokens"])
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return _rows(out)


def test_a_students_zip_of_lms_named_files_is_her_one_upload_never_classmates_rows(tmp_path: Path) -> None:
    """mallory.zip holds files named as an LMS names its students' uploads: it once passed for a class export and
    gave rows to alice and bob (as `alice (2)`, `bob (2)`) and zoe (who sorts after her: the fake took `zoe`, the
    real one `zoe (2)`), and none to mallory. A zip is an export only when it is the class folder's one upload or
    its own name says so; hers is one student's upload, and ambiguous."""
    d = tmp_path / "class"
    d.mkdir()
    book = BOOK.read_bytes()
    (d / "alice.py").write_bytes(book)
    (d / "bob.py").write_bytes(b"x = 1\n")
    (d / "zoe.py").write_bytes(book)
    _zip(d / "mallory.zip", {"alice_1_2_x.py": b"x = 1\n", "bob_1_2_x.py": book, "zoe_1_2_x.py": b"x = 2\n"})
    rows = _batch_rows(d, tmp_path / "out")
    assert {k: (r["submission"], r["status"]) for k, r in rows.items()} == {
        "alice": ("alice.py", "graded"), "bob": ("bob.py", "graded"), "zoe": ("zoe.py", "graded"),
        "mallory": ("mallory.zip", "ambiguous")}
    assert rows["alice"]["total"] == rows["alice"]["max_score"] == rows["zoe"]["total"] == "5"
    assert rows["bob"]["total"] == rows["mallory"]["total"] == "0"
    assert rows["mallory"]["reason"] == "several .py files: alice_1_2_x.py, bob_1_2_x.py, zoe_1_2_x.py"


def test_what_makes_a_zip_a_class_export(tmp_path: Path) -> None:
    """The class folder's one upload, or a zip named as an export (Canvas's submissions.zip, Blackboard's
    gradebook_...): one entry per student inside. The same Moodle export beside a student's file is an upload."""
    members = {"Gina Lee_777_assignsubmission_file_/ch3.ipynb": b"{}",
               "Hal Kim_778_assignsubmission_file_/ch3.ipynb": b"{}"}
    for n, names in enumerate([["CS101-Attention-4242.zip"], ["submissions.zip", "amy.py"],
                               ["gradebook_CS101_Attention_2026-12-01-10-00-00.zip", "amy.py"]]):
        d = tmp_path / str(n)
        d.mkdir()
        _zip(d / names[0], members)
        for name in names[1:]:
            (d / name).write_text("x = 1\n")
        found = {e.student: e.source for e in discovery.discover(d, tmp_path / f"out{n}" / ".staging")}
        assert found == {"Gina Lee": f"{names[0]}/Gina Lee_777_assignsubmission_file_/ch3.ipynb",
                         "Hal Kim": f"{names[0]}/Hal Kim_778_assignsubmission_file_/ch3.ipynb",
                         **{name[:-3]: name for name in names[1:]}}, names
    d = tmp_path / "mixed"
    d.mkdir()
    _zip(d / "CS101-Attention-4242.zip", members)
    (d / "amy.py").write_text("x = 1\n")
    found = {e.student: e.status for e in discovery.discover(d, tmp_path / "out" / ".staging")}
    assert found == {"amy": "", "CS101-Attention-4242": "ambiguous"}


def test_every_row_has_its_own_student_name(tmp_path: Path) -> None:
    """`bob (2).py`, `bob.ipynb` and `bob.py` (and `Bob.py`): a second bob once became `bob (2)` too, two rows of
    one name. Each row's name is unique, case aside, and its feedback and report files carry the same suffix. A
    real `bob (2)` keeps the name even when it is found after the repeated bobs (inside an export)."""
    d = tmp_path / "class"
    d.mkdir()
    (d / "bob (2).py").write_bytes(BOOK.read_bytes())
    (d / "bob.ipynb").write_text(submissions.notebook_source())
    (d / "bob.py").write_bytes(b"x = 1\n")
    (d / "Bob.py").write_bytes(b"x = 2\n")  # case differs only: an LMS import may not tell them apart
    out = tmp_path / "out"
    rows = _batch_rows(d, out)
    assert {k: r["submission"] for k, r in rows.items()} == {
        "Bob": "Bob.py", "bob (2)": "bob (2).py", "bob (3)": "bob.ipynb", "bob (4)": "bob.py"}
    assert rows["bob (2)"]["total"] == rows["bob (3)"]["total"] == "5" and rows["bob (4)"]["total"] == "0"
    reports = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in (out / "reports").glob("*.json")}
    assert {name: (r["student"], r["submission"]) for name, r in reports.items()} == {
        "Bob.json": ("Bob", "Bob.py"), "bob _2_.json": ("bob (2)", "bob (2).py"),
        "bob (3).json": ("bob (3)", "bob.ipynb"), "bob (4).json": ("bob (4)", "bob.py")}
    assert sorted(p.name for p in (out / "feedback").iterdir()) == [
        "Bob.txt", "bob (3).txt", "bob (4).txt", "bob _2_.txt"]
    later = tmp_path / "later"
    later.mkdir()
    (later / "bob.ipynb").write_text("{}")
    (later / "bob.py").write_text("x = 1\n")
    _zip(later / "submissions.zip", {"bob (2)_1_2_x.py": b"x = 1\n", "amy_3_4_x.py": b"x = 1\n"})
    assert {e.student: e.source for e in discovery.discover(later, tmp_path / "out2" / ".staging")} == {
        "bob": "bob.ipynb", "bob (3)": "bob.py", "amy": "submissions.zip/amy_3_4_x.py",
        "bob (2)": "submissions.zip/bob (2)_1_2_x.py"}


def test_names_that_collide_only_after_normalisation_get_distinct_stable_names(tmp_path: Path) -> None:
    """Issue 35: `José.py` typed on Linux (NFC: é is U+00E9) and on a Mac (NFD: e + U+0301), and `JOSÉ.ipynb`, were
    three rows that print alike: an LMS import that normalises names keeps one of the three scores. A student's
    identity is the NFC-normalised, case-folded name: each row gets its own visible name (a suffix), the same on every
    run, with its own report and feedback, and the run's output (the terminal and summary.json) names every upload
    of the name. The honest twin: a lone NFD `Zoë` is plain `Zoë`, listed nowhere."""
    d = tmp_path / "class"
    d.mkdir()
    nfc, nfd = "Jos\u00e9", "Jose\u0301"
    (d / f"{nfc}.py").write_bytes(BOOK.read_bytes())
    (d / f"{nfd}.py").write_bytes(b"x = 1\n")
    (d / "JOS\u00c9.ipynb").write_text(submissions.notebook_source())
    (d / "Zoe\u0308.py").write_bytes(BOOK.read_bytes())
    assert len({p.name for p in d.iterdir()}) == 4  # the file system keeps both spellings apart
    names = [(e.student, e.source) for e in discovery.discover(d, tmp_path / "x" / ".staging")]
    assert names == [("JOSÉ", "JOSÉ.ipynb"), ("José (2)", f"{nfd}.py"), ("José (3)", f"{nfc}.py"),
                     ("Zoë", "Zoe\u0308.py")]
    assert [(e.student, e.source) for e in discovery.discover(d, tmp_path / "y" / ".staging")] == names  # stable
    out = tmp_path / "out"
    proc = _run(["batch", str(d), "--out", str(out), "--jobs", "1", "--step", "all_tokens"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _rows(out)
    assert {k: (r["submission"], r["total"]) for k, r in rows.items()} == {
        "JOSÉ": ("JOSÉ.ipynb", "5"), "José (2)": (f"{nfd}.py", "0"), "José (3)": (f"{nfc}.py", "5"),
        "Zoë": ("Zoe\u0308.py", "5")}
    assert len({discovery.identity(k) for k in rows}) == 4
    assert sorted(p.name for p in (out / "feedback").iterdir()) == ["JOSÉ.txt", "José (2).txt", "José (3).txt",
                                                                    "Zoë.txt"]
    said = " ".join(proc.stdout.split())
    assert ("3 uploads give one name (case and Unicode spelling aside); each row has its own: JOSÉ (JOSÉ.ipynb), "
            "José (2) (Jose\\u0301.py), José (3) (José.py)") in said, said
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["name_collisions"] == [[
        {"student": "JOSÉ", "source": "JOSÉ.ipynb", "spelled": "JOSÉ.ipynb"},
        {"student": "José (2)", "source": f"{nfd}.py", "spelled": "Jose\\u0301.py"},
        {"student": "José (3)", "source": f"{nfc}.py", "spelled": f"{nfc}.py"}]]


def test_a_folders_code_is_capped_together(tmp_path: Path) -> None:
    """Each file was capped at 2 MiB, a folder's helper modules not at all: every trusted reading of the text grew
    with them (red team 12). The folder's code together is held to the cap, and so is the number of helpers."""
    from grader.grading import ingest

    ws = tmp_path / "ws"
    shutil.copytree(ROOT / "solutions", ws)
    assert len(ingest.read_submission(ws).units) == len(STEPS)
    for i in range(3):
        (ws / f"helper{i}.py").write_text("x = 1\n" * 150_000)  # 0.9 MB each: every file under the cap
    with pytest.raises(ingest.SubmissionError) as exc:
        ingest.read_submission(ws)
    assert exc.value.kind == "too_large" and "folder's code" in str(exc.value)
    for f in ws.glob("helper*.py"):
        f.unlink()
    for i in range(ingest.MAX_HELPER_FILES + 1):
        (ws / f"h{i}.py").write_text("")
    with pytest.raises(ingest.SubmissionError, match="helper modules"):
        ingest.read_submission(ws)
