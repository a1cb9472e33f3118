"""One discovery for batch, Gradescope and `grade`: what each student uploaded, and who they are.

Rules (docs/design.md):
- only regular files are ever candidates: a symbolic link, a FIFO, a device or a socket is never opened
  (lstat, never stat), so nothing in a class folder can block or redirect discovery;
- a student's identity comes from the upload's own name (their folder, their file, their archive, or the
  member of a class export that is theirs), never from a name inside their upload;
- a zip is a class export (split into one entry per student inside) only when the instructor made it one: it is
  DIR's one upload, or its own name is an export's (`submissions.zip`, `gradebook_...`, `canvas_export.zip`), and
  it is not named like one student's upload (`smithalice_1_2_x.zip`), and it holds two or more LMS-named
  uploads; any other zip is one student's upload, so a student's zip never gives rows under classmates' names;
- a student's identity is the name NFC-normalised and case-folded (`identity`): two uploads whose names differ
  only in case or in Unicode normalisation (NFC and NFD spellings of José) are two students of the same name, as an
  LMS import that normalises names sees them. Every entry's student name is unique by that identity: a repeated
  name gets ` (n)`, n the first that no other upload's name is (a student may be called `bob (2)`), and its reports
  and feedback files follow; the names that collided are listed (`collisions`) in the run's output;
- every name shown (student, source) is one line of printable text (`label`): control characters, CR, LF and tab
  included, are written as escapes (`\\x0a`), so no spreadsheet, importer or terminal acts on them;
- a workspace (a folder of step files like `exercises/`: grader.submission's one rule) is found at any depth;
  otherwise one notebook, else one module, else one archive; two candidates of the same kind are reported as
  ambiguous, not guessed;
- archives are extracted under a budget shared by everything one student uploaded (nested archives
  included), into a staging folder the batch removes at the end; any file-system error while extracting (a member
  both a file and a folder, a name too long) rejects that one upload, never the class;
- names are taken from the file system as bytes may be: what is shown (student, source, reasons) has bytes that are
  not UTF-8 escaped (`\\xff`), while the real path is what is opened;
- the batch's own output (OUT, or its `reports`/`feedback` when OUT is the class folder) is never a submission.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import unicodedata
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import limits
from grader.files import open_no_follow
from grader.grading.ingest import MAX_NOTEBOOK_BYTES, shown
from grader.i18n import _
from grader.submission import is_workspace, kind

SUFFIXES = (".py", ".ipynb")
IGNORED_DIRS = {"__pycache__", ".ipynb_checkpoints", ".attn-kata", "__MACOSX", ".git"}
# one student's budget, across every archive they uploaded (nested ones included)
MAX_MEMBERS = limits.ARCHIVE_MEMBERS
MAX_MEMBER_BYTES = limits.ARCHIVE_MEMBER_BYTES
MAX_TOTAL_BYTES = limits.ARCHIVE_TOTAL_BYTES
MAX_RATIO = limits.ARCHIVE_RATIO  # uncompressed / compressed, for archives that expand past 1 MiB
MAX_ZIP_DEPTH = limits.ARCHIVE_DEPTH  # an LMS export may hold one zip per student, which may hold one more
MAX_DEPTH = limits.UPLOAD_SEARCH_DEPTH  # how deep a workspace or a notebook is looked for inside one upload
OUTPUTS = ("reports", "feedback")  # the folders a batch writes into OUT (grader.instructor.batch)
HASHED_BYTES = MAX_NOTEBOOK_BYTES + 1  # of a file, at most what ingest ever reads (past its cap, it rejects)

# statuses of an entry that is not graded (and "graded"); the gradebook's status column
GRADED = "graded"
EMPTY = "empty"
UNREADABLE = "unreadable"
TOO_LARGE = "too_large"
OVER_BUDGET = "over_budget"
REJECTED = "rejected"  # unsafe archive, symbolic link, not a regular file
AMBIGUOUS = "ambiguous"
ERROR = "error"  # the grader's own failure: never a score


@dataclass
class Entry:
    """One submission found in DIR: what to grade, or why it cannot be."""

    student: str
    source: str  # where it came from, relative to DIR (zip members as archive.zip/member)
    path: Path | None = None  # what engine.grade gets
    rejected: str = ""  # the reason, when it is not graded at all
    content_hash: str = ""
    slug: str = ""  # file-name-safe unique name for reports/feedback
    key: str = ""
    status: str = ""  # set when it is not graded (one of the statuses above)
    given: str = ""  # the name its upload gave, before name_entries made it unique ("" until then)


@dataclass
class Found:
    """Where a submission is inside one upload, or why none can be picked."""

    path: Path | None
    status: str = ""
    reason: str = ""


class UnsafeArchive(Exception):
    pass


@dataclass
class Budget:
    """What one student's archives may write, all together."""

    total: int = MAX_TOTAL_BYTES
    members: int = MAX_MEMBERS
    used: int = 0
    count: int = 0
    staged: list[Path] = field(default_factory=list)


