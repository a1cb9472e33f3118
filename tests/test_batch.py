"""`attn-kata batch`: discovery, unsafe archives, outputs, and a batch killed half-way then resumed."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
from inproc import kata as run_in_process
from machine import scaled

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import submissions  # noqa: E402

from grader.instructor import batch, discovery, gradebook  # noqa: E402

BROKEN = {"broken.py": b"def f(:\n    pass\n", "empty.py": b"", "garbage.ipynb": bytes(range(256)) * 8,
          "notnb.ipynb": b'{"nbformat": 4, "this is": "not a notebook"}'}


def _run(args: list[str]) -> subprocess.CompletedProcess:
    """In this process (tests/inproc.py: output and exit code, real grading); a batch killed half-way and the
    languages' runs below are processes."""
    env = {**os.environ, "ATTN_KATA_SECRET": "s3cret", "OMP_NUM_THREADS": "1"}
    return run_in_process("--lang", "en", *args, cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def klass(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("class") / "in"
    submissions.make_class(d, 6, "ipynb")
    submissions.make_class(d / "py", 2, "py")
    for name in ("student000.py", "student001.py"):  # loose modules, named apart from the notebooks
        (d / "py" / name).rename(d / f"mod_{name}")
    (d / "py").rmdir()
    return d  # 8 submissions (what cannot be graded: test_a_messy_class_folder)


def _reports(out: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "reports").glob("*.json"))}


@pytest.fixture(scope="module")
def uninterrupted(klass: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("out") / "full"
    proc = _run(["batch", str(klass), "--out", str(out), "--jobs", "2"])
    return out, proc


def test_batch_writes_one_record_per_submission(uninterrupted: tuple[Path, subprocess.CompletedProcess]) -> None:
    out, proc = uninterrupted
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "8 submissions, 8 records" in proc.stdout.replace("\n", " ")
    reports = _reports(out)
    assert len(reports) == 8
    assert reports["student000.json"]["score"] == reports["student000.json"]["max_score"]
    assert reports["student003.json"]["score"] < reports["student003.json"]["max_score"]  # a buggy variant
    rows = list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text(encoding="utf-8"))))
    assert len(rows) == 8
    assert rows[0]["total"] != ""
    assert {r["status"] for r in rows} == {"graded"}
    assert "dot_scores" in rows[0]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["records"] == 8
    assert summary["not_graded"] == []
    assert summary["statuses"] == {"graded": 8}
    assert {s["id"] for s in summary["steps"]} >= {"causal_attention", "dot_scores"}
    assert len(list((out / "feedback").glob("*.txt"))) == 8
    assert sorted(p.name for p in out.iterdir()) == ["class.html", "class.json", "feedback", "gradebook.csv",
                                                      "index.sqlite", "reports", "sources.json", "summary.json"]
    assert "Score:" in (out / "feedback" / "student003.txt").read_text(encoding="utf-8")
    db = sqlite3.connect(out / "index.sqlite")
    cols = [r[1] for r in db.execute("PRAGMA table_info(results)")]
    rows_db = db.execute("SELECT key_fingerprint, report FROM results").fetchall()
    assert "secret" not in cols
    assert len(rows_db) == 8
    # the key's fingerprint (an HMAC of it), recorded by the index, every report, the summary and the gradebook
    fp = gradebook.key_fingerprint("s3cret")
    assert len(fp) == 16 and fp != gradebook.key_fingerprint("s3cret2") != gradebook.NO_KEY
    settings = {"key_fingerprint": fp, "timeout": 10.0, "steps": "all", "grader_version": reports[
        "student000.json"]["grader_version"]}
    assert all(sh == fp and "s3cret" not in rep for sh, rep in rows_db)
    assert json.loads(db.execute("SELECT value FROM meta WHERE name = 'settings'").fetchone()[0]) == settings
    assert summary["settings"] == settings
    assert all(r["settings"] == settings for r in reports.values())
    assert {(r["key_fingerprint"], r["timeout"], r["grader_version"]) for r in rows} == {
        (fp, "10", settings["grader_version"])}
    for f in out.rglob("*"):  # the key itself is nowhere in OUT
        assert not f.is_file() or b"s3cret" not in f.read_bytes(), f


