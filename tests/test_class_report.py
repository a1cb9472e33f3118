"""The class report (grader/instructor/classreport): class.json and class.html beside the gradebook, the similarity
leads, `attn-kata report`, and the page in a real browser (Debian's chromium, headless)."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from inproc import kata as run_in_process

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import submissions  # noqa: E402

from grader.instructor import classreport  # noqa: E402
from grader.instructor.classreport import similarity  # noqa: E402

GOLDEN = ROOT / "tests" / "golden_class_report"  # apart from tests/golden, which test_golden rewrites whole
REGOLDEN = os.environ.get("ATTN_KATA_REGOLDEN") == "1"
CORRECT = ROOT / "tests" / "fixtures" / "correct"


def _rename(src: str, names: dict[str, str]) -> str:
    for old, new in names.items():
        src = re.sub(rf"\b{old}\b", new, src)
    return src


def _reorder(src: str) -> str:
    """The top-level definitions in reverse order (the imports stay first)."""
    head, *defs = re.split(r"\n(?=def |class )", src)
    return head + "\n" + "\n".join(reversed(defs))


def planted_class(d: Path) -> dict[str, str]:
    """Honest students who typed the book (the reference verbatim, with other comments, with a bug of their own,
    the book's listing), students with their own code, two planted copies (renamed variables, reordered
    functions), an empty upload. The expected pairs, copy -> original."""
    d.mkdir(parents=True)
    book = submissions.module_source()
    (d / "hana.py").write_text(book)
    (d / "ivan.py").write_text(re.sub(r"#.*", "# my notes", book))
    (d / "jun.py").write_text(submissions.module_source("wrong_mask"))
    (d / "kofi.py").write_text((CORRECT / "book_verbatim.py").read_text())
    (d / "lena.py").write_text(_rename(book, {"attn_scores": "scores", "context_vec": "ctx"}))
    for name, fixture in (("mia", "loops"), ("noor", "mha_sdpa"), ("omar", "einsum_own_init"),
                          ("pia", "p_qkv_param")):
        (d / f"{name}.py").write_text((CORRECT / f"{fixture}.py").read_text())
    (d / "quinn.py").write_text(_reorder(_rename((CORRECT / "einsum_own_init.py").read_text(),
                                                 {"keys": "k_mat", "queries": "q_mat", "values": "v_mat",
                                                  "attn_scores": "sc", "attn_weights": "wts"})))
    (d / "rosa.py").write_text(_reorder(_rename((CORRECT / "p_qkv_param.py").read_text(),
                                                {"keys": "kk", "queries": "qq", "context_vec": "out"})))
    buggy = (ROOT / "tests" / "fixtures" / "buggy" / "ca_einsum_scores_transposed.py").read_text()
    (d / "tara.py").write_text(buggy)  # a mistake of her own, and a copy of it: the behaviour is evidence too
    (d / "uma.py").write_text(_reorder(_rename(buggy, {"keys": "K", "queries": "Q", "values": "V_"})))
    (d / "sam.py").write_text("\n")
    return {"quinn": "omar", "rosa": "pia", "uma": "tara"}


def _batch(klass: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ATTN_KATA_NO_DAEMON": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    return run_in_process("batch", str(klass), "--out", str(out), "--jobs", "2", *extra, cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("classreport")
    expected = planted_class(base / "class")
    proc = _batch(base / "class", base / "out", "--lang", "en")
    assert proc.returncode == 1, proc.stderr  # sam.py is empty
    return base / "out", expected


def test_every_planted_copy_is_found_and_no_book_pair_is(graded: tuple[Path, dict[str, str]]) -> None:
    out, expected = graded
    data = json.loads((out / "class.json").read_text(encoding="utf-8"))
    assert data["schema"] == classreport.SCHEMA and data["schema_version"] == 1
    found = {frozenset((p["a"], p["b"])) for p in data["similarity"]["pairs"]}
    for copy, original in expected.items():
        assert frozenset((copy, original)) in found, data["similarity"]["pairs"]
    book = {"hana", "ivan", "jun", "kofi", "lena"}
    assert not [p for p in found if p & book], data["similarity"]["pairs"]
    assert found == {frozenset(p) for p in expected.items()}, found
    for p in data["similarity"]["pairs"]:
        assert p["evidence"] and p["lines_a"] and p["lines_b"] and p["similarity"] >= similarity.THRESHOLD
    buggy = next(p for p in data["similarity"]["pairs"] if {p["a"], p["b"]} == {"tara", "uma"})
    assert any("failed checks" in e for e in buggy["evidence"]), buggy["evidence"]
    assert any("identical wrong outputs" in e for e in buggy["evidence"]), buggy["evidence"]
    assert data["similarity"]["pairs"][0] == buggy  # the behaviour's evidence ranks it first
    assert data["similarity"]["lead_only"] is True
    # never a score: the gradebook is the grading's, and the report says what its numbers count
    assert data["mean"]["says"].startswith(f"mean of the {data['graded']} graded")
    assert [r["student"] for r in data["needs_a_look"]["not_graded"]] == ["sam"]


def test_report_rebuilds_the_batchs_page_without_grading(graded: tuple[Path, dict[str, str]],
                                                          tmp_path: Path) -> None:
    out, _ = graded
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    (copy / "class.html").unlink()
    (copy / "class.json").unlink()
    (copy / "index.sqlite").unlink()  # nothing to grade from: the report reads what the batch wrote
    env = {**os.environ, "ATTN_KATA_NO_DAEMON": "1"}
    proc = run_in_process("--lang", "en", "report", str(copy), cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    assert (copy / "class.html").read_text(encoding="utf-8") == (out / "class.html").read_text(encoding="utf-8")
    assert (copy / "class.json").read_text(encoding="utf-8") == (out / "class.json").read_text(encoding="utf-8")
    zh = run_in_process("--lang", "zh", "report", str(copy), cwd=ROOT, env=env)
    assert zh.returncode == 0, zh.stderr
    page = (copy / "class.html").read_text(encoding="utf-8")
    assert "班级报告" in page and "异常相似" in page
    missing = run_in_process("--lang", "en", "report", str(tmp_path / "nothing"), cwd=ROOT, env=env)
    assert missing.returncode != 0 and "gradebook.csv" in missing.stderr


# ---------------------------------------------------------------- goldens: a tiny hand-made OUT, one step


def _tiny_out(out: Path) -> None:
    out.mkdir()
    (out / "reports").mkdir()
    rows = ["student,submission,dot_scores,total,max_score,status,reason",
            "ann,ann.py,5,5,5,graded,", "bob,bob.py,2,2,5,graded,", "cy,cy.py,2,2,5,over_budget,no answer within 1 s",
            "dee,dee.zip,,0,5,unreadable,not a zip file"]
    (out / "gradebook.csv").write_text("\r\n".join(rows) + "\r\n", encoding="utf-8")
    ids = ["book_example", "random_inputs", "single_token", "negative_and_larger_values", "inputs_unchanged"]

    def rep(student: str, score: float, failed: set[str], diag: bool, timeout: bool = False) -> dict[str, Any]:
        checks = [{"id": f"dot_scores.{i}", "name": i, "score": 0.0 if i in failed else 1.0, "max_score": 1.0,
                   "passed": i not in failed, "message": "got [1, 2]" if i in failed else ""} for i in ids]
        step = {"id": "dot_scores", "title": "Step 1", "score": score, "max_score": 5.0,
                "status": "passed" if not failed else "partial", "checks": checks,
                "diagnoses": [{"id": "sum_wrong_dim", "message": "sums over the wrong dimension"}] if diag else []}
        if timeout:
            step.update(detail="timeout")
        return {"student": student, "submission": f"{student}.py", "score": score, "max_score": 5.0,
                "steps": [step], "flags": ["reads the grader's files"] if student == "bob" else []}

    reports = [rep("ann", 5, set(), False), rep("bob", 2, set(ids[:3]), True), rep("cy", 2, set(ids[:3]), True, True)]
    for r in reports:
        (out / "reports" / f"{r['student']}.json").write_text(json.dumps(r), encoding="utf-8")
    classreport.save_sources(out, {"ann": "x = 1\n", "bob": "y = 2\n", "cy": "z = 3\n"})


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_class_json_golden(tmp_path: Path, lang: str) -> None:
    out = tmp_path / "out"
    _tiny_out(out)
    classreport.write(out, lang)
    text = (out / "class.json").read_text(encoding="utf-8")
    golden = GOLDEN / f"class.{lang}.json"
    if REGOLDEN:
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")
    again = tmp_path / "again"
    _tiny_out(again)
    classreport.write(again, lang)
    assert (again / "class.html").read_text(encoding="utf-8") == (out / "class.html").read_text(encoding="utf-8")


def test_the_page_is_offline_and_accessible(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _tiny_out(out)
    classreport.write(out, "en")
    page = (out / "class.html").read_text(encoding="utf-8")
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page and "<title>" in page and "<th" in page
    assert page.count("<svg") == page.count("<desc") == page.count("aria-labelledby") >= 1
    for name in ("dee", "not a zip file", "cy", "bob", "reads the grader&#39;s files", "dot_scores.book_example",
                 "sums over the wrong dimension", "mean of the 3 graded"):
        assert name in page, name


def test_similarity_survives_renaming_and_reordering_and_ignores_the_book() -> None:
    own = (CORRECT / "einsum_own_init.py").read_text()
    copy = _reorder(_rename(own, {"keys": "a", "queries": "b", "values": "c", "attn_scores": "d"}))
    book = submissions.module_source()
    from grader.instructor.classreport.build import default_boilerplate

    common = similarity.boilerplate(default_boilerplate())
    found = similarity.pairs({"own": own, "copy": copy, "book1": book, "book2": book + "\n# mine\n"}, common)
    assert [(p.a, p.b) for p in found] == [("copy", "own")], found
    assert found[0].similarity > 0.8


# ---------------------------------------------------------------- a real browser


def _png_colours(data: bytes) -> int:
    """How many distinct pixel values a (non-interlaced, 8-bit RGB/RGBA) PNG has, by stdlib zlib alone."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, kind = 8, b"", 0, 0, 0
    while pos < len(data):
        n, tag = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if tag == b"IHDR":
            width, height, _depth, kind = struct.unpack(">IIBB", body[:10])
        elif tag == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = {2: 3, 6: 4}[kind]
    raw = zlib.decompress(idat)
    stride = width * bpp
    seen: set[bytes] = set()
    prev = bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 8 == 0:
            seen.update(bytes(line[i:i + bpp]) for i in range(0, stride, bpp * 4))
        prev = line
    return len(seen)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (apt-get install chromium: .ci/run installs it)")
def test_the_page_in_a_real_browser(graded: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    out, expected = graded
    url = (out / "class.html").as_uri()
    flags = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}"]
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    data = json.loads((out / "class.json").read_text(encoding="utf-8"))
    for s in data["steps"]:
        assert f'id="dist-{s["id"]}"' in dom, s["id"]
    for c in data["checks"]:
        assert c["id"] in dom, c["id"]
    assert "sam" in dom and "no code in the submission" in dom
    for copy, original in expected.items():
        assert re.search(rf"({copy} ↔ {original}|{original} ↔ {copy})", dom), (copy, original)
    assert "<mark>" in dom
    shot = tmp_path / "page.png"
    subprocess.run([*flags, "--window-size=1200,1600", f"--screenshot={shot}", url], capture_output=True,
                   timeout=120, check=False)
    assert shot.exists() and shot.stat().st_size > 10_000
    assert _png_colours(shot.read_bytes()) > 8  # not a blank page: text, bars and the grid's colours
