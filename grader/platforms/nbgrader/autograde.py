"""nbgrader's run: `autograde_course()` grades nbgrader's submitted/ notebooks with the engine only (no kernel at
all) and writes each step's score into nbgrader's gradebook through nbgrader.api.Gradebook.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import limits
from grader.files import open_no_follow, without_surrogates
from grader.grading.ingest import MAX_CODE_CELLS, MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES, shown
from grader.learner.kernel import notebook_json
from grader.platforms.nbgrader.assignment import TEST_PREFIX, failure_text
from grader.registry import BY_ID

# --------------------------------------------------------------------------- sandboxed autograde
#
# Everything under submitted/ is the students': their folder's name, timestamp.txt, each notebook and every field
# of its cells. Each is read bounded and checked before use; a bad one is that student's error (a StudentError with
# the reason): they are named with it on the terminal, their notebook's grade cells get 0 in the gradebook, the
# notebook is flagged and the reason is the auto comment of its solution cells, and no autograded/ copy is left
# for generate_feedback to render. Nothing a student wrote stops the loop over their classmates. What the rules
# accept is nbgrader's own cell metadata schema (nbgraderformat/v3.json), which its own autograde enforces.

MAX_STAMP_BYTES = limits.NBGRADER_STAMP_BYTES  # timestamp.txt: one line ("2026-01-01 12:00:00.000000 UTC")
MAX_STUDENT_ID = limits.NBGRADER_STUDENT_ID  # nbgrader's Student.id column, String(128)
MAX_SHOWN = limits.NBGRADER_SHOWN_CHARS  # characters of a student's value quoted in a reason
CELL_TYPES = ("code", "markdown", "raw")
FLAGS = ("grade", "solution", "locked", "task")
GRADE_ID = re.compile(r"[A-Za-z0-9_\-]{0,128}")  # nbgrader's schema: ^[a-zA-Z0-9_\-]*$
# a timestamp as nbgrader writes it (date, time, zone name or offset); the zone is a name, never a path, because
# dateutil.tz.gettz opens a file named by an absolute zone
STAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}[ T][0-9:.]{1,20}Z?( ?[+-][0-9:]{1,6})?"
                   r"( [A-Za-z][A-Za-z0-9_+\-]{0,40}(/[A-Za-z0-9_+\-]{1,40}){0,3}| [+-]?[0-9]{1,5})?")
ERROR_COMMENT = "attn-kata autograde: not graded: "


class StudentError(Exception):
    """What one student submitted cannot be graded; the message is the reason, in words."""


@dataclass
class Graded:
    student: str
    notebook: str
    report: Any  # grader.report.Report; None when `error` says why it was not graded
    error: str = ""


def _shown(text: str) -> str:
    """A student's name or value as one line of text: bytes that are not UTF-8 as `\\xff`, controls escaped."""
    with contextlib.suppress(UnicodeEncodeError):  # a surrogate that is no file-system byte: escaped below
        text = shown(text)
    text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "…"


def _value(v: Any) -> str:
    return _shown(repr(v))


@contextlib.contextmanager
def quiet_nbgrader() -> Iterator[None]:
    """nbgrader's API under SQLAlchemy 2 warns (SAWarning: "Object of type <SubmittedAssignment> not in session,
    add operation along 'Student.submissions' will not proceed", from nbgrader.api) on every submission it
    creates, and SQLAlchemy's deprecations of what nbgrader.api uses: those, from nbgrader's modules only, are
    kept out of the instructor's terminal; every other warning still shows."""
    with warnings.catch_warnings():
        try:
            from sqlalchemy.exc import SADeprecationWarning, SAWarning
        except ImportError:  # pragma: no cover - nbgrader requires SQLAlchemy
            yield
            return
        for category in (SAWarning, SADeprecationWarning):
            warnings.filterwarnings("ignore", category=category, module=r"nbgrader\.")
        yield