def test_sigkill_then_resume_gives_identical_reports(klass: Path, tmp_path: Path,
                                                     uninterrupted: tuple[Path, subprocess.CompletedProcess]) -> None:
    out = tmp_path / "killed"
    env = {**os.environ, "ATTN_KATA_SECRET": "s3cret", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "grader", "batch", str(klass), "--out", str(out), "--jobs", "1",
                             "-q"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    done = 0
    deadline = time.monotonic() + scaled(120)
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with sqlite3.connect(f"file:{out / 'index.sqlite'}?mode=ro", uri=True) as db:
                    done = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
            except sqlite3.Error:
                done = 0
            if done >= 3:
                break
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert 3 <= done < 8, "the batch was not stopped half-way"
    resumed = _run(["batch", str(klass), "--out", str(out), "--jobs", "2", "--resume"])
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    text = (resumed.stdout + resumed.stderr).replace("\n", " ")
    assert "8 submissions, 8 records" in text
    assert "from the index" in text
    full_out, _ = uninterrupted
    assert _reports(out) == _reports(full_out)
    assert (out / "gradebook.csv").read_text(encoding="utf-8") == (full_out / "gradebook.csv").read_text(
        encoding="utf-8")


def _snapshot(out: Path) -> dict[str, object]:
    """What OUT holds as its readers see it: every file's bytes, the index by its rows (SQLite folds a write-ahead
    log left by a killed run into the file when it is opened: the same rows)."""
    files: dict[str, object] = {str(f.relative_to(out)): f.read_bytes() for f in sorted(out.rglob("*"))
                                if f.is_file() and not f.name.startswith("index.sqlite")}
    with contextlib.closing(sqlite3.connect(out / "index.sqlite")) as db:
        files["index.sqlite"] = (sorted(db.execute("SELECT key, key_fingerprint, report FROM results")),
                                 sorted(db.execute("SELECT name, value FROM meta")))
    return files


def _key_file(tmp_path: Path, key: str = "s3cret") -> str:
    f = tmp_path / f"{key}.key"
    f.write_text(key + "\n")
    return f"@{f}"


def _without_key(*args: str) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k != "ATTN_KATA_SECRET"}, "OMP_NUM_THREADS": "1",
           "COLUMNS": "200"}
    return run_in_process("--lang", "en", *args, cwd=ROOT, env=env)


@pytest.mark.parametrize("attack", ["no key", "another key", "another time-out", "other steps",
                                    "a fresh run with no key"])
def test_a_resume_under_other_settings_is_refused_before_grading(attack: str, klass: Path, tmp_path: Path,
                                                                 uninterrupted: tuple[Path, subprocess.CompletedProcess]
                                                                 ) -> None:
    """Issue 35: after `batch --secret @course.key` and a Ctrl-C, the README's own `--resume` line (no --secret)
    graded every submission again without the key and replaced the gradebook, the reports and the feedback, saying
    nothing. Now a resume, or a fresh run into the same OUT, under no key, another key, another time-out or other
    steps is refused before anything is graded: it names both fingerprints (or both settings) and the fix, exits 2,
    and OUT is exactly as it was. (The honest twin: the next test, and test_sigkill_then_resume_gives_identical_*.)"""
    full_out, _ = uninterrupted
    out = tmp_path / "out"
    shutil.copytree(full_out, out)
    before = _snapshot(out)
    fp = gradebook.key_fingerprint("s3cret")
    args = {"no key": ["--resume"], "another key": ["--resume", "--secret", _key_file(tmp_path, "0ther-k3y")],
            "another time-out": ["--resume", "--secret", _key_file(tmp_path), "--timeout", "5"],
            "other steps": ["--resume", "--secret", _key_file(tmp_path), "--step", "softmax", "--step", "dot_scores"],
            "a fresh run with no key": []}[attack]
    proc = _without_key("batch", str(klass), "--out", str(out), *args)
    said = proc.stderr.replace("\n", " ")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nothing was graded or written" in said and "--regrade" in said and "a new --out" in said, said
    assert "Traceback" not in said and "grading" not in proc.stdout + said.replace("graded", ""), said
    if attack in ("no key", "a fresh run with no key"):
        assert f"key fingerprint: {fp} in {out}, none (no key) in this run" in said, said
        assert "--resume --secret @course.key" in said, said
    elif attack == "another key":
        assert f"key fingerprint: {fp} in {out}, {gradebook.key_fingerprint('0ther-k3y')} in this run" in said, said
        assert "--resume --secret @course.key" in said, said
    elif attack == "another time-out":
        assert f"time-out per step (s): 10 in {out}, 5 in this run" in said and "--resume --timeout 10" in said, said
        assert "key fingerprint" not in said, said  # the key matches: only what differs is named
    else:
        assert f"steps: all in {out}, dot_scores,softmax in this run" in said, said
    assert "s3cret" not in proc.stdout + proc.stderr and "0ther-k3y" not in proc.stdout + proc.stderr  # never a key
    assert _snapshot(out) == before


