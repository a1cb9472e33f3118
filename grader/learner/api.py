"""Plain functions behind the CLI, with keyword arguments (usable from Python and notebooks)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from grader import i18n
from grader.i18n import N_, _, default_lang
from grader.learner import workspace as workspace_state
from grader.registry import BY_ID, STEPS, Step
from grader.render import reporters
from grader.report import Report
from grader.settings import DEFAULT_TIMEOUT, key_fingerprint, resolve_secret
from grader.submission import STATE_DIR, graded, step_path

__all__ = ["DEFAULT_TIMEOUT", "STATE_DIR", "check", "default_lang", "grade", "grade_report", "hint", "list_steps"]


def load_state(workspace: str | Path) -> dict:
    """Progress and hints: from where they are written (grader.learner.workspace.state_dir), else, in a read-only
    workspace that has none there yet, from the workspace's own .attn-kata/."""
    for p in dict.fromkeys(workspace_state.state_files(workspace)):
        try:
            state = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(state, dict):
            return state
    return {}


def save_state(workspace: str | Path, state: dict) -> None:
    p = workspace_state.state_files(workspace)[0]
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, ensure_ascii=False, indent=1), encoding="utf-8")
        tmp.replace(p)
    except OSError:
        pass  # progress is a convenience; a read-only workspace still grades


def record_progress(workspace: str | Path, report: Report) -> dict:
    """Remember each step's result, and every step ever passed (its solution stays unlocked after a
    reset or a later broken save). Returns the saved state."""
    state = load_state(workspace)
    progress = state.setdefault("progress", {})
    solved = state.setdefault("solved", [])
    for s in report.steps:
        progress[s.id] = {"status": s.status, "score": s.score, "max_score": s.max_score}
        if s.status == "passed" and s.id not in solved:
            solved.append(s.id)
    save_state(workspace, state)
    return state


def _grade_pictures(path: str | Path, html: str | Path | None, pictures: bool, **kwargs):  # type: ignore[no-untyped-def]
    """Grade; with `pictures`, also the weight matrices (grader.render.heatmap), and write the HTML report if asked."""
    # a grading process forked from the zygote (the matrices come back as plain data): this process never imports
    # torch (grader.grading.forked)
    from grader.grading.forked import grade as grade_report

    if not (pictures or html):
        return grade_report(path, **kwargs), {}
    from grader.render import heatmap

    report = grade_report(path, pictures=True, **kwargs)
    mats = heatmap.of_report(report)
    if html:
        from grader.render import html_report

        html_report.write(html, report, mats, lang=kwargs.get("lang", "en"))
    return report, mats


def grade(*, path: str | Path, fmt: str = "table", secret: str | None = None, steps: list[str] | None = None,
          timeout: float = DEFAULT_TIMEOUT, lang: str = "en", to_terminal: bool = True,
          html: str | Path | None = None, allow_weak_sandbox: bool = False, upload: str | Path | None = None) -> str:
    """Grade one submission and render it (`fmt`: "table" or "json"); returns the text (table output goes to the
    console). A platform's results.json is its own module's (grader.platforms), from `grade_report`.

    `html`: also write a self-contained HTML report there (with heatmaps of the attention weights).
    With a secret, refuses (session.WeakSandbox) where the sandbox lacks a layer instructor grading needs,
    unless `allow_weak_sandbox`. `upload`: draw the hidden cases from the secret keyed by everything there
    (grader.grading.cases_key), for graders of resubmitted attempts."""
    # the weight matrices only where they are drawn: a table on a terminal (_print_heatmaps)
    pictures = fmt == "table" and to_terminal and Console().is_terminal
    report, mats = _graded(path, secret=secret, steps=steps, timeout=timeout, lang=lang, html=html,
                           allow_weak_sandbox=allow_weak_sandbox, upload=upload, pictures=pictures)
    if fmt == "json":
        return reporters.to_json(report)
    if to_terminal:
        console = Console()
        reporters.table(report, console, lang=lang)
        _print_heatmaps(report, mats, console, lang)
        return ""
    # capture() swallows what is printed, so a recording console would export nothing: keep the captured text
    console = Console(width=120, force_terminal=False, color_system=None)
    with console.capture() as captured:
        reporters.table(report, console, lang=lang)
    return captured.get()