def _read_bounded(path: Path, limit: int) -> bytes:
    """A student's file, opened without following a link or blocking on a FIFO, of at most `limit` bytes."""
    name = _shown(path.name)
    try:
        fd = open_no_follow(path)
    except FileNotFoundError:
        raise StudentError(f"{name} is missing") from None
    except OSError as exc:
        if path.is_symlink():
            raise StudentError(f"{name} is a symbolic link: not read") from None
        raise StudentError(f"{name} could not be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise StudentError(f"{name} is not a regular file")
        if st.st_size > limit:
            raise StudentError(f"{name} is {st.st_size} bytes; the limit is {limit}")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise StudentError(f"{name} is over {limit} bytes")
    return data


def student_id(name: str) -> str:
    """A submitted/ folder's name as nbgrader's student id, or StudentError."""
    if len(name) > MAX_STUDENT_ID:
        raise StudentError(f"the folder name is {len(name)} characters; nbgrader's student ids hold {MAX_STUDENT_ID}")
    if not name.isprintable():  # a newline, a tab, a control, a byte that is not UTF-8 (a lone surrogate)
        raise StudentError("the folder name holds characters a student id cannot (controls or bytes that are not "
                           "UTF-8)")
    return name


def read_timestamp(sdir: Path) -> Any:
    """timestamp.txt as nbgrader's parse_utc reads it (a naive UTC datetime), None when there is none or it is
    empty (nbgrader's own autograde warns and goes on); StudentError when it is not a timestamp."""
    from nbgrader.utils import parse_utc

    path = sdir / "timestamp.txt"
    if not path.exists() and not path.is_symlink():
        return None
    data = _read_bounded(path, MAX_STAMP_BYTES)
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise StudentError("timestamp.txt is not UTF-8 text") from None
    if not text:
        return None
    if not STAMP.fullmatch(text):
        raise StudentError(f"timestamp.txt is not a timestamp: {_value(text)}")
    try:
        return parse_utc(text)
    except (ValueError, OverflowError, TypeError, LookupError) as exc:
        raise StudentError(f"timestamp.txt is not a timestamp nbgrader can read: {_value(text)} "
                           f"({type(exc).__name__})") from None


def _check_cell(i: int, cell: Any) -> None:
    """One cell against nbgrader's schema, for every field this module reads (and feedback later renders)."""
    if not isinstance(cell, dict):
        raise StudentError(f"cell {i} is not an object")
    if cell.get("cell_type") not in CELL_TYPES:
        raise StudentError(f"cell {i}'s cell_type is {_value(cell.get('cell_type'))}, not code, markdown or raw")
    meta = cell.get("metadata", {})
    if not isinstance(meta, dict):
        raise StudentError(f"cell {i}'s metadata is not an object")
    nbg = meta.get("nbgrader", {})
    if not isinstance(nbg, dict):
        raise StudentError(f"cell {i}'s nbgrader metadata is not an object")
    src = cell.get("source", "")
    if not (isinstance(src, str) or (isinstance(src, list) and all(isinstance(x, str) for x in src))):
        raise StudentError(f"cell {i}'s source is not text")
    for flag in FLAGS:
        if flag in nbg and not isinstance(nbg[flag], bool):
            raise StudentError(f"cell {i}'s nbgrader {flag} is {_value(nbg[flag])}, not true or false")
    if "grade_id" in nbg:
        gid = nbg["grade_id"]
        if not isinstance(gid, str):
            raise StudentError(f"cell {i}'s nbgrader grade_id is {_value(gid)}, not a string")
        if not GRADE_ID.fullmatch(gid):
            raise StudentError(f"cell {i}'s nbgrader grade_id {_value(gid)} is not letters, digits, _ and - "
                               f"(at most 128)")
    if "points" in nbg:
        pts = nbg["points"]
        if isinstance(pts, bool) or not isinstance(pts, (int, float)) or not math.isfinite(pts) or pts < 0:
            raise StudentError(f"cell {i}'s nbgrader points is {_value(pts)}, not a number of points")
    if "cell_type" in nbg and nbg["cell_type"] not in CELL_TYPES:
        raise StudentError(f"cell {i}'s nbgrader cell_type is {_value(nbg['cell_type'])}")


def load_notebook(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A submitted notebook and its cells, every cell checked (`_check_cell`); StudentError says what is wrong."""
    data = _read_bounded(path, MAX_NOTEBOOK_BYTES)
    name = _shown(path.name)
    try:
        nb = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise StudentError(f"{name} is not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise StudentError(f"{name} is not JSON ({type(exc).__name__}: {_shown(str(exc))})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise StudentError(f"{name} is not an nbformat 4 notebook (no list of cells)")
    cells = nb["cells"]
    if not isinstance(nb.get("metadata", {}), dict):
        raise StudentError(f"{name}'s metadata is not an object")
    for i, cell in enumerate(cells, start=1):
        _check_cell(i, cell)
    return nb, cells


def read_notebook(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """`load_notebook`, or (None, []) when it is missing or malformed in any way."""
    try:
        return load_notebook(path)
    except StudentError:
        return None, []


def _is_test_cell(cell: dict[str, Any]) -> bool:
    nb = (cell.get("metadata") or {}).get("nbgrader") or {}
    return bool(nb.get("grade")) and not nb.get("solution") and cell.get("cell_type") == "code"


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _graded_notebook(cells: list[dict[str, Any]]) -> str:
    """The notebook the engine grades: the student's code cells but the test cells, bounded as the engine bounds
    a notebook (so a bomb is refused before anything parses it), each made unable to call back into the grader."""
    sources = [_source(c) for c in cells if c.get("cell_type") == "code" and not _is_test_cell(c)]
    if len(sources) > MAX_CODE_CELLS:
        raise StudentError(f"the notebook has {len(sources)} code cells; the limit is {MAX_CODE_CELLS}")
    size = sum(len(s.encode("utf-8", "surrogatepass")) for s in sources)
    if size > MAX_SOURCE_BYTES:
        raise StudentError(f"the notebook's code is {size} bytes; the limit is {MAX_SOURCE_BYTES}")
    try:
        return notebook_json(sources)
    except (ValueError, RecursionError, MemoryError) as exc:  # ast.parse: a NUL byte (3.11), nesting too deep
        raise StudentError(f"a code cell cannot be read as Python ({type(exc).__name__}: "
                           f"{_shown(str(exc))})") from None


def _result_outputs(sr: Any) -> list[dict[str, Any]]:
    """What nbgrader's own autograde would leave in the test cell, for feedback."""
    text = failure_text(sr)
    if sr.score <= 0:
        return [{"output_type": "error", "ename": "AssertionError", "evalue": text, "traceback": [text]}]
    outs: list[dict[str, Any]] = []
    if sr.status != "passed":
        outs.append({"output_type": "stream", "name": "stdout", "text": text + "\n"})
    outs.append({"output_type": "execute_result", "execution_count": None, "metadata": {},
                 "data": {"text/plain": f"{round(float(sr.score), 4)}"}})
    return outs


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _special_files(folder: str, names: list[str]) -> list[str]:
    """copytree's ignore: what is neither a folder, a regular file nor a link."""
    def special(name: str) -> bool:
        try:
            mode = os.lstat(os.path.join(folder, name)).st_mode
        except OSError:
            return True
        return not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode))

    return [n for n in names if special(n)]