def test_a_resume_with_the_course_key_resumes(klass: Path, tmp_path: Path,
                                              uninterrupted: tuple[Path, subprocess.CompletedProcess]) -> None:
    """The honest twin: the same key (from its file this time, no ATTN_KATA_SECRET) and the same settings resume
    the run: the one result missing from the index is graded, the rest come from it, and every report is the
    uninterrupted run's."""
    full_out, _ = uninterrupted
    out = tmp_path / "out"
    shutil.copytree(full_out, out)
    with contextlib.closing(sqlite3.connect(out / "index.sqlite", isolation_level=None)) as db:
        db.execute("DELETE FROM results WHERE rowid = (SELECT MIN(rowid) FROM results)")
    proc = _without_key("batch", str(klass), "--out", str(out), "--resume", "--secret", _key_file(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = (proc.stdout + proc.stderr).replace("\n", " ")
    assert "resuming: 7 of 8 already graded" in said and "1 graded now, 7 from the index" in said, said
    assert _reports(out) == _reports(full_out)
    assert (out / "gradebook.csv").read_bytes() == (full_out / "gradebook.csv").read_bytes()


def test_regrade_is_the_one_way_to_grade_again_under_other_settings(tmp_path: Path) -> None:
    """--regrade grades everything again into OUT, whatever key graded it, and records the new settings; a resume
    after it resumes that run; --resume with --regrade is refused (one keeps, the other replaces)."""
    d, out = tmp_path / "class", tmp_path / "out"
    d.mkdir()
    (d / "alice.py").write_bytes((ROOT / "tests" / "fixtures" / "correct" / "book_verbatim.py").read_bytes())
    (d / "bob.py").write_text("x = 1\n")
    steps = ("--step", "dot_scores", "--jobs", "1")
    first = _run(["batch", str(d), "--out", str(out), *steps])  # with the key (ATTN_KATA_SECRET)
    assert first.returncode == 0, first.stdout + first.stderr
    keyed = _snapshot(out)
    refused = _without_key("batch", str(d), "--out", str(out), "--resume", *steps)
    assert refused.returncode == 2 and _snapshot(out) == keyed, refused.stderr
    both = _without_key("batch", str(d), "--out", str(out), "--resume", "--regrade", *steps)
    assert both.returncode == 2 and "choose one" in both.stderr and _snapshot(out) == keyed, both.stderr
    again = _without_key("batch", str(d), "--out", str(out), "--regrade", *steps)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 graded now, 0 from the index" in again.stdout.replace("\n", " "), again.stdout
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text(encoding="utf-8")))}
    assert {s: (r["total"], r["key_fingerprint"]) for s, r in rows.items()} == {"alice": ("5", "none"),
                                                                               "bob": ("0", "none")}
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["settings"]["key_fingerprint"] == "none"
    assert {r["settings"]["key_fingerprint"] for r in _reports(out).values()} == {"none"}
    resumed = _without_key("batch", str(d), "--out", str(out), "--resume", *steps)
    assert resumed.returncode == 0 and "0 graded now, 2 from the index" in resumed.stdout.replace("\n", " "), (
        resumed.stdout + resumed.stderr)


def test_an_index_that_cannot_say_its_settings_is_never_replaced(tmp_path: Path) -> None:
    """An index from an older grader (no recorded settings) is refused by --resume and by a fresh run (--regrade
    replaces it); a file at OUT/index.sqlite that is no index is refused even by --regrade, and left as it was."""
    d, out = tmp_path / "class", tmp_path / "out"
    d.mkdir()
    (d / "bob.py").write_text("x = 1\n")
    out.mkdir()
    with contextlib.closing(sqlite3.connect(out / "index.sqlite", isolation_level=None)) as db:
        db.execute("CREATE TABLE results (key TEXT PRIMARY KEY, content_hash TEXT NOT NULL, grader_version TEXT NOT "
                   "NULL, secret_hash TEXT NOT NULL, report TEXT NOT NULL, seconds REAL, graded_at REAL)")
        db.execute("INSERT INTO results VALUES ('k', 'c', '0.1', 'h', '{}', 1.0, 0.0)")
    for args in (["--resume"], []):
        proc = _run(["batch", str(d), "--out", str(out), "--step", "dot_scores", *args])
        assert proc.returncode == 2 and "older grader" in proc.stderr and "--regrade" in proc.stderr, proc.stderr
        assert sorted(p.name for p in out.iterdir()) == ["index.sqlite"]
    (out / "index.sqlite").write_bytes(b"my notes, not an index\n" * 100)
    proc = _run(["batch", str(d), "--out", str(out), "--step", "dot_scores", "--regrade"])
    assert proc.returncode == 2 and "is not a batch index" in proc.stderr, proc.stderr
    assert (out / "index.sqlite").read_bytes() == b"my notes, not an index\n" * 100
    assert sorted(p.name for p in out.iterdir()) == ["index.sqlite"]


def test_resume_writes_the_report_of_a_late_copy(klass: Path, tmp_path: Path,
                                                 uninterrupted: tuple[Path, subprocess.CompletedProcess]) -> None:
    """A late upload identical to a graded one is not graded again (its result is in the index), yet it gets its own
    report: final_records writes every report that grading did not write in this run."""
    full_out, _ = uninterrupted
    late, out = tmp_path / "in", tmp_path / "out"
    shutil.copytree(klass, late)
    shutil.copy(klass / "student000.ipynb", late / "late.ipynb")
    shutil.copytree(full_out, out)
    proc = _run(["batch", str(late), "--out", str(out), "--resume"])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    reports = _reports(out)
    assert reports["late.json"]["student"] == "late"
    assert reports["late.json"]["steps"] == reports["student000.json"]["steps"]


