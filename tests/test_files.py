"""grader.files: every report, gradebook, results.json and zip is written one way (red team 8: a device replaced
as root, a lone surrogate from a file name or learner text that made a report unwritable)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from grader.files import NotARegularFile, write_atomic, writing


def test_text_utf8_cannot_hold_is_escaped_and_json_reads_it_back(tmp_path: Path) -> None:
    doc = {"student": "bob\udcff", "message": "raised ValueError: \ud800"}
    out = tmp_path / "r.json"
    write_atomic(out, json.dumps(doc, ensure_ascii=False))
    assert json.loads(out.read_bytes().decode("utf-8")) == doc  # valid UTF-8, the same strings


def test_a_device_or_fifo_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFile):
        write_atomic(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(NotARegularFile):
        write_atomic(Path("/dev/full"), "x")
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)
    assert list(tmp_path.iterdir()) == [fifo]  # no temporary file left


def test_a_failure_keeps_the_old_file_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "gradebook.csv"
    out.write_text("old\n")

    def fails() -> None:
        with writing(out) as f:
            f.write("half")
            raise RuntimeError("disk trouble")

    with pytest.raises(RuntimeError):
        fails()
    assert out.read_text() == "old\n"
    assert list(tmp_path.iterdir()) == [out]


def test_a_link_is_replaced_not_followed_and_the_mode_follows_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    link = tmp_path / "report.json"
    link.symlink_to(target)
    write_atomic(link, "new")
    assert not link.is_symlink() and link.read_text() == "new" and target.read_text() == "keep"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(link.stat().st_mode) == 0o666 & ~mask