def _record(gb: Any, nb_record: Any, assignment: str, student: str, by_step: dict[str, Any],
            error: str = "") -> None:
    """Each grade cell's score into the gradebook; with `error`, our zero on every grade cell, the notebook
    flagged and the reason as its solution cells' auto comment (formgrader shows it); a later clean run takes
    back the flag and the comments this module left, and nothing the instructor wrote."""
    from nbgrader.api import MissingEntry

    nb_name = nb_record.name
    for cell in nb_record.grade_cells:
        try:
            g = gb.find_grade(cell.name, nb_name, assignment, student)
        except MissingEntry:
            continue
        sid = cell.name[len(TEST_PREFIX):] if cell.name.startswith(TEST_PREFIX) else None
        if not error and sid in by_step:
            g.auto_score = float(by_step[sid].score)
            g.needs_manual_grade = False
        elif error or sid in BY_ID:  # our cell, but no result: zero
            g.auto_score = 0.0
            g.needs_manual_grade = False
    ours = False
    for cell in nb_record.solution_cells:
        try:
            c = gb.find_comment(cell.name, nb_name, assignment, student)
        except MissingEntry:
            continue
        if error:
            c.auto_comment = ERROR_COMMENT + error
        elif (c.auto_comment or "").startswith(ERROR_COMMENT):
            c.auto_comment, ours = None, True
    with contextlib.suppress(MissingEntry):
        sub_nb = gb.find_submission_notebook(nb_name, assignment, student)
        if error:
            sub_nb.flagged = True
        elif ours:
            sub_nb.flagged = False
    gb.db.commit()


