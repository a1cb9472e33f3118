"""The learner's loop: `attn-kata watch` (re-grade the current step on save), `reset` and `solution`.

`watch` keeps one process warm: torch imported, the reference's results computed once
(`engine.prepared`), the zygote (or, on the portable backend, a spare worker) started by the CLI; each save
grades only the current step in a fresh worker, so feedback comes a fraction of a second after the save.
Saves are seen through watchfiles (inotify, FSEvents, ReadDirectoryChangesW: every platform, no polling of our
own), then confirmed by a snapshot of the step files (mtime, size, inode), so the grader's own progress file
never re-grades; stdin is read by a thread, so typing `n` + Enter never blocks the watching, on any platform.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from rich.console import Console

from grader import i18n, katafile, limits
from grader.i18n import N_
from grader.registry import BY_ID, STEPS, Step
from grader.settings import DEFAULT_TIMEOUT, KATA_ROOT
from grader.submission import graded, step_path

POLL = limits.WATCH_POLL
WATCHED = (".py", ".ipynb")
STUB_LINE = katafile.STUB_LINE
ROOT = KATA_ROOT

TEXT: dict[str, str] = {  # msgids: the Chinese is in the message catalogue (grader/i18n.py)
    "watching": N_("watching {ws}/ · save a file to re-grade"),
    "step": N_("step {n}/{total}: {title} (§{section})"),
    "edit": N_("edit {path}"),
    "keys": N_("n + Enter: next step · p: previous · h: hint · Enter: re-grade · q: quit"),
    # a terminal: single keys, no Enter (as rustlings reads them); the line above where stdin is not a terminal
    "keys_single": N_("n: next step not yet passed · p: previous · h: hint · r: re-grade · q: quit"),
    "graded": N_("graded in {s:.2f} s at {when}"),
    "grading": N_("grading {step}…"),
    "passed": N_("✓ {step} passed! press n + Enter for the next step ({nxt})"),
    "passed_single": N_("✓ {step} passed! press n for the next step not yet passed ({nxt})"),
    "passed_last": N_("✓ {step} passed! that was the last step"),
    "all_done": N_("all {total} steps passed: well done!"),
    "unlocked": N_("the reference solution is unlocked: `attn-kata solution {step}`"),
    "not_yet": N_("keep going: save {path} to re-grade · stuck? h + Enter for a hint"),
    "not_yet_single": N_("keep going: save {path} to re-grade · stuck? press h for a hint"),
    "only_open": N_("every other step has passed: this one is the last to do"),
    "last": N_("this is the last step"),
    "first": N_("this is the first step"),
    "error": N_("the grader failed: {err}"),
    "bye": N_("bye: your progress is kept in {ws}/.attn-kata/"),
    "no_ws": N_("no workspace at {ws}/: run from the kata's folder, or pass --path"),
    "unknown": N_("unknown command {cmd!r}"),
    "reset_ask": N_("replace {path} with the empty stub? your version will first be copied to {backup}"),
    "reset_done": N_("{path} is the stub again (from {source})"),
    "reset_kept": N_("your version: {backup}"),
    "reset_none": N_("no stub found for {step}"),
    "reset_cannot": N_("attn-kata: cannot write {path} ({error}); is the workspace read-only?"),
    "reset_cancel": N_("nothing changed"),
    "locked": N_("the solution of {step} unlocks once the step passes (now: {status}); `attn-kata check "
                "{step}` or `attn-kata watch`, and `attn-kata hint {step}` when stuck"),
    "never": N_("not graded yet"),
    "no_solution": N_("no solution file for {step} at {path}"),
}


def _t(key: str, lang: str, **kw: Any) -> str:
    return i18n.text(TEXT, key, lang, **kw)


def _title(step: Step, lang: str) -> str:
    return i18n.step_title(step, lang)


# --- watching -----------------------------------------------------------------------------------------


def snapshot(workspace: Path) -> dict[str, tuple[int, int, int]]:
    """path -> (mtime_ns, size, inode) of every .py / .ipynb in the workspace (editors that save by
    renaming a temporary file change the inode)."""
    out: dict[str, tuple[int, int, int]] = {}
    for root, dirs, files in os.walk(workspace):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for f in files:
            if f.endswith(WATCHED) and not f.startswith("."):
                p = os.path.join(root, f)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                out[p] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return out


def progress_bar(passed: int, total: int) -> str:
    return f"[{'#' * passed}{'-' * (total - passed)}] {passed}/{total}"


def first_open_step(workspace: Path) -> Step:
    from grader.learner.api import load_state

    progress = load_state(workspace).get("progress", {})
    return next((s for s in STEPS if progress.get(s.id, {}).get("status") != "passed"), STEPS[0])


class Watcher:
    def __init__(self, workspace: str | Path = "exercises", start: str | None = None, lang: str = "en",
                 timeout: float = DEFAULT_TIMEOUT, secret: str | None = None, console: Console | None = None,
                 stdin: IO[str] | None = None, poll: float = POLL):
        self.ws = Path(workspace)
        self.lang = lang
        self.timeout = timeout
        self.secret = secret
        self.console = console or Console()
        self.stdin = stdin if stdin is not None else sys.stdin
        self.poll = poll
        self.index = STEPS.index(BY_ID[start]) if start else STEPS.index(first_open_step(self.ws))
        self.single_keys = False  # set by run() when stdin is a terminal read key by key

    def _keyed(self, key: str) -> str:
        """The text of `key`, or its single-key wording when the learner types keys without Enter."""
        return f"{key}_single" if self.single_keys and f"{key}_single" in TEXT else key

    def next_open(self) -> int | None:
        """The index of the next step not yet passed after the current one (from the start again past the last);
        None when every other step has passed."""
        from grader.learner.api import load_state

        progress = load_state(self.ws).get("progress", {})
        for i in [*range(self.index + 1, len(STEPS)), *range(self.index)]:
            if progress.get(STEPS[i].id, {}).get("status") != "passed":
                return i
        return None

    @property
    def step(self) -> Step:
        return STEPS[self.index]

    def say(self, key: str, style: str = "", **kw: Any) -> None:
        text = _t(key, self.lang, **kw)
        self.console.print(text, style=style or None, markup=False, highlight=False)

    # one grading round: the current step only
    def grade(self) -> None:
        from grader.grading import engine
        from grader.learner import api
        from grader.render import heatmap, reporters

        step = self.step
        start = time.monotonic()
        try:
            report = engine.grade(graded(self.ws), steps=[step.id], timeout=self.timeout, secret=self.secret,
                                  pictures=True).worded(self.lang)
            mats = heatmap.of_report(report)
        except Exception as exc:  # the grader's own trouble (never the submission's): say so, keep watching
            self.say("error", "red", err=f"{type(exc).__name__}: {exc}")
            return
        elapsed = time.monotonic() - start
        state = api.record_progress(self.ws, report)
        result = report.steps[0]
        passed = sum(1 for s in STEPS if state.get("progress", {}).get(s.id, {}).get("status") == "passed")
        c = self.console
        if c.is_terminal:
            c.clear()
        from rich.text import Text

        c.print(Text.assemble(("attn-kata watch", "bold"), "  ", (progress_bar(passed, len(STEPS)), "cyan")))
        self.say("watching", "dim", ws=self.ws)
        self.say("step", "bold", n=step.number, total=len(STEPS), title=i18n.step_name(step, self.lang),
                 section=step.section)
        reporters.table(report, c, lang=self.lang)
        if result.status in ("failed", "partial"):
            heatmap.print_failing(report, mats, c, self.lang)
        path = graded(self.ws) if graded(self.ws).suffix == ".ipynb" else step_path(self.ws, step)
        if result.status == "passed":
            nxt = self.next_open()
            if nxt is not None:
                self.say(self._keyed("passed"), "bold green", step=step.id, nxt=STEPS[nxt].id)
            else:
                self.say("passed_last", "bold green", step=step.id)
            if passed == len(STEPS):
                self.say("all_done", "bold green", total=len(STEPS))
            self.say("unlocked", "dim", step=step.id)
        else:
            self.say(self._keyed("not_yet"), "", path=path)
        self.say("graded", "dim", s=elapsed, when=time.strftime("%H:%M:%S"))
        self.say(self._keyed("keys"), "dim")

    def command(self, line: str) -> bool:
        """Act on one line typed by the learner; False to quit."""
        cmd = line.strip().lower()
        if cmd in ("q", "quit", "exit", "退出"):
            return False
        if cmd in ("n", "next", "下一步"):  # the next step not yet passed, as rustlings moves on
            nxt = self.next_open()
            if nxt is not None:
                self.index = nxt
                self.say("grading", "dim", step=self.step.id)
                self.grade()
            elif self.step.id in self._passed():
                self.say("all_done", "bold green", total=len(STEPS))
            else:
                self.say("only_open", "yellow")
        elif cmd in ("p", "prev", "previous", "上一步"):
            if self.index > 0:
                self.index -= 1
                self.say("grading", "dim", step=self.step.id)
                self.grade()
            else:
                self.say("first", "yellow")
        elif cmd in ("h", "hint", "提示"):
            from grader.learner.api import hint

            hint(step=self.step.id, workspace=self.ws, lang=self.lang)
        elif cmd in ("", "r", "regrade"):
            self.grade()
        else:
            self.say("unknown", "yellow", cmd=cmd)
            self.say(self._keyed("keys"), "dim")
        return True

    def _passed(self) -> set[str]:
        from grader.learner.api import load_state

        progress = load_state(self.ws).get("progress", {})
        return {k for k, v in progress.items() if isinstance(v, dict) and v.get("status") == "passed"}

    def _changed(self, before: dict[str, tuple[int, int, int]]) -> dict[str, tuple[int, int, int]] | None:
        now = snapshot(self.ws)
        if now == before:
            return None
        for _ in range(5):  # let a save that writes in several steps finish
            time.sleep(0.02)
            later = snapshot(self.ws)
            if later == now:
                break
            now = later
        return now

    def run(self) -> int:
        if not self.ws.is_dir():
            self.say("no_ws", "red", ws=self.ws)
            return 2
        from grader.grading import engine

        engine.prepared(engine.resolve_secret(self.secret))  # the reference's results, once
        fd = self._stdin_fd()
        restore = single_keys(fd) if fd is not None else None
        self.single_keys = restore is not None
        try:
            return self._run(fd)
        finally:
            if restore is not None:
                restore()

    def _run(self, fd: int | None) -> int:
        seen = snapshot(self.ws)
        self.grade()
        typed: queue.Queue[str] = queue.Queue()
        if fd is not None:
            reader = _read_keys if self.single_keys else _read_lines
            threading.Thread(target=reader, args=(fd, typed), daemon=True).start()
        import watchfiles

        stop = threading.Event()
        try:
            # yields the changes, or an empty set every `poll` seconds (then what was typed is acted on)
            for _changes in watchfiles.watch(self.ws, stop_event=stop, debounce=40, step=20,
                                             rust_timeout=max(int(self.poll * 1000), 10), yield_on_timeout=True,
                                             raise_interrupt=False):
                if not self._commands(typed):
                    break
                now = self._changed(seen)
                if now is not None:
                    seen = now
                    self.grade()
        except KeyboardInterrupt:
            pass
        finally:
            stop.set()
        self.say("bye", "dim", ws=self.ws)
        return 0

    def _commands(self, typed: queue.Queue[str]) -> bool:
        """Act on every line typed since the last look; False to quit."""
        while True:
            try:
                line = typed.get_nowait()
            except queue.Empty:
                return True
            if not self.command(line):
                return False

    def _stdin_fd(self) -> int | None:
        try:
            return None if self.stdin.closed else self.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            return None


WORDS = ("下一步", "上一步", "提示", "退出")  # typed through an input method: one chunk, one command


def single_keys(fd: int):  # type: ignore[no-untyped-def]
    """Read the terminal on `fd` key by key, without echo (Ctrl-C still interrupts); returns the function that
    puts it back, or None where `fd` is no terminal (a pipe, a file: lines, as before) or this system cannot."""
    try:
        if not os.isatty(fd):
            return None
    except OSError:
        return None
    if sys.platform == "win32":  # the console hands msvcrt.getwch its keys one by one, unechoed (_read_keys)
        return lambda: None
    import termios
    import tty

    try:
        saved = termios.tcgetattr(fd)
        tty.setcbreak(fd)
        attrs = termios.tcgetattr(fd)
        attrs[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
    except (termios.error, OSError):
        return None

    def restore() -> None:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    atexit.register(restore)  # also when the process ends some other way
    return restore


def keys_of(chunk: str) -> list[str]:
    """The commands in what one read of a key-by-key terminal returned: each key one command (Enter: re-grade),
    a word an input method sent whole as itself, an escape sequence (an arrow key) nothing."""
    if chunk.startswith("\x1b"):
        return []
    if chunk.strip() in WORDS:
        return [chunk.strip()]
    return ["" if ch in "\r\n" else ch for ch in chunk if ch.isprintable() or ch in "\r\n"]


def _read_keys(fd: int, typed: queue.Queue[str]) -> None:
    """The learner's keys, from a thread, each as it is pressed. At EOF: stop listening, keep watching."""
    if sys.platform == "win32":
        import msvcrt

        while True:
            for key in keys_of(msvcrt.getwch()):
                typed.put(key)
    while True:
        try:
            data = os.read(fd, 256)
        except OSError:
            return
        if not data:
            return
        for key in keys_of(data.decode("utf-8", "replace")):
            typed.put(key)


