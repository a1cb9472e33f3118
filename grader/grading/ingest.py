"""Read a submission as text only (directory, .py or .ipynb); nothing here runs its code."""

from __future__ import annotations

import ast
import functools
import io
import json
import os
import re
import stat
import tokenize
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from grader import limits
from grader.files import open_no_follow
from grader.i18n import _
from grader.registry import BY_ID, STEP_FILES, Step
from grader.submission import step_files

MAX_SOURCE_BYTES = limits.SOURCE_BYTES  # code: a module, or a notebook's code cells together
MAX_NOTEBOOK_BYTES = limits.NOTEBOOK_BYTES  # a notebook file, outputs included (they are never read)
# code cells read from one notebook (empty ones included): an honest chapter has a few dozen; each becomes a unit
# that the trusted side analyses, so a million empty cells would cost a minute of its CPU. The same bound as the
# cell labels a worker may name in one load error (grader.sandbox.wire.MAX_CELLS).
MAX_CODE_CELLS = limits.CODE_CELLS
MAX_HELPER_FILES = limits.HELPER_FILES  # .py files beside the step files in a folder
MAGIC = re.compile(r"^\s*([%!]|\?\?|\w+\?$)")  # %magic, %%cell, !shell, obj?


def shown(name: str) -> str:
    """A name from the file system as text that can be written anywhere: bytes that are not UTF-8 (which Python
    reads as lone surrogates, and which no writer can encode) shown as `\\xff`. Only for display: the real path is
    what is opened."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class SubmissionError(Exception):
    """The path is not a submission we can read (reported, never a traceback). `kind`: "unreadable" or
    "too_large"."""

    def __init__(self, message: str, kind: str = "unreadable"):
        super().__init__(message)
        self.kind = kind


@dataclass
class Unit:
    """A piece of source the worker executes: a module file, or one notebook cell."""

    # module name the worker gives it ("causal_attention": a step's id, whichever of its two names the file has, and
    # the worker serves it under the other too; "submission", "notebook")
    module: str
    label: str  # how the learner knows it: "step09_causal_attention.py", "causal_attention.py", "cell 7"
    source: str

    @functools.cached_property
    def parsed(self) -> ast.Module | Exception:
        """The source's parse, made once (the flags read it; step 4's loops are counted by the worker), or why none:
        SyntaxError or ValueError (the worker reports what does not load), RecursionError or MemoryError (too deep
        for this process: the flags pass it by; the worker, which runs it, reports what does not load)."""
        try:
            return ast.parse(self.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            return exc

    @functools.cached_property
    def text(self) -> str:
        """The source as Python reads its names: identifiers are NFKC-normalised (PEP 3131), so
        `ａll_attention_scores` (a fullwidth a) defines all_attention_scores and a test for a name in the raw text
        would miss it. Made once for every reader of the text (the flags)."""
        if self.source.isascii() or unicodedata.is_normalized("NFKC", self.source):  # the quick check
            return self.source
        return unicodedata.normalize("NFKC", self.source)


@dataclass
class Submission:
    path: Path
    kind: str  # "dir" | "py" | "ipynb"
    units: list[Unit]
    notes: list[str] = field(default_factory=list)  # e.g. stripped magics

    @property
    def name(self) -> str:
        return shown(self.path.name)

    def unit_for(self, step: Step) -> str | None:
        """For a directory, the module that should define a step; one shared module otherwise."""
        if self.kind == "dir":
            return step.id if any(u.module == step.id for u in self.units) else None
        return self.units[0].module if self.units else None


def _read_text(path: Path, limit: int = MAX_SOURCE_BYTES, python: bool = True) -> str:
    """A regular file's text, opened without following a symbolic link (a submission's link could point at
    the reference or at any file the grader can read) and without blocking on a FIFO. Python source is decoded
    as Python decodes it (`python`); a notebook, which is JSON, as UTF-8."""
    name = shown(path.name)
    try:
        fd = open_no_follow(path)
    except OSError as exc:
        if path.is_symlink():
            raise SubmissionError(_("{name} is a symbolic link: only regular files are read").format(
                name=name)) from None
        raise SubmissionError(_("{name} could not be read ({error})").format(name=name,
                                                                           error=exc.strerror)) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise SubmissionError(_("{name} is not a regular file").format(name=name))
        if st.st_size > limit:
            raise SubmissionError(_("{name} is {size} bytes; the limit is {limit}").format(
                name=name, size=st.st_size, limit=limit), "too_large")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SubmissionError(_("{name} is over {limit} bytes").format(name=name, limit=limit), "too_large")
    return decode_source(data) if python else data.decode("utf-8", errors="replace")


def decode_source(data: bytes) -> str:
    """Python source as `python file.py` reads it: a UTF-8 BOM (Notepad, VS Code's "UTF-8 with BOM") dropped, a
    PEP 263 coding cookie honoured; bytes that do not decode are replaced, as before, and left to the parser."""
    try:
        encoding, _lines = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return data.decode("utf-8", errors="replace")


def _regular(path: Path) -> bool:
    """A regular file that is not a symbolic link (lstat: the link itself, never its target)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def notebook_units(text: str, module: str = "notebook") -> tuple[list[Unit], list[str]]:
    """Code cells of a notebook (nbformat 3 or 4, read through nbformat's own upgrade), with IPython magics
    and shell escapes commented out. Outputs are never looked at; the code alone is held to the size limit."""
    cells = _cells(text)
    code = sum(1 for cell in cells if isinstance(cell, dict) and cell.get("cell_type") == "code")
    if code > MAX_CODE_CELLS:  # before any cell is read: the cost is in the count, empty or not
        raise SubmissionError(_("the notebook has {n} code cells; the limit is {limit}").format(
            n=code, limit=MAX_CODE_CELLS), "too_large")
    units: list[Unit] = []
    notes: list[str] = []
    for i, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        if isinstance(src, list) and all(isinstance(x, str) for x in src):
            src = "".join(src)
        elif not isinstance(src, str):
            raise SubmissionError(_("not a readable notebook: cell {i}'s source is not text").format(i=i))
        if not src.strip():
            continue  # an empty cell defines nothing: not a unit (labels keep the notebook's numbering)
        lines = src.splitlines()
        if lines and lines[0].lstrip().startswith("%%"):
            notes.append(_("cell {i}: cell magic {magic} skipped").format(i=i, magic=lines[0].split()[0]))
            continue
        for j, line in enumerate(lines if "%" in src or "!" in src or "?" in src else ()):  # no line can match
            if MAGIC.match(line):
                notes.append(_("cell {i}: `{line}` removed (magics and shell escapes do not run here)").format(
                    i=i, line=line.strip()[:40]))
                indent = line[: len(line) - len(line.lstrip())]
                lines[j] = f"{indent}pass  # {line.strip()}"  # keeps line numbers and blocks valid
        units.append(Unit(module, f"cell {i}", "\n".join(lines)))
    size = sum(len(u.source.encode("utf-8", "replace")) for u in units)
    if size > MAX_SOURCE_BYTES:
        raise SubmissionError(_("the notebook's code is {size} bytes; the limit is {limit}").format(
            size=size, limit=MAX_SOURCE_BYTES), "too_large")
    return units, notes


def _cells(text: str) -> list:
    """The cells of a notebook in nbformat 4, upgraded by nbformat itself from an older version."""
    cells = _v4_cells(text)
    if cells is not None:
        return cells
    import nbformat

    try:
        nb = nbformat.reader.reads(text)
        if nb.get("nbformat", 0) < 4:
            nb = nbformat.convert(nb, 4)
        cells = nb["cells"]
    except Exception as exc:
        raise SubmissionError(_("not a readable notebook: {error}").format(
            error=f"{type(exc).__name__}: {str(exc)[:200]}")) from None
    if not isinstance(cells, list):
        raise SubmissionError(_("not a readable notebook: {error}").format(error="cells is not a list"))
    return cells


def _v4_cells(text: str) -> list | None:
    """An nbformat-4 notebook's cells, straight from its JSON (what nbformat's reader returns for it, as plain
    dicts), so that a batch's coordinating and grading processes never import nbformat (1.7 s of CPU each: its
    validator pulls jsonschema and its grammars); None for anything else, which nbformat reads (or rejects)."""
    try:
        nb = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(nb, dict) and nb.get("nbformat") == 4 and isinstance(nb.get("cells"), list):
        return nb["cells"]
    return None


def _step_number(file: str) -> int:
    """The number of the step whose file `file` is (either name)."""
    return next(s.number for s in BY_ID.values() if file in s.files)


def read_submission(path: str | Path) -> Submission:
    p = Path(path)
    if p.is_symlink():
        raise SubmissionError(_("{name} is a symbolic link: only regular files are read").format(name=shown(p.name)))
    if not p.exists():
        raise SubmissionError(_("{path}: no such file or directory").format(path=shown(str(p))))
    if p.is_dir():
        notes = [_("{name} is a symbolic link or not a regular file: not read").format(name=shown(f.name))
                 for f in sorted(p.glob("*.py")) if not _regular(f)]
        files, both = step_files(p)  # a step's file under its numbered or its older name (grader.submission)
        notes += [_("{graded} and {other} are both step {n}'s file: {graded} is graded, {other} is not read").format(
            graded=shown(graded), other=shown(other), n=_step_number(graded)) for graded, other in both]
        units = [Unit(sid, path.name, _read_text(path)) for sid, path in files.items()]
        # helper modules the learner may import from their own files
        helpers = [f for f in sorted(p.glob("*.py")) if f.name not in STEP_FILES and f.stem.isidentifier()
                   and not f.name.startswith(("test_", "conftest")) and _regular(f)]
        if len(helpers) > MAX_HELPER_FILES:
            raise SubmissionError(_("the folder has {n} helper modules; the limit is {limit}").format(
                n=len(helpers), limit=MAX_HELPER_FILES), "too_large")
        extra = [Unit(f.stem, f.name, _read_text(f)) for f in helpers]
        size = sum(len(u.source.encode("utf-8", "surrogatepass")) for u in units + extra)
        if size > MAX_SOURCE_BYTES:  # the folder's code together, as a notebook's cells are (red team 12)
            raise SubmissionError(_("the folder's code is {size} bytes; the limit is {limit}").format(
                size=size, limit=MAX_SOURCE_BYTES), "too_large")
        return Submission(p, "dir", units + extra if units else [], notes)
    if p.suffix == ".py":
        return Submission(p, "py", [Unit("submission", shown(p.name), _read_text(p))])
    if p.suffix == ".ipynb":
        units, notes = notebook_units(_read_text(p, MAX_NOTEBOOK_BYTES, python=False))
        return Submission(p, "ipynb", units, notes)
    raise SubmissionError(_("{name}: expected a directory, a .py file or a .ipynb notebook").format(
        name=shown(p.name)))