def autograde_course(course_dir: str | Path, assignment: str, *, students: Iterable[str] | None = None,
                     db_url: str | None = None, secret: str | None = None,
                     timeout: float | None = None) -> list[Graded]:
    """Grade submitted/<student>/<assignment>/*.ipynb with the engine; scores go to nbgrader's gradebook. One
    entry per student and notebook of ours: a report, or the reason it was not graded (`Graded.error`)."""
    with quiet_nbgrader():
        from nbgrader.api import Gradebook

        course = Path(course_dir).resolve()
        db_url = db_url or f"sqlite:///{course / 'gradebook.db'}"
        submitted = course / "submitted"
        wanted = set(students) if students else None
        done: list[Graded] = []
        with Gradebook(db_url) as gb:
            source_nbs = list(gb.find_assignment(assignment).notebooks)
            for sdir in sorted(p for p in submitted.glob(f"*/{assignment}") if p.is_dir()):
                name = sdir.parent.name
                if wanted is not None and name not in wanted:
                    continue
                try:
                    student = student_id(name)
                except StudentError as exc:  # not a name the gradebook can hold: named here only
                    done.append(Graded(_shown(name), "", None, f"{exc}; nothing recorded in the gradebook"))
                    continue
                done += _autograde_student(gb, course, assignment, student, sdir, source_nbs,
                                           secret=secret, timeout=timeout)
    return done


def _autograde_student(gb: Any, course: Path, assignment: str, student: str, sdir: Path, source_nbs: list[Any],
                       *, secret: str | None, timeout: float | None) -> list[Graded]:
    from grader.grading.engine import DEFAULT_TIMEOUT, grade

    ours = []  # (notebook record, its steps): the notebooks with a test cell of ours
    for nb_record in source_nbs:
        step_ids = [c.name[len(TEST_PREFIX):] for c in nb_record.grade_cells
                    if c.name.startswith(TEST_PREFIX) and c.name[len(TEST_PREFIX):] in BY_ID]
        if step_ids:
            ours.append((nb_record, step_ids))
    gb.update_or_create_student(student)
    dest = course / "autograded" / student / assignment
    if dest.exists() or dest.is_symlink():
        _remove(dest)
    try:
        stamp = read_timestamp(sdir)
        dest.parent.mkdir(parents=True, exist_ok=True)
        # a link is copied as a link, never followed; a FIFO, a socket or a device is left out (copying would fail,
        # or block); the notebook's own check then names what it is
        shutil.copytree(sdir, dest, symlinks=True, ignore=_special_files)
    except (StudentError, OSError, shutil.Error) as exc:  # the whole submission: as nbgrader, nothing autograded
        if isinstance(exc, StudentError):
            reason = str(exc)
        elif isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
            first = exc.args[0][0]  # (source, destination, why) of the first file that failed
            reason = (f"the submission folder could not be copied ({_shown(Path(str(first[0])).name)}: "
                      f"{_shown(str(first[-1]))})")
        else:
            reason = f"the submission folder could not be copied ({type(exc).__name__}: {_shown(str(exc))})"
        gb.update_or_create_submission(assignment, student)
        if dest.exists() or dest.is_symlink():
            _remove(dest)
        for nb_record, _steps in ours:
            _record(gb, nb_record, assignment, student, {}, reason)
        return [Graded(student, nb_record.name, None, reason) for nb_record, _steps in ours]
    if stamp is not None:
        gb.update_or_create_submission(assignment, student, timestamp=stamp)
    else:
        gb.update_or_create_submission(assignment, student)
    out: list[Graded] = []
    for nb_record, step_ids in ours:
        nb_name = nb_record.name
        nb_path = sdir / f"{nb_name}.ipynb"
        try:
            if not (nb_path.exists() or nb_path.is_symlink()):
                others = sorted(_shown(p.name) for p in sdir.glob("*.ipynb"))[:5]
                raise StudentError(f"{_shown(nb_path.name)} is missing"
                                   + (f" (the folder holds {', '.join(others)})" if others else ""))
            nb, cells = load_notebook(nb_path)
            graded_nb = _graded_notebook(cells)
        except StudentError as exc:  # that student's zero, flagged with the reason; no one else's
            reason = str(exc)
            _remove(dest / f"{nb_name}.ipynb")
            _record(gb, nb_record, assignment, student, {}, reason)
            out.append(Graded(student, nb_name, None, reason))
            continue
        with tempfile.TemporaryDirectory(prefix="attn-kata-ag-") as tmp:
            tmp_nb = Path(tmp) / f"{nb_name}.ipynb"
            tmp_nb.write_text(graded_nb, encoding="utf-8")
            report = grade(tmp_nb, steps=step_ids, secret=secret, timeout=timeout or DEFAULT_TIMEOUT)
        by_step = {s.id: s for s in report.steps}
        _record(gb, nb_record, assignment, student, by_step)
        _write_autograded(dest / f"{nb_name}.ipynb", nb, gb, nb_name, assignment, by_step)
        out.append(Graded(student, nb_name, report))
    return out


