"""What a student controls reaches `check`'s output escaped (grader/render/terminal.py): an error message holding
escape sequences and rich markup is shown as text, never interpreted, never a MarkupError."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from inproc import kata as run_in_process

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
    return run_in_process("check", "dot_scores", "--path", str(ws), cwd=ROOT)  # tests/inproc.py


def _workspace(tmp_path: Path, source: str) -> Path:
    ws = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", ws)
    (ws / "step01_dot_scores.py").write_text(source, encoding="utf-8")
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


# ------------------------------------------------------------------------------------ wrapping by display width

def _table_text(out: str, column: int = 2) -> str:
    """What the table's `column` holds, its lines joined and every space dropped (a wrap only adds those)."""
    cells = [line.split("│")[column] for line in out.splitlines() if line.startswith("│") and line.count("│") >= 5]
    return "".join("".join(cells).split())


def test_chinese_wraps_by_display_width_at_80_and_100_columns_never_cut() -> None:
    """Issue 25: rich cut unbroken Chinese with '…' (the 'what to do' half lost; at 80 columns a character
    dropped mid-sentence). Every line fits the terminal, no '…' is added, and every message, check name and
    diagnosis of the report reads whole in the table."""
    import json
    import os

    from rich.cells import cell_len

    submission = str(ROOT / "tests" / "fixtures" / "buggy" / "ca_mask_after_softmax.py")
    env = {**os.environ, "ATTN_KATA_NO_DAEMON": "1"}
    done = run_in_process("--lang", "zh", "grade", submission, "--format", "json", cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    wanted = []
    for step in report["steps"]:
        wanted.append(step["title"])
        for c in step["checks"]:
            if not c["passed"] and step["status"] in ("failed", "partial"):  # what the table lists
                wanted += [c["name"], c["message"]]
        wanted += [d["message"] for d in step["diagnoses"]]
    assert any(len(w) > 40 and " " not in w[:20] for w in wanted)  # long unbroken Chinese is among them
    for columns in (80, 100):
        out = run_in_process("--lang", "zh", "grade", submission, cwd=ROOT, env={**env, "COLUMNS": str(columns)}).stdout
        table = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
        assert table and all(cell_len(line) == cell_len(table[0]) <= columns for line in table), columns
        assert "…" not in out
        joined = _table_text(out)
        same = "（与上面的错误相同）"
        for text in wanted:
            assert "".join(text.split()) in joined or (same in joined and len(text) > 60), (columns, text)


def test_fit_keeps_every_character_within_the_width() -> None:
    import random

    from rich.cells import cell_len
    from rich.text import Text

    from grader.render.terminal import fit

    rng = random.Random(25)
    alphabet = "注意力权重上下文向量，。（）：abc xyz_(2, 6) "
    for _ in range(2000):
        source = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 90)))
        width = rng.randint(4, 50)
        lines = fit(Text(source), width).plain.split("\n")
        assert all(cell_len(line) <= width for line in lines), (source, width, lines)
        assert "".join(lines).replace(" ", "") == source.replace(" ", "")
    wrapped = fit(Text("  ✗ 掩码在 softmax 之后才应用：剩下的注意力权重之和不再为 1"), 20).plain.split("\n")
    assert wrapped[0].startswith("  ✗ ") and all(line.startswith("    ") for line in wrapped[1:])  # hanging
    assert not any(line.lstrip().startswith(("，", "：", "。")) for line in wrapped)  # no line starts with '：'


# ------------------------------------------------------------------------------------ messages that never mislead

def _rendered(report, width: int = 200) -> str:  # type: ignore[no-untyped-def]
    from rich.console import Console

    from grader.render import reporters

    console = Console(width=width, force_terminal=False, color_system=None)
    with console.capture() as captured:
        reporters.table(report, console, lang="en")
    return captured.get()


