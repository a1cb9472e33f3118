"""What a student controls reaches `check`'s output escaped (grader/render/terminal.py): an error message holding
escape sequences and rich markup is shown as text, never interpreted, never a MarkupError."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HOSTILE = '''
import torch

def attention_scores(inputs, query):
    # built at run time, so the quoted source line never holds the characters or their escapes
    esc, csi, rlm = chr(27), chr(0x9B), chr(0x200F)
    raise RuntimeError(esc + "[2J" + esc + "[H" + csi + "2J" + rlm + "all submissions graded[/b][/] [bold]x")
'''

IMPORT_ERROR = '''
raise ValueError("\\x1b]0;owned\\x07\\x1b[31m[/b]broken at import")
'''


def _check(ws: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", "check", "dot_scores", "--path", str(ws)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def _workspace(tmp_path: Path, source: str) -> Path:
    ws = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", ws)
    (ws / "dot_scores.py").write_text(source, encoding="utf-8")
    return ws


def test_an_error_message_with_escapes_and_markup_is_shown_as_text(tmp_path: Path) -> None:
    out = _check(_workspace(tmp_path, HOSTILE))
    assert out.returncode == 1, out.stdout + out.stderr
    shown = out.stdout + out.stderr
    for raw in ("\x1b", "\x9b", "\u200f"):  # nothing reaches the terminal raw
        assert raw not in shown, repr(raw)
    assert "Traceback" not in shown and "MarkupError" not in shown
    # the C1 CSI and the bidi mark are dropped where the message is made (report.clean, for files too); what is
    # left of the sequence is plain text
    assert "[2J[H2Jall submissions graded" in out.stdout.replace("\n", "")
    assert "graded[/b][/]" in out.stdout  # markup shown as typed, not parsed


def test_an_import_error_with_escapes_is_shown_as_text(tmp_path: Path) -> None:
    out = _check(_workspace(tmp_path, IMPORT_ERROR))
    assert out.returncode == 1, out.stdout + out.stderr
    shown = out.stdout + out.stderr
    assert "\x1b" not in shown and "\x07" not in shown
    assert "Traceback" not in shown
    assert "[/b]broken at import" in out.stdout