def grade_report(*, path: str | Path, secret: str | None = None, steps: list[str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT, lang: str = "en", html: str | Path | None = None,
                 allow_weak_sandbox: bool = False, upload: str | Path | None = None) -> Report:
    """Grade one submission (as `grade`, whose arguments these are) and return its report, unrendered."""
    return _graded(path, secret=secret, steps=steps, timeout=timeout, lang=lang, html=html,
                   allow_weak_sandbox=allow_weak_sandbox, upload=upload, pictures=False)[0]


def _graded(path: str | Path, *, secret: str | None, steps: list[str] | None, timeout: float, lang: str,
            html: str | Path | None, allow_weak_sandbox: bool, upload: str | Path | None,
            pictures: bool) -> tuple[Report, dict]:
    course_secret = resolve_secret(secret)
    strong = bool(course_secret) and not allow_weak_sandbox
    if upload is not None:
        from grader.grading.cases_key import per_submission

        secret = per_submission(course_secret, Path(upload))
    report, mats = _grade_pictures(path, html, pictures, steps=steps, secret=secret, timeout=timeout, lang=lang,
                                   config={"require_strong": strong})
    if course_secret:  # which key graded it (its fingerprint, never the key), as a batch's reports say
        chosen = set(steps or ())
        report.settings = {"key_fingerprint": key_fingerprint(course_secret), "timeout": float(timeout),
                           "steps": ",".join(s.id for s in STEPS if s.id in chosen) or "all",
                           "grader_version": report.grader_version}
    return report, mats


def _print_heatmaps(report: Report, mats: dict, console: Console, lang: str) -> None:
    if mats and console.is_terminal:
        from grader.render import heatmap

        heatmap.print_failing(report, mats, console, lang)


def check(*, workspace: str | Path = "exercises", steps: list[str] | None = None, lang: str = "en",
          timeout: float = DEFAULT_TIMEOUT, html: str | Path | None = None) -> bool:
    """Grade the learner's workspace, show the table, remember progress. True when all requested steps pass.

    `html`: also write a self-contained HTML report there (with heatmaps of the attention weights)."""
    console = Console()
    if not Path(workspace).is_dir():
        console.print(i18n.translate(lang, N_("no workspace at {ws}/: run from the kata's folder, or pass --path"))
                      .format(ws=workspace), style="red", markup=False, highlight=False)
        return False
    target = graded(workspace)  # the notebook of an `init --notebook` workspace
    report, mats = _grade_pictures(target, html, console.is_terminal, steps=steps, timeout=timeout, lang=lang)
    reporters.table(report, console, lang=lang)
    _print_heatmaps(report, mats, console, lang)
    progress = record_progress(workspace, report)["progress"]
    nxt = next((s for s in report.steps if s.status != "passed"), None)
    if nxt is None:  # what was asked passes: point at the first step not yet passed, as rustlings moves on
        ahead = next((s for s in STEPS if progress.get(s.id, {}).get("status") != "passed"), None)
        tip = (i18n.translate(lang, N_("well done: next is step {number}, {step} (`attn-kata check {step}`)"))
               .format(number=ahead.number, step=ahead.id) if ahead is not None else
               i18n.translate(lang, N_("every step passes: the chapter is done")))
        console.print(tip, markup=False, highlight=False)
    else:
        tip = i18n.translate(lang, N_("next: edit {path}; stuck? `attn-kata hint {step}`")).format(
            path=target if target.suffix == ".ipynb" else step_path(workspace, BY_ID[nxt.id]), step=nxt.id)
        console.print(tip, markup=False, highlight=False)
    return all(s.status == "passed" for s in report.steps)


def list_steps(*, workspace: str | Path | None = "exercises", lang: str = "en") -> None:
    """The steps, with the progress recorded in `workspace` (None: outside any workspace, no progress)."""
    with i18n.using(lang):
        _list_steps(workspace)


def _list_steps(workspace: str | Path | None) -> None:
    progress = load_state(workspace).get("progress", {}) if workspace is not None else {}
    console = Console()
    from rich.table import Table
    from rich.text import Text

    from grader.render.terminal import column_widths, fit

    def status(s: Step) -> str:
        p = progress.get(s.id)
        return f"{i18n.status(p['status'])} ({p['score']:g}/{p['max_score']:g})" if p else "—"

    names_width = max(len(n) for s in STEPS for n in s.names)  # the longest name whole when the terminal allows

    def names(s: Step) -> str:
        return ",\n".join(s.names) if len(", ".join(s.names)) > names_width else ", ".join(s.names)

    # wide: number, step (id and title), names, section, status; where that does not fit with every name whole (80
    # columns), narrow: number, step (id, names, the title with its section), status. Each column is given a width
    # no narrower than its widest word (grader.render.terminal.column_widths), and its cells are wrapped to it
    # between words (`fit`): rich's own squeeze would cut `MultiHeadAttentionWrapper` mid-word
    wide = [("#", [Text(str(s.number)) for s in STEPS]),
            (_("step"), [Text(s.id).append("\n" + i18n.step_name(s), style="dim") for s in STEPS]),
            (_("names"), [Text(names(s)) for s in STEPS]), ("§", [Text(s.section) for s in STEPS]),
            (_("status"), [Text(status(s)) for s in STEPS])]
    narrow = [wide[0],
              (_("step"), [Text("\n".join([s.id, *s.names])).append("\n" + i18n.step_title(s), style="dim")
                           for s in STEPS]),
              wide[4]]
    layout, widths = narrow, None
    # the number, the section and the status whole where they can be ("passed (5/5)" on one line)
    for columns, whole in ((wide, (0, 3, 4)), (narrow, (0, 2)), (narrow, (0,))):
        room = console.width - 3 * len(columns) - 1  # a border before each column and one after, 1 cell of padding
        widths = column_widths([[head, *(c.plain for c in cells)] for head, cells in columns], room, whole)
        if widths is not None:
            layout = columns
            break
    t = Table(show_header=True)
    for n, (head, _cells) in enumerate(layout):
        t.add_column(head, width=widths[n] if widths else None, overflow="fold")  # never cut with '…'
    for row in zip(*(cells for _head, cells in layout), strict=True):
        t.add_row(*(fit(cell, widths[n]) if widths else cell for n, cell in enumerate(row)))
    console.print(t)
    if not progress:
        console.print(_("progress appears after `attn-kata check`"))


def hint(*, step: str, workspace: str | Path = "exercises", lang: str = "en", show_all: bool = False) -> list[str]:
    """Reveal the next hint level for a step; returns the hints shown (in `lang`)."""
    with i18n.using(lang):
        return _hint(step, workspace, show_all)


def _hint(step: str, workspace: str | Path, show_all: bool) -> list[str]:
    from grader.registry import hints

    levels = hints(step)  # declared in grader/checks/<step>.py, read without importing it
    if not levels:  # tests/test_steps.py requires three for every step: never silently none
        raise LookupError(f"step {step} declares no hints (grader/checks/{step}.py)")
    state = load_state(workspace)
    seen = state.setdefault("hints", {})
    shown = int(seen.get(step, 0))
    if not show_all:
        shown = min(shown + 1, len(levels))
    seen[step] = shown
    save_state(workspace, state)
    console = Console()
    out = []
    s = BY_ID[step]
    console.print(f"[bold]{i18n.step_title(s)}[/bold]")
    for i, msgid in enumerate(levels[:shown], start=1):
        text = _(msgid)
        out.append(text)
        label = _("hint {i}/{n}").format(i=i, n=len(levels))
        console.print(f"[cyan]{label}[/cyan] {text}")
    if shown >= len(levels):
        last = _("that was the last hint")
        console.print(f"[dim]{last}[/dim]")
    return out