LMS_NAME = re.compile(r"^(.+?)_(?:late_|LATE_)?\d+_")
# an export's own name: Canvas's and Gradescope's submissions.zip, Blackboard's gradebook_COURSE_..., or what an
# instructor calls one (canvas_export.zip, moodle.zip); words that are nobody's name
EXPORT_NAME = re.compile(r"(?:^|[^a-z])(?:exports?|submissions|gradebook|canvas|moodle|blackboard|gradescope)"
                         r"(?:[^a-z]|$)")


def student_name(name: str) -> str:
    """The student in an LMS export's file name (Canvas `smithalice_123_456_x.ipynb`,
    Moodle `Alice Smith_123_assignsubmission_file_`), or the name without its suffix."""
    stem = name
    for suf in (*SUFFIXES, ".zip"):
        if stem.lower().endswith(suf):
            stem = stem[: -len(suf)]
            break
    m = LMS_NAME.match(stem + "_")
    return (m.group(1) if m else stem).strip() or stem


# what a terminal, a spreadsheet or a line-based importer (which splits rows on CR and LF) may act on rather than
# show: every C0 control (tab, CR and LF included), DEL, C1, the bidi controls, the Unicode line and paragraph
# separators, and lone surrogates (a file name that is not UTF-8), which UTF-8 cannot even write
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def escape_controls(text: str) -> str:
    """`text` as one line of printable text: every control character written as an escape (`\\x0a`, `\\u202e`)."""
    if text.isascii() and text.isprintable():
        return text
    return _CONTROL.sub(_escape, text)


def label(name: str) -> str:
    """A name from the file system as every output shows it: bytes that are not UTF-8 as `\\xff` (ingest.shown),
    control characters as escapes, the whole NFC-normalised (one spelling of José, whatever the uploader's OS)."""
    return unicodedata.normalize("NFC", escape_controls(shown(name)))