def _read_lines(fd: int, typed: queue.Queue[str]) -> None:
    """The learner's lines, from a thread (select() on a console does not exist everywhere). At EOF: stop
    listening, keep watching."""
    pending = b""
    while True:
        try:
            data = os.read(fd, 4096)  # not readline(): a line typed without Enter stays pending
        except OSError:
            return
        if not data:
            if pending:
                typed.put(pending.decode("utf-8", "replace"))
            return
        pending += data
        *lines, pending = pending.split(b"\n")
        for ln in lines:
            typed.put(ln.decode("utf-8", "replace"))


def watch(*, workspace: str | Path = "exercises", start: str | None = None, lang: str = "en",
          timeout: float = DEFAULT_TIMEOUT, secret: str | None = None) -> int:
    """`attn-kata watch`: returns the exit status."""
    return Watcher(workspace, start, lang, timeout, secret).run()


# --- reset ----------------------------------------------------------------------------------------------


def stub_from_solution(source: str) -> str:
    """The exercise stub for a solution file: each function body (after its docstring) becomes
    `raise NotImplementedError  # your code here`, as the stubs in exercises/ are made (grader/katafile.py)."""
    return katafile.parse(source).stub()


def _is_stub(text: str) -> bool:
    return "raise NotImplementedError" in text