def test_resume_in_another_language_words_the_same_results(klass: Path, tmp_path: Path,
                                                           uninterrupted: tuple[Path, subprocess.CompletedProcess]
                                                           ) -> None:
    """The index keeps results unworded: `--lang zh --resume` over an English run grades nothing again (every
    submission comes from the index) and writes every report, feedback and reason in Chinese, with the same
    scores."""
    full_out, _ = uninterrupted
    out = tmp_path / "out"
    shutil.copytree(full_out, out)
    env = {**os.environ, "ATTN_KATA_SECRET": "s3cret", "OMP_NUM_THREADS": "1"}
    proc = run_in_process("--lang", "zh", "batch", str(klass), "--out", str(out), "--resume", cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "8 份中已有 8 份评完" in proc.stderr, proc.stderr  # "resuming: 8 of 8 already graded": all indexed
    before, after = _reports(full_out), _reports(out)
    assert before.keys() == after.keys()
    for name, rep in after.items():
        assert [s["score"] for s in rep["steps"]] == [s["score"] for s in before[name]["steps"]], name
        assert rep["steps"][0]["title"].startswith("第 1 步"), rep["steps"][0]["title"]
        assert before[name]["steps"][0]["title"].startswith("Step 1"), before[name]["steps"][0]["title"]
    feedback = (out / "feedback" / "student000.txt").read_text(encoding="utf-8")
    assert feedback != (full_out / "feedback" / "student000.txt").read_text(encoding="utf-8")


# the book's code, then a cell whose attention_scores raises a message holding a lone surrogate, a layer with a
# child so named, and a magic line holding one (quoted in a note): no UTF-8 writer can encode such text (red team 8,
# finding 1)
SURROGATE_CELLS = ['def attention_scores(inputs, query):\n    raise ValueError("\\udcff")\n',
                   "_v1_init = SelfAttention_v1.__init__\n\n\ndef _init(self, d_in, d_out):\n"
                   "    _v1_init(self, d_in, d_out)\n    setattr(self, '\\udcfe', torch.nn.Linear(2, 2))\n\n\n"
                   "SelfAttention_v1.__init__ = _init\n", "%time \udcfd\n"]


def _surrogate_notebook(path: Path) -> Path:
    cells = [(ROOT / "tests" / "fixtures" / "correct" / "book_verbatim.py").read_text(), *SURROGATE_CELLS]
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": c} for c in cells]}))
    return path


def _says_what_was_raised(report: dict) -> None:
    steps = {s["id"]: s for s in report["steps"]}
    assert steps["dot_scores"]["detail"] == "crashed", steps["dot_scores"]
    assert steps["dot_scores"]["message"] == "raised ValueError: \ufffd"
    assert all(s["status"] == "passed" for k, s in steps.items() if k != "dot_scores"), steps


def test_a_lone_surrogate_in_one_students_error_costs_no_classmate(klass: Path, tmp_path: Path, uninterrupted: tuple[
        Path, subprocess.CompletedProcess]) -> None:
    """His exception text once killed the grading process as it sent its chunk back, twice: the whole chunk (up to
    24 students) was written off. Now his step says what was raised, and the classmates graded in his chunk get
    exactly the reports of the batch without him."""
    full_out, _ = uninterrupted
    d, out = tmp_path / "in", tmp_path / "out"
    shutil.copytree(klass, d)
    _surrogate_notebook(d / "aaron.ipynb")
    entries = discovery.discover(d, out / ".staging")
    first = batch._chunks([(i, str(e.path)) for i, e in enumerate(entries)], 1)[0]
    assert entries[first[0][0]].student == "aaron" and len(first) >= 3  # with one job, he shares a chunk
    proc = _run(["batch", str(d), "--out", str(out), "--jobs", "1"])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    reports = _reports(out)
    aaron = reports.pop("aaron.json")
    _says_what_was_raised(aaron)
    assert aaron["notes"] == ["cell 4: `%time \ufffd` removed (magics and shell escapes do not run here)"]
    assert reports == _reports(full_out)
    rows = list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text(encoding="utf-8"))))
    assert {r["status"] for r in rows} == {"graded"} and len(rows) == 9


def test_a_report_that_cannot_be_encoded_is_that_submissions_error() -> None:
    """A grading process encodes its chunk's results before it sends them: a report json refuses (a NaN score would
    be a grader bug) is that submission's error, and the rest of the chunk still arrives, never a lost peer."""
    good = {"score": 1.0, "message": "fine \udcff"}
    sent = json.loads(batch._reply([(0, good, "", 1.0), (1, {"score": float("nan")}, "", 2.0)]))
    assert sent[0] == [0, {"score": 1.0, "message": "fine \ufffd"}, "", 1.0]
    assert sent[1][:2] == [1, None] and sent[1][2].startswith("the report could not be encoded: ValueError")


def test_grade_writes_a_lone_surrogate_as_valid_json(tmp_path: Path) -> None:
    """`grade --out` once died half-way and left an empty file; --html too."""
    nb = _surrogate_notebook(tmp_path / "aaron.ipynb")
    proc = _run(["grade", str(nb), "--format", "json", "--out", str(tmp_path / "r.json"), "--html",
                 str(tmp_path / "r.html")])
    assert proc.returncode == 0, proc.stderr
    _says_what_was_raised(json.loads((tmp_path / "r.json").read_text(encoding="utf-8")))
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "your code raised ValueError" in html and "\ufffd" in html


# ---------------------------------------------------------------- discovery and archives (no grading)


