"""`attn-kata init [DIR]`: lay out a workspace, as `rustlings init` does: the stubs (or one notebook), a short
README in the learner's language, and the marker that lets every command find the workspace from inside it."""

from __future__ import annotations

import json
from pathlib import Path

from grader import i18n, katafile
from grader.i18n import N_
from grader.registry import BY_MODULE, STEPS, Step
from grader.settings import KATA_ROOT, grader_version
from grader.submission import MARKER, STATE_DIR

NOTEBOOK = "attention.ipynb"

README = (
    N_("# attention-kata workspace"),
    N_("Fourteen steps through chapter 3 of *Build a Large Language Model (From Scratch)*, from attention scores "
       "to GPT-2's multi-head attention. Each step is a function or class to write; the grader runs it in a "
       "sandbox against the book's reference and tells you what differs."),
    N_("- `attn-kata list`: the steps and your progress\n"
       "- `attn-kata check [STEP]`: grade your work (from this folder or any folder inside it)\n"
       "- `attn-kata watch`: re-grade the current step each time you save\n"
       "- `attn-kata hint STEP`: the next hint; `attn-kata solution STEP` once a step has passed\n"
       "- `attn-kata reset STEP`: put a step's stub back (your version is kept in `.attn-kata/backup/`)"),
)
README_FILES = N_("Write each step in its own file here, starting with `{file}`: replace "
                  "`raise NotImplementedError` with your code.")
README_NOTEBOOK = N_("Open `attention.ipynb` in Jupyter: write each step in its cell, then run the `check(...)` "
                     "cell below it. `attn-kata check` in this folder grades the notebook too.")
NB_INTRO = N_("Write each step in the cell after its heading, replacing `raise NotImplementedError`, then run the "
              "`check(...)` cell below it. A step you have not written yet shows as not started.")


class NotEmpty(Exception):
    """The folder exists and holds something: init never overwrites."""


def stub_text(step: Step) -> str:
    return (KATA_ROOT / "exercises" / step.file).read_text(encoding="utf-8")


def split_stub(text: str) -> tuple[str, list[str]]:
    """A stub as a notebook cell: (code without its module docstring and imports, the imports it needs from outside
    the kata). Imports of earlier steps are dropped: in the notebook, earlier cells define those names."""
    return katafile.parse(text).cell(BY_MODULE)


def _cell(kind: str, source: str, n: int) -> dict:
    """One nbformat 4.5 cell (with its id), written as nbformat writes it."""
    cell: dict = {"cell_type": kind, "id": f"attn-kata-{n:02d}", "metadata": {},
                  "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return dict(sorted(cell.items()))


def notebook(lang: str) -> dict:
    """The whole kata as one notebook (nbformat 4.5, a plain dict: nbformat itself takes ~1 s to import): per step
    a heading, the stub's cell and a `check()` cell."""
    with i18n.using(lang):
        cells = [("markdown", f"# attention-kata\n\n{i18n._(NB_INTRO)}")]
        imports: list[str] = []
        body = []
        for step in STEPS:
            code, needed = split_stub(stub_text(step))
            imports += [i for i in needed if i not in imports]
            body += [("markdown", f"## {i18n.step_title(step)}"), ("code", code), ("code", f"check({step.id!r})")]
    cells.append(("code", "\n".join([*imports, "from grader import check"])))
    return {"cells": [_cell(kind, source, n) for n, (kind, source) in enumerate(cells + body)],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


README_ORDER = N_("The files, one per step (numbered, so that every file list shows them in step order):")


def readme(lang: str, with_notebook: bool) -> str:
    parts = [i18n.translate(lang, p) for p in README[:2]]
    parts.append(i18n.translate(lang, README_NOTEBOOK) if with_notebook else
                 i18n.translate(lang, README_FILES).format(file=STEPS[0].file))
    if not with_notebook:  # an index of the step files (registry.Step.file), with their titles
        with i18n.using(lang):
            parts.append(i18n._(README_ORDER) + "\n\n" + "\n".join(
                f"- `{s.file}`: {i18n.step_title(s)}" for s in STEPS))
    return "\n\n".join([*parts, i18n.translate(lang, README[2])]) + "\n"


MARKER_FORMAT = 2  # 2: "lang" is there only when the learner chose it (`init --lang`); 1 (no "format"): always


def recorded_lang(mark: dict) -> str | None:
    """The language a workspace's marker holds as the learner's choice, or None: then ATTN_KATA_LANG and the locale
    decide. A marker of an older init (no "format") recorded "lang" whatever the learner did, "en" by default: its
    "en" says nothing and is ignored; its "zh" came from `--lang zh` or a Chinese locale, and still holds."""
    lang = mark.get("lang")
    if not isinstance(lang, str):
        return None
    if mark.get("format", 1) == 1 and lang == "en":
        return None
    return lang


def init(folder: str | Path, *, lang: str | None = None, with_notebook: bool = False) -> Path:
    """Lay out a workspace in `folder` (made if missing). Raises NotEmpty rather than touch anything already
    there; returns the folder.

    `lang`: the language the learner chose (`attn-kata --lang zh init`): the README is in it and the marker records
    it, so that every later command answers in it. None: the README in the current language (the locale's), and no
    language recorded, so that the locale (LANG, ATTN_KATA_LANG) decides each time."""
    chosen = lang
    lang = lang or i18n.current()
    ws = Path(folder)
    if ws.exists() and (not ws.is_dir() or any(ws.iterdir())):
        raise NotEmpty(str(ws))
    ws.mkdir(parents=True, exist_ok=True)
    if with_notebook:
        text = json.dumps(notebook(lang), ensure_ascii=False, indent=1)
        (ws / NOTEBOOK).write_text(text + "\n", encoding="utf-8")
    else:
        for step in STEPS:
            (ws / step.file).write_text(stub_text(step), encoding="utf-8")
    (ws / "README.md").write_text(readme(lang, with_notebook), encoding="utf-8")
    (ws / STATE_DIR).mkdir()
    mark = {"kata": "attention-kata", "format": MARKER_FORMAT, "version": grader_version(),
            **({"lang": chosen} if chosen else {}), "notebook": NOTEBOOK if with_notebook else None}
    (ws / STATE_DIR / MARKER).write_text(json.dumps(mark, indent=1) + "\n", encoding="utf-8")
    return ws
