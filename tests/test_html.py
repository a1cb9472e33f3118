"""`--html`: a self-contained report with heatmaps of the attention weights, leaked cells marked;
rendered by headless Chromium to check that it draws."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from inproc import kata as run_in_process

from grader.registry import BY_ID

ROOT = Path(__file__).resolve().parent.parent
BUGGY = ROOT / "tests" / "fixtures" / "buggy" / "mask_fill_zero.py"  # fills the future with 0, not -inf


def kata(*args: str) -> subprocess.CompletedProcess:
    """In this process (tests/inproc.py: output and exit code, real grading)."""
    return run_in_process(*args, cwd=ROOT)


class Cells(HTMLParser):
    """The heatmap cells of each table (learner / reference), with their classes."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, str, list[list[str]]]] = []  # (step, who, rows of cell classes)
        self.step = ""
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "div" and "matrix" in (a.get("class") or "").split():
            self.step = a.get("data-step") or ""
        if tag == "table" and a.get("class") == "hm":
            self.tables.append((self.step, a.get("data-who") or "", []))
        if tag == "tr" and self.tables:
            self.tables[-1][2].append([])
        if tag == "td" and self.tables and "cell" in (a.get("class") or "").split():
            self.tables[-1][2][-1].append(a.get("class") or "")


def parse(path: Path) -> Cells:
    p = Cells()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def grade_html(tmp_path: Path, submission: Path, *steps: str) -> tuple[dict, Path]:
    out = tmp_path / "report.html"
    args = ["grade", str(submission), "--format", "json", "--html", str(out)]
    for s in steps:
        args += ["--step", s]
    done = kata(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), out  # --html leaves stdout to the JSON document alone


def test_leaked_future_cells_are_marked(tmp_path: Path) -> None:
    doc, out = grade_html(tmp_path, BUGGY)
    assert {s["id"]: s["status"] for s in doc["steps"]}["causal_mask"] == "partial"
    text = out.read_text(encoding="utf-8")
    cells = parse(out)
    mine = [rows for step, who, rows in cells.tables if step == "causal_mask" and who == "learner"]
    ref = [rows for step, who, rows in cells.tables if step == "causal_mask" and who == "reference"]
    assert len(mine) == 1 and len(ref) == 1
    rows = [r for r in mine[0] if r]
    n = len(rows)
    assert n >= 5 and all(len(r) == n for r in rows)
    for i, row in enumerate(rows):  # exactly the cells above the diagonal leak, nothing else
        for j, cls in enumerate(row):
            assert ("leak" in cls.split()) == (j > i), (i, j, cls)
    assert not any("leak" in c for r in ref[0] for c in r)
    assert f'data-leaks="{n * (n - 1) // 2}"' in text
    assert f"{n * (n - 1) // 2} future position(s) leak attention" in text
    # the other weight-matrix steps are drawn too (expected side only: not started here)
    assert {step for step, _, _ in cells.tables} == {"softmax", "all_tokens", "causal_mask", "dropout"}
    # self-contained: no script, nothing fetched
    assert cells.scripts == 0
    for needle in ("http://", "https://", "<link", "@import", "url("):
        assert needle not in text


def test_correct_code_has_no_leaks_and_check_writes_chinese(tmp_path: Path) -> None:
    ws = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", ws)
    for step in ("softmax", "causal_mask", "all_tokens", "dropout"):
        shutil.copy(ROOT / "solutions" / BY_ID[step].file, ws / BY_ID[step].file)
    out = tmp_path / "zh.html"
    done = kata("--lang", "zh", "check", "softmax", "causal_mask", "all_tokens", "dropout", "--path", str(ws),
                "--html", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    text = out.read_text(encoding="utf-8")
    assert '<html lang="zh">' in text and "注意力权重" in text and "参考答案" in text
    cells = parse(out)
    assert len([t for t in cells.tables if t[1] == "learner"]) == 4
    assert not any("leak" in c or "diff" in c for _, _, rows in cells.tables for r in rows for c in r)


def _chromium() -> str | None:
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _png_pixels(data: bytes) -> tuple[int, int, list[bytearray]]:
    """Decode an 8-bit RGB(A), non-interlaced PNG (what Chromium writes) into rows of bytes."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
        elif f == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b, c = prev[i], prev[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, channels, rows


def test_chromium_draws_the_report(tmp_path: Path) -> None:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    _, out = grade_html(tmp_path, BUGGY, "causal_mask")
    png = tmp_path / "out.png"
    profile = tempfile.mkdtemp(prefix="attn-kata-chromium-")
    try:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1200,900",
                        out.resolve().as_uri()], capture_output=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "HOME": str(tmp_path)})
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert png.exists(), "chromium wrote no screenshot"
    data = png.read_bytes()
    assert len(data) > 20_000  # a blank 1200×900 page is a few kB
    width, channels, rows = _png_pixels(data)
    assert (width, len(rows)) == (1200, 900)
    colours: set[tuple[int, int, int]] = set()
    red = 0
    for line in rows[::3]:
        for x in range(0, width * channels, channels * 3):
            r, g, b = line[x], line[x + 1], line[x + 2]
            colours.add((r, g, b))
            red += r > 220 and g < 60 and b < 60  # the outlines of the leaked cells
    assert len(colours) > 50  # text, the heatmap's colour scale: not a blank or single-colour page
    assert red > 100