def _zip(path: Path, members: dict[str, bytes], symlink: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    return path


def test_discovery_of_folders_loose_files_and_lms_exports(tmp_path: Path) -> None:
    d = tmp_path / "in"
    (d / "carol").mkdir(parents=True)
    (d / "carol" / "attention.ipynb").write_text(submissions.notebook(["x = 1"]))
    (d / "dave").mkdir()
    (d / "dave" / "causal_mask.py").write_text("")
    (d / "erin.py").write_text("")
    (d / "notes.txt").write_text("ignored")
    _zip(d / "canvas_export.zip", {"smithalice_12345_67890_attention.ipynb": b"{}",
                                   "jonesbob_late_12346_67891_ch3.py": b"x = 1\n"})
    _zip(d / "frank.zip", {"attention.ipynb": b"{}"})
    _zip(d / "moodle.zip", {"Gina Lee_777_assignsubmission_file_/ch3.ipynb": b"{}",
                            "Hal Kim_778_assignsubmission_file_/ch3.ipynb": b"{}"})
    out = tmp_path / "out"
    entries = discovery.discover(d, out / ".staging")
    by = {e.student: e for e in entries}
    assert set(by) == {"carol", "dave", "erin", "smithalice", "jonesbob", "frank", "Gina Lee", "Hal Kim"}
    assert by["dave"].path == d / "dave"
    assert by["carol"].path == d / "carol" / "attention.ipynb"
    assert by["jonesbob"].path is not None
    assert by["jonesbob"].path.suffix == ".py"
    for e in entries:
        assert not e.rejected
        assert e.path is not None
        if "zip" in e.source:
            assert out.resolve() in e.path.resolve().parents


@pytest.mark.parametrize("kind", ["traversal", "absolute", "symlink", "bomb", "not_a_zip"])
def test_unsafe_archives_are_rejected_with_a_reason(tmp_path: Path, kind: str) -> None:
    d = tmp_path / "in"
    d.mkdir()
    archive = d / "export.zip"
    if kind == "traversal":
        _zip(archive, {"ok.py": b"", "../../evil.py": b"print('pwned')"})
    elif kind == "absolute":
        _zip(archive, {"/tmp/evil_attn_kata.py": b""})
    elif kind == "symlink":
        _zip(archive, {"ok.py": b""}, symlink="link.py")
    elif kind == "bomb":
        _zip(archive, {"big.py": b"0" * (64 * 1024 * 1024)})
    else:
        archive.write_bytes(b"PK\x03\x04 definitely not a zip")
    out = tmp_path / "out"
    entries = discovery.discover(d, out / ".staging")
    assert len(entries) == 1
    reason = entries[0].rejected
    assert reason, kind
    expected = {"traversal": "traversal", "absolute": "traversal", "symlink": "symbolic link", "bomb": "expands",
                "not_a_zip": "not a readable zip"}[kind]
    assert expected in reason
    assert {p.name for p in tmp_path.iterdir()} <= {"in", "out"}  # nothing written outside OUT
    assert sorted(p.name for p in d.iterdir()) == ["export.zip"]
    assert not Path("/tmp/evil_attn_kata.py").exists()


def test_symlinked_submission_is_rejected(tmp_path: Path) -> None:
    d = tmp_path / "in"
    (d / "mallory").mkdir(parents=True)
    (d / "mallory" / "causal_mask.py").symlink_to("/etc/passwd")
    (d / "trent.py").symlink_to("/etc/passwd")
    entries = discovery.discover(d, tmp_path / "out" / ".staging")
    assert {e.student: bool(e.rejected) for e in entries} == {"mallory": True, "trent": True}


def test_rejected_submission_gets_a_record_and_the_batch_says_so(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    _zip(d / "zed.zip", {"../escape.py": b""})
    out = tmp_path / "out"
    result = batch.run_batch(directory=d, out=out, jobs=1)
    assert result.records == result.total == 1
    assert not result.ok
    assert "zed" in result.not_graded
    row = next(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text(encoding="utf-8"))))
    assert row["status"] == "rejected"
    assert "traversal" in row["reason"]
    assert "could not be graded" in (out / "feedback" / "zed.txt").read_text(encoding="utf-8")


def test_csv_cells_are_escaped_against_formula_injection() -> None:
    for bad in ("=HYPERLINK(1)", "+1", "-1+2", "@SUM(A1)"):
        assert gradebook.csv_cell(bad) == "'" + bad
    assert gradebook.csv_cell("\tx") == "\\x09x" and gradebook.csv_cell("\r=x") == "\\x0d=x"  # escaped: no formula
    assert gradebook.csv_cell("alice") == "alice"
    assert gradebook.csv_cell(3.5) == 3.5


def test_csv_cells_show_control_characters_as_escapes() -> None:
    """File names reach the student and submission columns: `cat gradebook.csv` must not set the window title (OSC),
    ring (BEL), colour (CSI, C1 CSI) or reorder (bidi) anything, and a name that is not UTF-8 (a lone surrogate)
    must not stop the gradebook being written (red team 8, finding 9)."""
    name = "\x1b]0;T\x07\x1b[31mred\x9b0m\u202etxt.py\udcff"
    cell = gradebook.csv_cell(name)
    assert cell == "\\x1b]0;T\\x07\\x1b[31mred\\x9b0m\\u202etxt.py\\udcff"
    assert cell.isprintable() and cell.encode()
    assert gradebook.csv_cell("\x1b=cmd") == "\\x1b=cmd" and gradebook.csv_cell("=A1\x07") == "'=A1\\x07"
    # tab, CR and LF too: a line-based importer splits rows on them (issue 35); text, and what csv quotes, as it is
    assert gradebook.csv_cell("Zoë 张伟\tx\r\n") == "Zoë 张伟\\x09x\\x0d\\x0a"
    assert gradebook.csv_cell('O\'Brien, "Al"') == 'O\'Brien, "Al"'


