"""`attn-kata init`, the workspace found from any folder inside it, progress kept where the user can write, and
the notebook's check() replayed in a real kernel: the commands in this process (tests/inproc.py), real notebooks
(nbclient)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest
from inproc import kata as run_in_process

from grader.learner.init import split_stub
from grader.learner.workspace import NoWorkspace, find_workspace

ROOT = Path(__file__).resolve().parent.parent
BIN = str(Path(sys.executable).parent)
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "ATTN_KATA_NO_DAEMON": "1",
       "ATTN_KATA_LANG": "en"}
ENV.pop("ATTN_KATA_SECRET", None)
SOLUTION = (ROOT / "solutions" / "step01_dot_scores.py").read_text(encoding="utf-8")


def kata(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """In this process (tests/inproc.py); the read-only mount, the shell completion and the terminal below run
    `attn-kata` as a process, which they are about."""
    return run_in_process(*args, cwd=cwd, env=env or ENV)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr


def test_init_lays_out_a_marked_workspace_in_the_learners_language(tmp_path: Path) -> None:
    done = kata("--lang", "zh", "init", "ws", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ws = tmp_path / "ws"
    assert sorted(p.name for p in ws.glob("*.py")) == sorted(p.name for p in (ROOT / "exercises").glob("*.py"))
    assert (ws / "step01_dot_scores.py").read_text() == (ROOT / "exercises" / "step01_dot_scores.py").read_text()
    assert "attn-kata check" in (ws / "README.md").read_text() and "步" in (ws / "README.md").read_text()
    assert json.loads((ws / ".attn-kata" / "workspace.json").read_text())["lang"] == "zh"
    again = kata("init", "ws", cwd=tmp_path)
    assert "not empty" in one_line_error(again)
    assert (ws / "step01_dot_scores.py").read_text() == (ROOT / "exercises" / "step01_dot_scores.py").read_text()
    (tmp_path / "empty").mkdir()
    assert kata("init", "empty", cwd=tmp_path).returncode == 0  # an empty folder is fine


def _locale_env(locale: str) -> dict:
    """ENV with the language left to the locale: LANG=`locale`, no ATTN_KATA_LANG nor LC_* to beat it."""
    env = {k: v for k, v in ENV.items() if k not in ("ATTN_KATA_LANG", "LC_ALL", "LC_MESSAGES", "LANGUAGE")}
    return {**env, "LANG": locale}


def _answers_in(ws: Path, locale: str) -> str:
    """The language `attn-kata list` answers in, run inside `ws` under LANG=`locale`."""
    out = kata("list", cwd=ws, env=_locale_env(locale))
    assert out.returncode == 0, out.stderr
    return "zh" if "步骤" in out.stdout else "en"


def test_a_language_is_recorded_only_when_the_learner_chose_one(tmp_path: Path) -> None:
    """Issue 38: a plain init recorded "lang": "en", which then beat LANG=zh_CN.UTF-8. Only `--lang` at init records
    a language; otherwise the locale decides, each time. An older init's marker ("lang": "en" whatever was chosen, no
    "format") follows the locale; its "zh" still holds."""
    zh, en = "zh_CN.UTF-8", "en_US.UTF-8"
    assert kata("init", "plain", cwd=tmp_path, env=_locale_env(zh)).returncode == 0
    plain = tmp_path / "plain"
    assert "lang" not in json.loads((plain / ".attn-kata" / "workspace.json").read_text())
    assert "步" in (plain / "README.md").read_text()  # the README in the locale's language at init
    assert _answers_in(plain, zh) == "zh" and _answers_in(plain, en) == "en"
    for chosen, other in (("zh", en), ("en", zh)):
        assert kata("--lang", chosen, "init", chosen, cwd=tmp_path, env=_locale_env(other)).returncode == 0
        assert json.loads((tmp_path / chosen / ".attn-kata" / "workspace.json").read_text())["lang"] == chosen
        assert _answers_in(tmp_path / chosen, other) == chosen  # the choice beats the locale
    both = kata("list", cwd=tmp_path / "zh", env={**_locale_env(en), "ATTN_KATA_LANG": "en"})
    assert "步骤" not in both.stdout  # ATTN_KATA_LANG still beats the recorded choice
    for old, under, answer in (("en", zh, "zh"), ("en", en, "en"), ("zh", en, "zh")):
        marker = plain / ".attn-kata" / "workspace.json"
        marker.write_text(json.dumps({"kata": "attention-kata", "version": "0.1.0", "lang": old, "notebook": None}))
        assert _answers_in(plain, under) == answer, (old, under)


def test_commands_find_the_workspace_from_any_folder_inside_it(tmp_path: Path) -> None:
    assert kata("init", "ws", cwd=tmp_path).returncode == 0
    deep = tmp_path / "ws" / "notes" / "deeper"
    deep.mkdir(parents=True)
    stub = kata("check", "dot_scores", cwd=deep)
    assert stub.returncode == 1 and "not started" in stub.stdout, stub.stdout + stub.stderr
    shutil.copy(ROOT / "solutions" / "step01_dot_scores.py", tmp_path / "ws" / "step01_dot_scores.py")
    solved = kata("check", "1", cwd=deep)
    assert solved.returncode == 0, solved.stdout + solved.stderr
    assert "passed" in kata("list", cwd=deep).stdout
    assert "hint 1/" in kata("hint", "dot_scores", cwd=deep).stdout
    outside = kata("check", cwd=tmp_path)
    assert "no workspace" in one_line_error(outside)
    assert kata("list", cwd=tmp_path).returncode == 0  # the steps, without progress


def test_find_workspace_in_a_checkout_from_its_root_and_from_inside_exercises() -> None:
    assert find_workspace(ROOT) == ROOT / "exercises"
    assert find_workspace(ROOT / "exercises") == ROOT / "exercises"
    assert find_workspace(ROOT / "grader" / "learner") == ROOT / "exercises"


def test_find_workspace_prefers_the_nearest_marker(tmp_path: Path) -> None:
    assert kata("init", "outer", cwd=tmp_path).returncode == 0
    assert kata("init", "inner", cwd=tmp_path / "outer").returncode == 0
    assert find_workspace(tmp_path / "outer" / "inner") == tmp_path / "outer" / "inner"
    assert find_workspace(tmp_path / "outer") == tmp_path / "outer"
    try:
        find_workspace(tmp_path)
    except NoWorkspace:
        pass
    else:
        raise AssertionError("a folder with no workspace above it was taken for one")


def read_only(ws: Path, command: str) -> str:
    """`command` run where `ws` is a read-only bind mount (a mount namespace of its own): root cannot write there
    either, unlike a chmod."""
    # cd again after mounting: a cwd opened before it still points at the writable folder underneath
    return f"mount --bind {ws} {ws} && mount -o remount,bind,ro {ws} && cd {ws} && {command}"


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount (a mount namespace, mount(8)) needs root")
def test_read_only_workspace_keeps_progress_in_the_user_state_dir(tmp_path: Path) -> None:
    assert kata("init", "ws", cwd=tmp_path).returncode == 0
    ws = tmp_path / "ws"
    state = tmp_path / "state"
    env = {**ENV, "XDG_STATE_HOME": str(state)}
    py = f"{sys.executable} -m grader"
    script = read_only(ws, "touch probe 2>/dev/null && echo WRITABLE; "
                       f"{py} hint dot_scores; {py} hint dot_scores; {py} reset dot_scores --yes; echo reset=$?; "
                       f"{py} list >/dev/null; echo list=$?")
    proc = subprocess.run(["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, cwd=ws,
                          env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert "WRITABLE" not in proc.stdout, "the bind mount is not read-only: the test proves nothing"
    assert "Traceback" not in out, out
    assert "hint 2/" in proc.stdout, out  # the second call advanced: the first was remembered
    assert "reset=2" in proc.stdout and "read-only" in out, out
    assert "list=0" in proc.stdout, out
    saved = list(state.rglob("state.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["hints"]["dot_scores"] == 2
    assert not (ws / ".attn-kata" / "state.json").exists()


def run_notebook(nb: nbformat.NotebookNode, cwd: Path) -> nbformat.NotebookNode:
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = ENV["PATH"]  # the kernel is this venv's python
    try:
        client.execute()
    finally:
        os.environ["PATH"] = old
    return nb


def html_of(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)


def test_notebook_check_replays_without_its_own_calls(tmp_path: Path) -> None:
    """`r = check(...)`, `grader.check(...)` and aliased imports do not break later steps in the replay; each call
    shows one output; a step not written yet is "not started"."""
    cells = ["from grader import check", SOLUTION, 'r = check("dot_scores", lang="en")',
             'check("softmax", lang="en")',
             'import grader\nfrom grader import check as c\ngrader.check("1", lang="en")',
             'x = c("dot_scores", "softmax", lang="en")\nprint(r.score, r.max_score, [s.status for s in x.steps])']
    nb = run_notebook(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), tmp_path)
    for i in (2, 3, 4):
        assert len(nb.cells[i].outputs) == 1, (i, nb.cells[i].outputs)
        assert nb.cells[i].outputs[0].output_type == "display_data"
    assert "passed" in html_of(nb.cells[2]) and "NameError" not in html_of(nb.cells[3])
    assert "not started" in html_of(nb.cells[3]), html_of(nb.cells[3])
    assert "passed" in html_of(nb.cells[4])
    # issue 38: its text/plain was `<IPython.core.display.HTML object>`: now the terminal's table and next step
    text = nb.cells[3].outputs[0]["data"]["text/plain"]
    assert "IPython" not in text and "┃ # ┃ step" in text and "not started" in text, text
    assert "softmax" in text and text.splitlines()[-1].startswith("next: step 2, softmax"), text
    from nbconvert import MarkdownExporter, PythonExporter

    for exporter in (MarkdownExporter(), PythonExporter()):  # what nbconvert --to markdown / script shows of it
        exporter.exclude_output = False
        body, _ = exporter.from_notebook_node(nb)
        assert "IPython.core.display" not in body
    plain = MarkdownExporter()
    plain.config.NbConvertBase.display_data_priority = ["text/plain"]  # a front end that shows text only
    assert "next: step 2, softmax" in plain.from_notebook_node(nb)[0]
    printed = "".join(o.get("text", "") for o in nb.cells[5].outputs if o.output_type == "stream")
    assert "['passed', 'not_started']" in printed, nb.cells[5].outputs
    score, max_score = printed.split()[:2]
    assert float(score) == float(max_score) > 0


def test_init_notebook_runs_and_check_grades_it(tmp_path: Path) -> None:
    assert kata("init", "nbws", "--notebook", cwd=tmp_path).returncode == 0
    ws = tmp_path / "nbws"
    assert not list(ws.glob("*.py")) and (ws / "attention.ipynb").is_file()
    nb = nbformat.read(ws / "attention.ipynb", as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if "def attention_scores" in c.source)
    nb.cells[first].source = split_stub(SOLUTION)[0]  # step 1 solved, in its own cell
    nbformat.write(nb, ws / "attention.ipynb")
    done = run_notebook(nb, ws)
    checks = [c for c in done.cells if c.cell_type == "code" and c.source.startswith("check(")]
    assert len(checks) == 14 and all(len(c.outputs) == 1 for c in checks)
    assert "passed" in html_of(checks[0]) and "not started" in html_of(checks[1])
    assert kata("check", "dot_scores", cwd=ws).returncode == 0
    rest = kata("check", "softmax", cwd=ws)
    assert rest.returncode == 1 and "not started" in rest.stdout


def test_watch_in_a_notebook_workspace_grades_the_notebook(tmp_path: Path) -> None:
    import pexpect

    assert kata("init", "nbws", "--notebook", cwd=tmp_path).returncode == 0
    ws = tmp_path / "nbws"
    child = pexpect.spawn(sys.executable, ["-m", "grader", "--lang", "en", "watch", "dot_scores"], cwd=str(ws),
                          encoding="utf-8", timeout=120, dimensions=(60, 160),
                          env={"PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "HOME": str(tmp_path),
                               "ATTN_KATA_NO_DAEMON": "1"})
    try:
        child.expect("not started")
        child.expect("q: quit")
        nb = nbformat.read(ws / "attention.ipynb", as_version=4)
        first = next(c for c in nb.cells if "def attention_scores" in c.source)
        first.source = split_stub(SOLUTION)[0]
        nbformat.write(nb, ws / "attention.ipynb")  # the learner saves the notebook
        child.expect("passed")
        child.sendline("q")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_shell_completion_offers_step_ids(tmp_path: Path) -> None:
    env = {**ENV, "_ATTN_KATA_COMPLETE": "bash_complete", "COMP_WORDS": "attn-kata hint soft", "COMP_CWORD": "2"}
    out = subprocess.run([str(Path(BIN) / "attn-kata")], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=120)
    assert out.stdout.split() == ["plain,softmax"], out.stdout + out.stderr
    env["COMP_WORDS"], env["COMP_CWORD"] = "attn-kata check dot_scores c", "3"
    words = subprocess.run([str(Path(BIN) / "attn-kata")], capture_output=True, text=True, cwd=tmp_path, env=env,
                           timeout=120).stdout.split()
    assert {"plain,causal_mask", "plain,causal_attention", "plain,context_vector"} <= set(words), words


def test_every_stub_says_its_step_in_the_one_numbering() -> None:
    """The stubs' and solutions' Chinese summary line names the step as every other learner text does
    ("第 7 步 · 应用因果注意力掩码（§3.5.1）"), never the source text's own 1.2 / 2.1 / 4.1 headings."""
    from grader import i18n
    from grader.registry import STEPS

    for step in STEPS:
        for folder in ("exercises", "solutions"):
            text = (ROOT / folder / step.file).read_text(encoding="utf-8")
            line = next(ln for ln in text.splitlines() if ln.startswith("中文："))
            assert line.startswith(f"中文：{i18n.step_title(step, 'zh')}——"), (folder, step.id, line)