CELL_ID = re.compile(r"[A-Za-z0-9_\-]{1,64}")  # nbformat 4.5's cell id


def _cell_ids(nb: dict[str, Any]) -> None:
    """Cell ids where nbformat 4.5 wants them (a missing, malformed or repeated one replaced, as nbformat's
    normalize() does), so that generate_feedback reads the autograded copy without a MissingIDFieldWarning."""
    if not (nb.get("nbformat") == 4 and isinstance(nb.get("nbformat_minor"), int) and nb["nbformat_minor"] >= 5):
        return
    taken = {c.get("id") for c in nb["cells"] if isinstance(c.get("id"), str)}  # once: linear in the cells
    seen: set[str] = set()
    for i, cell in enumerate(nb["cells"]):
        cid = cell.get("id")
        if not (isinstance(cid, str) and CELL_ID.fullmatch(cid)) or cid in seen:
            cid = f"attn-kata-{i}"
            while cid in taken:
                cid += "x"
            cell["id"] = cid
            taken.add(cid)
        seen.add(cid)


def _write_autograded(path: Path, nb: dict[str, Any], gb: Any, nb_name: str, assignment: str,
                      by_step: dict[str, Any]) -> None:
    """autograded/ copy for generate_feedback: test cells restored from the source, outputs = our verdicts."""
    from nbgrader.api import MissingEntry

    for cell in nb.get("cells", []):
        if not _is_test_cell(cell):
            continue
        gid = cell["metadata"]["nbgrader"].get("grade_id", "")  # a string: load_notebook checked every cell
        with contextlib.suppress(MissingEntry):
            cell["source"] = gb.find_source_cell(gid, nb_name, assignment).source
        sid = gid[len(TEST_PREFIX):] if gid.startswith(TEST_PREFIX) else None
        if sid in by_step:
            cell["outputs"] = _result_outputs(by_step[sid])
    _cell_ids(nb)
    _remove(path)  # a link the student left in its place is replaced, never written through
    # "\ud800" in the student's JSON is a lone surrogate, which UTF-8 cannot encode: written as U+FFFD
    path.write_text(without_surrogates(json.dumps(nb, ensure_ascii=False, indent=1)) + "\n", encoding="utf-8")