def test_student_names_from_lms_file_names() -> None:
    assert discovery.student_name("smithalice_12345_67890_attention.ipynb") == "smithalice"
    assert discovery.student_name("smithalice_late_12345_67890_attention.ipynb") == "smithalice"
    assert discovery.student_name("Alice Smith_123_assignsubmission_file_") == "Alice Smith"
    assert discovery.student_name("bob.ipynb") == "bob"
    assert discovery.slugify("../../etc/passwd") not in ("", ".", "..")
    assert "/" not in discovery.slugify("../../etc/passwd")


def _descends_from(pid: int, ancestor: int) -> bool:
    """Is `pid` a descendant of `ancestor`? (the ppid chain in /proc/<pid>/stat)"""
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        if pid == ancestor:
            return True
        seen.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # "pid (comm) state ppid ...": comm may hold spaces
    return False


def _grading_processes() -> list[int]:
    """The trusted grading processes (named by grader/pool/zygote.py) running now that this test process started,
    through its zygote: never another test run's, or anyone else's, on the same machine."""
    pids = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == "attn-grade" and _descends_from(int(entry), me):
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def _slow_class(tmp_path: Path) -> Path:
    """Four distinct submissions (identical files share a job) whose steps take a while: a grading process is
    seen busy with its chunk."""
    klass = tmp_path / "class"
    klass.mkdir()
    solution = "\n".join((ROOT / "solutions" / f).read_text() for f in ("step01_dot_scores.py", "step02_softmax.py"))
    slow = "import time\n" + solution.replace("    return attn_scores", "    time.sleep(0.2)\n    return attn_scores")
    assert slow != "import time\n" + solution
    for name in ("ann", "bob", "cat", "dan"):
        (klass / f"{name}.py").write_text(f"{slow}\n# {name}\n")
    return klass


def _killer(n: int, killed: list[int], seconds: float) -> threading.Thread:
    """A thread that SIGKILLs the first `n` grading processes it sees busy (as the OOM killer would), each once."""

    def run() -> None:
        deadline = time.monotonic() + seconds
        while len(killed) < n and time.monotonic() < deadline:
            pids = [p for p in _grading_processes() if p not in killed]
            if pids:
                time.sleep(0.3)  # it has its chunk (sent as it starts) and is busy with it
                if pids[0] in _grading_processes():  # still ours (not gone, its pid not reused meanwhile)
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
            time.sleep(0.02)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_grading_process_that_dies_is_retried(tmp_path: Path) -> None:
    """SIGKILL takes a trusted grading process mid-chunk (as the OOM killer would): the batch replaces it,
    retries its chunk and still ends with one record each."""
    klass = _slow_class(tmp_path)
    killed: list[int] = []
    killer = _killer(1, killed, 60)
    result = batch.run_batch(directory=klass, out=tmp_path / "out", jobs=2)
    killer.join()
    assert killed, "no grading process was seen"
    assert result.records == 4
    assert result.not_graded == {}
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "gradebook.csv").read_text())))
    assert len(rows) == 4
    assert {r["student"] for r in rows} == {"ann", "bob", "cat", "dan"}
    assert all(float(r["dot_scores"]) == 5 for r in rows)


def test_a_chunk_whose_grading_process_dies_twice_is_tried_one_by_one(tmp_path: Path) -> None:
    """A crash that one submission's data causes kills the retry of its chunk too (as a lone surrogate in an error
    message once did): the chunk's submissions are then tried one at a time, so that it costs that submission,
    not its classmates. Two SIGKILLs stand for it here: the first two grading processes die holding the first
    chunk (two submissions, with one job), and every submission still gets its report."""
    klass = _slow_class(tmp_path)
    assert len(batch._chunks([(i, "") for i in range(4)], 1)[0]) == 2
    killed: list[int] = []
    killer = _killer(2, killed, 120)
    result = batch.run_batch(directory=klass, out=tmp_path / "out", jobs=1)
    killer.join()
    assert len(killed) == 2, killed
    assert result.not_graded == {}
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "gradebook.csv").read_text())))
    assert {r["student"]: float(r["dot_scores"]) for r in rows} == {"ann": 5, "bob": 5, "cat": 5, "dan": 5}