def identity(name: str) -> str:
    """Who a name says a student is: NFC-normalised and case-folded (`José`, `JOSE\u0301` and `josé` are one)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def spelled(name: str) -> str:
    """`name` with what makes two look-alike spellings differ made visible: a name that is not NFC (José typed
    as e + U+0301) shows its combining marks as escapes (`Jose\\u0301`); an NFC name as it is."""
    if unicodedata.is_normalized("NFC", name):
        return name
    return "".join(f"\\u{ord(c):04x}" if unicodedata.combining(c) else c for c in name)


def slugify(name: str) -> str:
    s = re.sub(r"[^\w.\- ]+", "_", name, flags=re.UNICODE).strip(" .")
    return s[:80] or "submission"


def walk(p: Path, depth: int = MAX_DEPTH) -> Iterator[tuple[Path, str]]:
    """(path, kind) of everything under p, never following a link, skipping editor and cache folders."""
    try:
        children = sorted(p.iterdir())
    except OSError:
        return
    for c in children:
        if c.name in IGNORED_DIRS or c.name.startswith("."):
            continue
        k = kind(c)
        yield c, k
        if k == "dir" and depth > 0:
            yield from walk(c, depth - 1)


def locate(folder: Path, staging: Path | None = None, budget: Budget | None = None, depth: int = 0) -> Found:
    """The submission inside one student's upload (a folder): the shallowest workspace, else the one
    notebook, else the one module, else the one archive (extracted into `staging` when given)."""
    items = list(walk(folder))
    links = [p for p, k in items if k == "link"]
    if links:
        return Found(None, REJECTED, _("contains a symbolic link ({path})").format(
            path=shown(str(links[0].relative_to(folder)))))
    if is_workspace(folder):
        return Found(folder)
    dirs = [p for p, k in items if k == "dir" and is_workspace(p)]
    if dirs:
        top = min(len(d.relative_to(folder).parts) for d in dirs)
        shallow = [d for d in dirs if len(d.relative_to(folder).parts) == top]
        if len(shallow) > 1:
            return Found(None, AMBIGUOUS, _("several workspaces: {paths}").format(paths=", ".join(
                shown(str(d.relative_to(folder))) for d in shallow[:4])))
        return Found(shallow[0])
    files = [p for p, k in items if k == "file"]
    for suffix in (".ipynb", ".py", ".zip"):
        hits = [f for f in files if f.suffix.lower() == suffix]
        if len(hits) > 1:
            return Found(None, AMBIGUOUS, _("several {suffix} files: {paths}").format(suffix=suffix, paths=", ".join(
                shown(str(f.relative_to(folder))) for f in hits[:4])))
        if hits and suffix != ".zip":
            return Found(hits[0])
        if hits:
            if staging is None:
                return Found(None, REJECTED,
                             _("an archive ({name}): upload its files instead").format(name=shown(hits[0].name)))
            return open_archive(hits[0], staging, budget or Budget(), depth)
    return Found(None, EMPTY, _("no .py or .ipynb file"))


def open_archive(archive: Path, staging: Path, budget: Budget, depth: int = 0) -> Found:
    """Extract one student's archive (within their budget) and locate the submission inside it."""
    if depth >= MAX_ZIP_DEPTH:
        return Found(None, REJECTED, _("an archive nested too deep"))
    dest = staging / hashlib.sha256(os.fsencode(archive)).hexdigest()[:16]
    shutil.rmtree(dest, ignore_errors=True)
    budget.staged.append(dest)
    try:
        safe_extract(archive, dest, budget)
    except UnsafeArchive as exc:
        shutil.rmtree(dest, ignore_errors=True)
        return Found(None, REJECTED, _("unsafe or unreadable archive: {reason}").format(reason=exc))
    return locate(dest, staging, budget, depth + 1)


def safe_extract(archive: Path, dest: Path, budget: Budget | None = None) -> None:
    """Extract a zip into dest, or raise UnsafeArchive: traversal, absolute names, symlinks,
    encryption, too many members, too large, too compressed. Sizes are counted as bytes are
    written, not taken from the headers (which a bomb can fake), against `budget` (one student's)."""
    budget = budget or Budget()
    try:
        raw = open(read_fd(archive), "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise UnsafeArchive(_("not a readable zip archive ({error})").format(error=exc)) from None
    with raw:
        try:
            zf = zipfile.ZipFile(raw)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise UnsafeArchive(_("not a readable zip archive ({error})").format(error=exc)) from None
        with zf:
            _extract(zf, dest, budget)


def _extract(zf: zipfile.ZipFile, dest: Path, budget: Budget) -> None:
    infos = zf.infolist()
    budget.count += len(infos)
    if budget.count > budget.members:
        raise UnsafeArchive(_("{n} members; the limit is {limit}").format(n=budget.count, limit=budget.members))
    packed = sum(i.compress_size for i in infos)
    for info in infos:
        name = info.filename
        mode = info.external_attr >> 16
        parts = name.replace("\\", "/").split("/")
        if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in parts or "\x00" in name:
            raise UnsafeArchive(_("member {name} points outside the archive (path traversal)").format(name=repr(name)))
        if stat.S_ISLNK(mode):
            raise UnsafeArchive(_("member {name} is a symbolic link").format(name=repr(name)))
        if info.flag_bits & 0x1:
            raise UnsafeArchive(_("member {name} is encrypted").format(name=repr(name)))
    try:
        root = dest.resolve()
        dest.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError) as exc:
        raise UnsafeArchive(_("could not be extracted ({error})").format(error=_why(exc))) from None
    total = 0
    for info in infos:
        written = 0
        try:  # every file-system call: a member that is both a file and a folder, a name too long, a full disk
            target = (dest / info.filename.replace("\\", "/")).resolve()
            if root != target and root not in target.parents:
                raise UnsafeArchive(_("member {name} points outside the archive (path traversal)").format(
                    name=repr(info.filename)))
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                while chunk := src.read(1 << 16):
                    written += len(chunk)
                    total += len(chunk)
                    budget.used += len(chunk)
                    if written > MAX_MEMBER_BYTES:
                        raise UnsafeArchive(_("member {name} expands past {limit} bytes").format(
                            name=repr(info.filename), limit=MAX_MEMBER_BYTES))
                    if budget.used > budget.total:
                        raise UnsafeArchive(_("the upload expands past {limit} bytes (zip bomb?)").format(
                            limit=budget.total))
                    if total > (1 << 20) and total > MAX_RATIO * max(packed, 1):
                        raise UnsafeArchive(_("the archive expands more than {ratio}x (zip bomb?)").format(
                            ratio=MAX_RATIO))
                    dst.write(chunk)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
            raise UnsafeArchive(_("member {name} could not be extracted ({error})").format(
                name=repr(info.filename[:100]), error=_why(exc))) from None