def test_the_same_error_as_above_stands_only_under_that_error() -> None:
    """Issue 25: "(the same error as above)" stood under a line that was no error (a wrong value between two
    reports of the same exception)."""
    from grader.report import CheckResult, Report, StepResult

    raised = "your code raised RuntimeError in dot_scores.py, line 3: `return inputs.T @ query`: size mismatch, m1: " \
             "[3 x 6], m2: [6 x {n}]"
    wrong = "attention scores: values differ at index [0]: got 0.1, expected 0.9 (6 of 6 entries differ, max abs " \
            "diff 0.8)"
    checks = [CheckResult("a", 0, 1, False, raised.format(n=1)), CheckResult("b", 0, 1, False, wrong),
              CheckResult("c", 0, 1, False, raised.format(n=2)), CheckResult("d", 0, 1, False, raised.format(n=3)),
              CheckResult("e", 0, 1, False, wrong), CheckResult("f", 0, 1, False, wrong)]
    out = _rendered(Report("x.py", [StepResult("dot_scores", "Step 1", 0, 6, "failed", checks)]))
    lines = [line.strip(" │") for line in out.splitlines()]
    same = [i for i, line in enumerate(lines) if "(the same error as above)" in line]
    assert len(same) == 1, out  # d, right under c (the same exception); never c (under b) nor f (no exception)
    assert "✗ d" in lines[same[0] - 1] and "RuntimeError" in lines[same[0] - 2]
    assert out.count("RuntimeError") == 2 and out.count("values differ") == 3


def test_heatmaps_show_no_internal_case_tag() -> None:
    """Issue 25: `[w2d]`, `[eval]` (the grader's case ids) stood beside each heatmap's title."""
    import torch
    from rich.console import Console

    from grader import checks
    from grader.render import heatmap, html_report
    from grader.report import Report, StepResult

    checks.load_all()
    assert checks.PICTURES, "no step declares a picture"
    for step, pairs in checks.PICTURES.items():
        for case, label in pairs.items():
            mat = heatmap.Matrix(step, case, label, torch.eye(3), torch.ones(3, 3) / 3)
            console = Console(width=120, force_terminal=False, color_system=None)
            with console.capture() as captured:
                console.print(heatmap.terminal(mat, "en"))
            shown = captured.get()
            assert label in shown and f"[{case}]" not in shown, shown
            page = html_report.render(Report("x.py", [StepResult(step, "t", 0, 1, "failed")]), {step: [mat]})
            assert label in page and f"[{case}]" not in page


def test_list_breaks_no_name_mid_word_at_80_and_60_columns(tmp_path: Path) -> None:
    """Issue 38: at 80 columns `attn-kata list` showed `MultiHeadAttentionWrappe` / `r`. Every step id and public
    name reads whole, at 80 and 60 columns, in both languages, with and without progress; every line fits."""
    import itertools
    import json
    import os

    from rich.cells import cell_len

    from grader.registry import STEPS

    names = {n for s in STEPS for n in (s.id, *s.names)}
    ws = tmp_path / "ws"
    shutil.copytree(ROOT / "exercises", ws)
    progress = {s.id: {"status": ("not_started", "partial", "passed")[s.number % 3], "score": 2.5, "max_score": 10}
                for s in STEPS}
    env = {**os.environ, "ATTN_KATA_NO_DAEMON": "1"}
    for with_progress in (False, True):
        if with_progress:
            (ws / ".attn-kata").mkdir(exist_ok=True)
            (ws / ".attn-kata" / "state.json").write_text(json.dumps({"progress": progress}))
        for lang in ("en", "zh"):
            for columns in (80, 60):
                out = run_in_process("--lang", lang, "list", "--path", str(ws), cwd=ROOT,
                                     env={**env, "COLUMNS": str(columns)}).stdout
                lines = [line for line in out.splitlines() if line.startswith("│")]
                assert lines and all(cell_len(line) <= columns for line in out.splitlines()), (lang, columns, out)
                cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines]
                for above, below in itertools.pairwise(cells):  # a name cut at a line's end goes on below
                    for a, b in zip(above, below, strict=True):
                        if a and b:
                            assert (a.split()[-1].strip(",") + b.split()[0].strip(",")) not in names, (columns, a, b)
                shown = {w.strip(",:()（）") for row in cells for c in row for w in c.split()}
                assert names <= shown, (lang, columns, names - shown)