def test_the_coordinating_process_never_imports_torch(tmp_path: Path) -> None:
    """torch is imported once per batch, by the zygote: the grading processes are forked from it."""
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "ann.py").write_text((ROOT / "solutions" / "step01_dot_scores.py").read_text())
    code = ("import sys; from grader.cli import main\n"
            "try:\n    main(['batch', sys.argv[1], '--out', sys.argv[2], '-q'])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    proc = subprocess.run([sys.executable, "-c", code, str(klass), str(tmp_path / "out")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["records"] == 1


def test_a_plain_fork_does_not_share_its_parents_zygote_connection() -> None:
    """The zygote's control connection belongs to the process that made it: a plain fork of that process
    (not a grading process the zygote forked itself) must not send requests on it, interleaved with ours."""
    from grader.pool import zygote

    parent = zygote.zygote()
    pid = os.fork()
    if pid == 0:
        os._exit(0 if not parent.alive() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert parent.alive()


HOSTILE = {
    "loops.py": "def attention_scores(inputs, query):\n    while True:\n        pass\n",
    "exits.py": "import os\nos._exit(3)\n",
    "forks.py": "import os\ndef attention_scores(inputs, query):\n    while True:\n        try:\n"
                "            os.fork()\n        except OSError:\n            pass\n",
    "floods.py": "print('{\"score\": 999}' * 1000)\ndef attention_scores(inputs, query):\n    return inputs @ query\n",
}


def test_a_batch_with_hostile_submissions_ends_with_one_record_each(tmp_path: Path) -> None:
    klass = tmp_path / "class"
    klass.mkdir()
    for name, src in HOSTILE.items():
        (klass / name).write_text(src)
    (klass / "honest.py").write_text((ROOT / "solutions" / "step01_dot_scores.py").read_text())
    # the time-out is a hang guard: long enough for the honest submission on a loaded machine
    result = batch.run_batch(directory=klass, out=tmp_path / "out", jobs=2, timeout=10.0)
    assert result.records == len(HOSTILE) + 1
    assert result.not_graded == {}
    reports = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "out" / "reports").glob("*.json")}
    assert len(reports) == len(HOSTILE) + 1
    dot = {name: {s["id"]: s for s in r["steps"]}["dot_scores"] for name, r in reports.items()}
    assert dot["honest"]["status"] == "passed"
    assert dot["loops"]["detail"] == "timeout"
    assert dot["forks"]["status"] != "passed"
    assert dot["exits"]["status"] == "error"
    assert dot["floods"]["status"] == "passed"  # what it prints goes nowhere near the reports


SECRET_HUNT = '''
import os

def _hunt(secret):
    """Look for the batch's secret in every grading process: environ, cmdline and memory."""
    try:
        pids = os.listdir("/proc")
    except OSError:  # hidden from a worker
        return False
    for pid in pids:
        try:
            if not pid.isdigit() or open(f"/proc/{pid}/comm").read().strip() != "attn-grade":
                continue
        except OSError:
            continue
        for name in ("environ", "cmdline"):
            try:
                if secret in open(f"/proc/{pid}/{name}", "rb").read():
                    return True
            except OSError:
                pass
        try:
            with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
                for line in maps:
                    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                    if "r" in line.split()[1] and hi - lo < 1 << 28:
                        try:
                            mem.seek(lo)
                            if secret in mem.read(hi - lo):
                                return True
                        except (OSError, ValueError, OverflowError):
                            pass
        except OSError:
            pass
    return False


def attention_scores(inputs, query):
    found = _hunt(b"the-term-key-" + b"4821")  # written in two halves: the source alone does not match
    return inputs @ query + (1.0 if found else 0.0)
'''


@pytest.mark.sandbox  # run in every set-up by .ci/setups.sh
@pytest.mark.skipif(__import__("grader.sandbox.landlock", fromlist=["abi"]).abi() < 1, reason="needs Landlock")
def test_a_worker_cannot_read_the_secret_from_a_grading_process(tmp_path: Path) -> None:
    """The grading processes hold the secret and are the zygote's children, like the workers: a worker that
    searches them (environ, cmdline, memory) finds nothing, so its answer stays right."""
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "hunter.py").write_text(SECRET_HUNT)
    slow = (ROOT / "solutions" / "step01_dot_scores.py").read_text().replace(
        "    return attn_scores", "    import time\n    time.sleep(0.8)\n    return attn_scores")
    # keeps the grading process alive while this test hunts too: a few seconds, long enough for a search of every
    # process's memory on a loaded machine (at 0.3 s a call it missed the process 2 times in 4 there)
    (klass / "slow.py").write_text(slow)
    hunt: dict = {}
    exec(compile(SECRET_HUNT, "hunt", "exec"), hunt)
    found_outside: list[bool] = []

    def hunt_unconfined() -> None:  # the same search from outside the sandbox does find it
        deadline = time.monotonic() + scaled(60)
        while not found_outside and time.monotonic() < deadline:
            if hunt["_hunt"](b"the-term-key-4821"):
                found_outside.append(True)
            time.sleep(0.05)

    hunter = threading.Thread(target=hunt_unconfined)
    hunter.start()
    # tests/conftest.py's waiver where a non-root set-up lacks a layer by design (batch reads only its argument)
    waived = os.environ.get("ATTN_KATA_ALLOW_WEAK_SANDBOX") == "1"
    result = batch.run_batch(directory=klass, out=tmp_path / "out", jobs=1, secret="the-term-key-4821",
                             allow_weak_sandbox=waived)
    found_outside.append(False)  # stops the thread if it found nothing
    hunter.join()
    assert found_outside[0] is True, "the search cannot find the secret even unconfined: it proves nothing"
    assert result.records == 2
    report = json.loads((tmp_path / "out" / "reports" / "hunter.json").read_text())
    assert {s["id"]: s for s in report["steps"]}["dot_scores"]["status"] == "passed", report


