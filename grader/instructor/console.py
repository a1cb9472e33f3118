"""The batch on an instructor's terminal: a progress bar while it runs, a summary when it ends."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from grader import i18n
from grader.i18n import _
from grader.settings import DEFAULT_TIMEOUT


def batch(*, directory: str | Path, out: str | Path, jobs: int | None = None, resume: bool = False,
          secret: str | None = None, timeout: float = DEFAULT_TIMEOUT, lang: str = "en", quiet: bool = False,
          allow_weak_sandbox: bool = False, steps: list[str] | None = None, regrade: bool = False):
    """Grade every submission in `directory` into `out` (see grader.instructor.batch); returns a BatchResult.
    ResumeRefused, before anything is graded or written, where OUT holds results graded under other settings."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from grader.instructor.batch import run_batch

    class Rate(ProgressColumn):
        def render(self, task):  # type: ignore[no-untyped-def]
            speed = task.finished_speed or task.speed
            return f"{speed:.2f}/s" if speed else "–/s"

    console = Console(stderr=True)
    if quiet:
        result = run_batch(directory=directory, out=out, jobs=jobs, resume=resume, secret=secret, timeout=timeout,
                           lang=lang, allow_weak_sandbox=allow_weak_sandbox, steps=steps, regrade=regrade)
    else:
        with i18n.using(lang):
            grading, left = _("grading"), _("left")
        bar = Progress(TextColumn(grading), BarColumn(), MofNCompleteColumn(), Rate(), TimeElapsedColumn(),
                       TextColumn(left), TimeRemainingColumn(), console=console, transient=False)
        state: dict = {}

        def start(total: int, done: int, reused: int) -> None:
            state["task"] = bar.add_task(grading, total=max(total - done, 0) or None)
            with i18n.using(lang):
                if reused:  # --resume, and the index held results: only then is it a resumption
                    console.print(_("resuming: {done} of {total} already graded").format(done=reused, total=total),
                                  markup=False)
                elif not resume:
                    console.print(_("a fresh run: {todo} of {total} submissions to grade").format(
                        todo=total - done, total=total), markup=False)

        def progress(n: int) -> None:
            bar.advance(state["task"], n)

        with bar:
            result = run_batch(directory=directory, out=out, jobs=jobs, resume=resume, secret=secret,
                               timeout=timeout, lang=lang, start=start, progress=progress,
                               allow_weak_sandbox=allow_weak_sandbox, steps=steps, regrade=regrade)
        print_summary(result, Console(), lang)
    return result


def print_summary(result, console: Console, lang: str = "en") -> None:  # type: ignore[no-untyped-def]
    """The class summary and the end-of-batch list, in `lang`; every name and reason a student controls is escaped
    (grader.render.terminal): no markup parsed, no control sequence reaches the terminal."""
    with i18n.using(lang):
        _print_summary(result, console)


def _print_summary(result, console: Console) -> None:  # type: ignore[no-untyped-def]
    from rich.table import Table

    from grader.instructor.discovery import spelled
    from grader.render.terminal import plain, text

    s = result.summary
    t = Table(title=_("class summary: {n} graded, mean {mean} / {max}").format(
        n=s["submissions"], mean=s["mean"] if s["mean"] is not None else "–",
        max=s["max_score"] if s["max_score"] is not None else "–"), title_justify="left")
    for col, right in (("#", True), (_("step"), False), (_("mean"), True), (_("full marks"), True),
                       (_("most common failed check"), False)):
        t.add_column(col, justify="right" if right else "left")
    for st in s["steps"]:
        top = st["most_common_failed_check"]
        t.add_row(str(st["number"]), st["id"],
                  f"{st['mean']:g}/{st['max_score']:g}" if st["mean"] is not None else "–",
                  f"{st['full_marks_share']:.0%}" if st["full_marks_share"] is not None else "–",
                  text(f"{top['name']} ({top['count']})") if top else "")
    console.print(t)
    console.print(text(_("{total} submissions, {records} records ({now} graded now, {reused} from the index) in "
                         "{seconds:.1f} s -> {out}").format(total=result.total, records=result.records,
                                                            now=result.graded_now, reused=result.reused,
                                                            seconds=result.seconds, out=result.out)))
    flagged = s.get("flagged") or []
    if flagged:  # scores are what the checks gave; these are for a human to read (summary.json: flagged)
        console.print(text(_("{n} submissions hold code that studies the grader (no score changed; see flagged in "
                             "summary.json): {names}").format(
            n=len(flagged), names=", ".join(plain(f["submission"]) for f in flagged)), style="yellow"))
    for group in getattr(result, "collisions", None) or []:  # one line per name that several uploads share
        console.print(text(_("{n} uploads give one name (case and Unicode spelling aside); each row has its own: "
                             "{names}").format(n=len(group), names=", ".join(
            f"{plain(student)} ({plain(spelled(source))})" for student, source in group))), style="yellow")
    budget = [student for student, status in result.statuses.items() if status == "over_budget"]
    if budget:
        console.print(text(_("{n} used up their time budget (graded on what finished): {names}").format(
            n=len(budget), names=", ".join(plain(b) for b in budget)), style="yellow"))
    if result.not_graded:
        console.print(text(_("{n} could not be graded:").format(n=len(result.not_graded)), style="red"))
        for student, reason in result.not_graded.items():
            status = result.statuses.get(student, "error")
            console.print(text(f"  {plain(student)}: {status}: {plain(reason)}"))