def _why(exc: BaseException) -> str:
    """An error in a few words, without the staging folder's path (which is the grader's, not the student's)."""
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc))[:200]


def read_fd(path: Path) -> int:
    fd = open_no_follow(path)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(_("{name} is not a regular file").format(name=path.name))
    return fd


def unwrap(p: Path) -> Path:
    """An archive that holds a single folder: look inside it."""
    while True:
        kids = [c for c in p.iterdir() if c.name not in IGNORED_DIRS and not c.name.startswith(".")]
        if len(kids) == 1 and kind(kids[0]) == "dir" and not is_workspace(p):
            p = kids[0]
        else:
            return p


def upload(student: str, source: str, path: Path, staging: Path) -> Entry:
    """Exactly one entry for one student's upload (a folder, a file or an archive), named by the upload."""
    student, source = label(student), escape_controls(shown(source))  # source: the real spelling, one line
    k = kind(path)
    if k == "link":
        return Entry(student, source, rejected=_("is a symbolic link"), status=REJECTED)
    if k == "other":
        return Entry(student, source, rejected=_("is not a regular file"), status=REJECTED)
    if k == "file" and path.suffix.lower() == ".zip":
        found = open_archive(path, staging, Budget())
    elif k == "file":
        found = Found(path)
    else:
        found = locate(path, staging, Budget())
    if found.path is None:
        return Entry(student, source, rejected=found.reason, status=found.status)
    inner = source
    if path not in (found.path, *found.path.parents):  # inside an archive: name the member it found
        inner = f"{source}/{escape_controls(shown(found.path.name))}" if kind(found.path) == "file" else source
    elif found.path != path:
        inner = f"{source}/{escape_controls(shown(str(found.path.relative_to(path))))}"
    return Entry(student, inner, found.path)


def _export_members(archive: Path, staging: Path, alone: bool) -> list[Path] | None:
    """A class export (DIR's one upload, `alone`, or named as an export; not named like one student's upload;
    holding the uploads of two or more students named by the LMS): its members, one per student. None when it is
    one student's archive: what a student names her zip, and puts in it, never makes rows for her classmates."""
    stem = archive.name.rsplit(".", 1)[0]
    if LMS_NAME.match(stem + "_"):
        return None  # named after its student: whatever is inside is theirs
    if not alone and not EXPORT_NAME.search(stem.lower()):
        return None  # beside other uploads, a zip named like a person (mallory.zip) is that person's
    dest = staging / ("export-" + hashlib.sha256(os.fsencode(archive)).hexdigest()[:16])
    shutil.rmtree(dest, ignore_errors=True)
    try:
        safe_extract(archive, dest, Budget(total=8 * MAX_TOTAL_BYTES, members=8 * MAX_MEMBERS))
        inner = unwrap(dest)
        kids = [c for c in sorted(inner.iterdir()) if c.name not in IGNORED_DIRS and not c.name.startswith(".")]
    except (UnsafeArchive, OSError):
        shutil.rmtree(dest, ignore_errors=True)
        return None  # reported as that upload's problem (extracted again as one student's, and rejected)
    named = {student_name(c.name) for c in kids if LMS_NAME.match(c.name + "_")}
    if is_workspace(inner) or len(named) < 2:
        shutil.rmtree(dest, ignore_errors=True)
        return None
    return kids