def test_no_grading_process_is_an_infrastructure_error_not_a_score(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """If the zygote cannot fork a grading process (twice, the second time a fresh zygote), the batch stops
    with GradingUnavailable: no submission is recorded with a score it never earned."""
    from grader.pool import zygote

    def refuse(self: zygote.Zygote, fd: int, entry: str) -> int:
        raise OSError("refused")

    monkeypatch.setattr(zygote.Zygote, "grader", refuse)
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "ann.py").write_text((ROOT / "solutions" / "step01_dot_scores.py").read_text())
    with pytest.raises(batch.GradingUnavailable, match="refused"):
        batch.run_batch(directory=klass, out=tmp_path / "out", jobs=1)
    assert not list((tmp_path / "out").glob("reports/*.json"))
    with sqlite3.connect(tmp_path / "out" / "index.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 0


def test_the_end_of_batch_summary_speaks_the_instructors_language(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "amy.py").write_bytes(b"")
    (d / "bo.py").write_bytes(b"def f(:\n    pass\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    runs = {lang: subprocess.run([sys.executable, "-m", "grader", "--lang", lang, "batch", str(d), "--out",
                                  str(tmp_path / f"out-{lang}")], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=300) for lang in ("zh", "en")}
    zh, en = runs["zh"], runs["en"]
    assert zh.returncode == en.returncode == 1, zh.stderr  # two that could not be graded
    assert "全班汇总" in zh.stdout and "2 份无法评分" in zh.stdout, zh.stdout
    assert "class summary" not in zh.stdout and "could not be graded" not in zh.stdout
    assert "提交中没有代码" in zh.stdout and "每个文件都有语法错误" in zh.stdout  # the reasons, too
    assert "no code in the submission" in en.stdout and "syntax error in every file" in en.stdout
    assert "class summary" in en.stdout and "2 could not be graded" in en.stdout, en.stdout


def test_the_next_submission_started_ahead_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A grading process starts the next submission's worker while the current one runs (batch._collect_all).
    Each worker is still its submission's alone: the results equal one-at-a-time collection, a next
    submission busy at import and hanging in its step neither delays nor touches the current one (it gets its
    own time-out), and no worker outlives the chunk, a started one never asked included."""
    import procs

    from grader.grading import engine

    honest = (ROOT / "solutions" / "step01_dot_scores.py").read_text()
    # busy for a second at import (while ann's steps run), then every call hangs
    hang = ("import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1:\n    pass\n"
            "def attention_scores(inputs, query):\n    while True:\n        pass\n")
    wrong = honest.replace("    return attn_scores", "    return attn_scores * 2")
    files = {"ann.py": honest, "hang.py": hang, "bob.py": wrong}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    chunk = [(i, str(tmp_path / name)) for i, name in enumerate(files)]
    # the hang's time-out: waiting for it would take the honest one past it (a margin a loaded machine keeps)
    batch._GRADE_ARGS.update({"secret": None, "timeout": 5.0, "lang": "en", "steps": ["dot_scores"]})
    events: list[tuple[str, int]] = []
    real_start, real_collect = batch._start, batch._collect_one
    monkeypatch.setattr(batch, "_start", lambda job: events.append(("start", job[0])) or real_start(job))
    monkeypatch.setattr(batch, "_collect_one", lambda job, started=None: (
        real_collect(job, started), events.append(("done", job[0])))[0])
    try:
        ahead = batch._collect_all(chunk)
        # the look-ahead happens: each next worker starts before the current submission is done
        assert events == [("start", 0), ("start", 1), ("done", 0), ("start", 2), ("done", 1), ("done", 2)]
        alone = [batch._collect_one(job) for job in chunk]
        started = batch._start(chunk[0])  # started, never asked: closing it leaves nothing
        started.close()
    finally:
        batch._GRADE_ARGS.clear()
    scores = [[r.score for r in engine.judge([col])[0].steps] for _i, col, _err, _s in ahead]
    assert scores == [[r.score for r in engine.judge([col])[0].steps] for _i, col, _err, _s in alone]
    assert scores[0] == [5.0] and scores[2][0] < 5.0, scores
    assert ahead[1][1].results["dot_scores"].detail == "timeout", ahead[1][1].results
    assert ahead[0][3] < 5.0, "the honest submission before the hang waited for it"
    deadline = time.monotonic() + scaled(5)
    while procs.leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert procs.leftovers() == {}


def test_a_copy_under_another_name_never_puts_its_name_in_the_originals_report(tmp_path: Path) -> None:
    """Identical content is graded once; a .py file's messages cite its own name (`zoe.py, line 3`), so a byte copy
    named to sort first (aaron.py) put its name in zoe's report and feedback (red team 11). Two .py uploads share a
    report only when their names match too."""
    d, out = tmp_path / "class", tmp_path / "out"
    d.mkdir()
    source = "def attention_scores(inputs, query):\n    x = 1\n    raise ValueError('not yet')\n"
    for name in ("zoe.py", "aaron.py"):
        (d / name).write_text(source)
    proc = _run(["batch", str(d), "--out", str(out), "--step", "dot_scores", "-q"])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    reports = _reports(out)
    for who, other in (("zoe", "aaron"), ("aaron", "zoe")):
        text = json.dumps(reports[f"{who}.json"]["steps"]) + (out / "feedback" / f"{who}.txt").read_text()
        assert f"{who}.py" in text and f"{other}.py" not in text, (who, text[:600])