def _git_stub(target: Path) -> str | None:
    git = shutil.which("git")
    if git is None:
        return None
    where, name = str(target.parent), f"./{target.name}"

    def run(*args: str) -> str | None:
        try:
            done = subprocess.run([git, "-C", where, *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    head = run("show", f"HEAD:{name}")
    if head is not None and _is_stub(head):
        return head
    added = (run("log", "--diff-filter=A", "--format=%H", "-1", "--", target.name) or "").strip()
    if added:
        first = run("show", f"{added}:{name}")
        if first is not None and _is_stub(first):
            return first
    return None


def stub_source(step: Step, target: Path) -> tuple[str, str] | None:
    """The pristine stub for `step` and where it came from: the kata's exercises/, git, or made from
    the solution."""
    repo_stub = ROOT / "exercises" / step.file
    try:
        same = target.exists() and repo_stub.exists() and repo_stub.resolve() == target.resolve()
        if repo_stub.is_file() and not same:
            text = repo_stub.read_text(encoding="utf-8")
            if _is_stub(text):
                return text, str(repo_stub)
    except OSError:
        pass
    from_git = _git_stub(target)
    if from_git is not None:
        return from_git, "git"
    from grader.grading.reference import solutions_dir

    sol = step_path(solutions_dir(), step)
    try:
        return (stub_from_solution(sol.read_text(encoding="utf-8")),
                i18n._("{path} (made from the solution)").format(path=sol))
    except (OSError, SyntaxError):
        return None


def reset_step(*, step: str, workspace: str | Path = "exercises", lang: str = "en", yes: bool = False) -> int:
    """`attn-kata reset STEP`: put the stub back (after asking); the learner's file goes to .attn-kata/backup/."""
    import click

    from grader.learner.api import load_state, save_state
    from grader.learner.workspace import state_dir

    s = BY_ID[step]
    ws = Path(workspace)
    target = step_path(ws, s)  # the file grading reads: its numbered name, or the older one of an older workspace
    console = Console()
    found = stub_source(s, target)
    if found is None:
        console.print(_t("reset_none", lang, step=s.id), style="red", markup=False)
        return 1
    text, source = found
    backup = state_dir(ws) / "backup" / f"{s.id}-{time.strftime('%Y%m%d-%H%M%S')}.py"
    if target.exists() and not yes and not click.confirm(_t("reset_ask", lang, path=target, backup=backup),
                                                         default=False):
        console.print(_t("reset_cancel", lang), markup=False)
        return 1
    try:
        if target.exists():
            backup.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(target, backup)
        ws.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:  # a read-only workspace: one line, no traceback
        console.print(_t("reset_cannot", lang, path=target, error=exc.strerror or exc), style="red", markup=False,
                      highlight=False)
        return 2
    state = load_state(ws)
    progress = state.setdefault("progress", {})
    if progress.get(s.id, {}).get("status") == "passed":
        solved = state.setdefault("solved", [])
        if s.id not in solved:
            solved.append(s.id)  # the solution stays unlocked
    if s.id in progress:
        progress[s.id] = {**progress[s.id], "status": "not_started", "score": 0}
    save_state(ws, state)
    console.print(_t("reset_done", lang, path=target, source=source), style="green", markup=False,
                  highlight=False)
    if target.exists() and backup.exists():
        console.print(_t("reset_kept", lang, backup=backup), style="dim", markup=False, highlight=False)
    return 0


# --- solution -------------------------------------------------------------------------------------------


def solution_unlocked(step_id: str, workspace: str | Path) -> tuple[bool, str]:
    from grader.learner.api import load_state

    state = load_state(workspace)
    status = state.get("progress", {}).get(step_id, {}).get("status")
    return status == "passed" or step_id in state.get("solved", []), status or ""


def show_solution(*, step: str, workspace: str | Path = "exercises", lang: str = "en") -> int:
    """`attn-kata solution STEP`: print solutions/<id>.py once the step has passed."""
    from grader.grading.reference import solutions_dir

    s = BY_ID[step]
    console = Console()
    ok, status = solution_unlocked(s.id, workspace)
    if not ok:
        shown = i18n.translate(lang, i18n.STATUS.get(status, status)) if status else \
            _t("never", lang)
        console.print(_t("locked", lang, step=s.id, status=shown), style="yellow", markup=False, highlight=False)
        return 1
    path = step_path(solutions_dir(), s)  # a course's own solutions folder may use the older names
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        console.print(_t("no_solution", lang, step=s.id, path=path), style="red", markup=False)
        return 1
    if console.is_terminal:
        from rich.syntax import Syntax

        console.print(f"[bold]{_title(s, lang)}[/bold] — {path}", highlight=False)
        console.print(Syntax(text, "python", line_numbers=True))
    else:
        sys.stdout.write(text)
    return 0