def discover(directory: str | Path, staging: str | Path) -> list[Entry]:
    """Every submission in DIR, one entry per upload: student folders, loose .py/.ipynb files, students'
    archives, and LMS class exports (one entry per student inside)."""
    root = Path(directory)
    real = root.resolve()
    staging = Path(staging).resolve()
    skip = {staging, staging.parent}  # the batch's OUT, when it is inside DIR
    if staging.parent == real:  # OUT is DIR itself: what the batch wrote there is not a student
        skip.update(real / name for name in OUTPUTS)
    uploads = [c for c in sorted(root.iterdir()) if _is_upload(c, real, skip)]
    out: list[Entry] = []
    for c in uploads:
        if kind(c) == "file" and c.suffix.lower() == ".zip" and (
                members := _export_members(c, staging, alone=len(uploads) == 1)) is not None:
            for m in members:
                out.append(upload(student_name(m.name), f"{c.name}/{m.name}", m, staging))
            continue
        out.append(upload(student_name(c.name), c.name, c, staging))
    name_entries(out)
    return out


def _is_upload(c: Path, real: Path, skip: set[Path]) -> bool:
    # DIR's own entries, compared by name: resolve() on an entry would follow a link (or fail on a loop)
    if c.name in IGNORED_DIRS or c.name.startswith(".") or real / c.name in skip:
        return False
    # notes.txt, a stray socket: not an upload; a folder or a link of any name is one
    return kind(c) not in ("file", "other") or c.suffix.lower() in (*SUFFIXES, ".zip")


def name_entries(entries: list[Entry]) -> None:
    """A unique student name and slug for every entry, unique by `identity` (case and Unicode normalisation aside:
    an LMS import may ignore both). A repeated name gets ` (n)`, n the first that leaves both unique: not only among
    the same name's repeats but among every upload's own name (`bob (2).py` is somebody's), so two rows never share
    a name. Uploads are in sorted order, so the same folder always gives the same names. The slug (reports/feedback
    file names) carries the same n, so `bob (3)`'s feedback is `bob (3).txt`; a slug's base has no parentheses,
    so a suffixed slug never meets a plain one. Each entry keeps the name its upload gave (`given`)."""
    names = {identity(e.student) for e in entries}
    used: set[str] = set()
    slugs: set[str] = set()
    for e in entries:
        e.given = e.given or e.student
        base, n = slugify(e.student), 1
        while True:
            student = e.student if n == 1 else f"{e.student} ({n})"
            slug = base if n == 1 else f"{base} ({n})"
            if (n == 1 or identity(student) not in names) and identity(student) not in used \
                    and identity(slug) not in slugs:
                break
            n += 1
        e.student, e.slug = student, slug
        used.add(identity(student))
        slugs.add(identity(slug))


def collisions(entries: list[Entry]) -> list[list[Entry]]:
    """The uploads whose own names are one student's (by `identity`), each group in order: what the run's output
    lists, so that an instructor sees which rows got a suffix and why."""
    groups: dict[str, list[Entry]] = {}
    for e in entries:
        groups.setdefault(identity(e.given or e.student), []).append(e)
    return [g for g in groups.values() if len(g) > 1]


def content_hash(path: Path) -> str:
    """What identifies a submission's content in the index (regular files only, read in chunks without
    blocking): of each file, at most what ingest ever reads, and the size of one longer (which ingest rejects),
    so a huge or sparse file costs neither time nor memory and a change to it still changes the hash."""
    h = hashlib.sha256()
    if kind(path) == "dir":
        h.update(b"dir\0")  # a folder and a file never hash alike, whatever their names and bytes
        for f, k in sorted(walk(path)):
            if k != "file" or f.suffix not in SUFFIXES:
                continue
            h.update(os.fsencode(f.relative_to(path)) + b"\0")
            h.update(_feed(f, hashlib.sha256()).digest())
    else:
        # a .py file's name is in its report (its messages cite `name.py, line 9`): two students' identical files
        # share a report only when their names match too (red team 11: a copy named to sort first put its name in
        # the original's feedback); a notebook's cells are `cell N` whatever its name
        h.update(b"file\0" + os.fsencode(path.name if path.suffix == ".py" else path.suffix) + b"\0")
        _feed(path, h)
    return h.hexdigest()


def _feed(path: Path, h: Any) -> Any:
    with open(read_fd(path), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        left = HASHED_BYTES
        while left > 0 and (chunk := f.read(min(1 << 20, left))):
            h.update(chunk)
            left -= len(chunk)
        if size > HASHED_BYTES:  # read no further (ingest will not): the size stands for the rest
            h.update(b"\0size\0%d" % size)
    return h
