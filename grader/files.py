"""Writing what the grader produces (reports, gradebooks, results.json, zips): one way, for every writer.

- A target that exists and is not a regular file (a device such as /dev/full, a FIFO, a folder) is refused, never
  replaced: run as root, `os.replace` over /dev/full made it a regular file. A symbolic link is replaced itself,
  never followed.
- The text is written to a fresh temporary file beside the target (made with O_EXCL under an unpredictable name:
  a link planted there is never followed), flushed, then renamed over the target: a reader sees the old file or
  the new one, never half of one, and a failure leaves the old one and no temporary file.
- Text is UTF-8; a character UTF-8 cannot hold (a lone surrogate from a file name Python could not decode, or from
  learner text) is written as its escape, `\\udcff`, which JSON reads back as the same string. Nothing a learner
  writes can make a report unwritable.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

__all__ = ["NotARegularFile", "check_target", "open_no_follow", "remove_tree", "utf8_streams", "without_surrogates",
           "write_atomic", "writing"]

_UMASK = os.umask(0o022)  # read once, at import (os.umask can only be read by setting it), and put back
os.umask(_UMASK)


# a lone surrogate (Python strings may hold one: '\udcff', a name decoded with surrogateescape, a worker's JSON
# "\udcff") cannot be encoded as UTF-8: every writer of it (a file, a socket, the index) would fail on it
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def without_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (isascii is O(1): the common case costs nothing)."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


if sys.platform == "win32":
    def open_no_follow(path: str | os.PathLike[str]) -> int:
        """A file descriptor to read `path`, a file someone else controls (a student's upload), never through a
        link. Windows' Python has no O_NOFOLLOW, O_NONBLOCK or O_CLOEXEC: a link is refused by lstat, and a link
        swapped in between lstat and open is caught by comparing the file opened with the one lstat saw (st_ino
        is the file index there). O_NOINHERIT keeps it out of child processes; there are no FIFOs among files."""
        seen = os.lstat(path)
        if stat.S_ISLNK(seen.st_mode):
            raise OSError(errno.ELOOP, "a symbolic link", os.fspath(path))
        fd = os.open(path, os.O_RDONLY | os.O_BINARY | os.O_NOINHERIT)
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino):
            os.close(fd)
            raise OSError(errno.ELOOP, "changed while it was opened", os.fspath(path))
        return fd
else:
    def open_no_follow(path: str | os.PathLike[str]) -> int:
        """A file descriptor to read `path`, a file someone else controls (a student's upload): a link is never
        followed (ELOOP), a FIFO never blocks the open, and no child process inherits it."""
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)


def utf8_streams() -> None:
    """Make stdout and stderr write whatever the kata says (✓, ≠, √, Chinese), never raise UnicodeEncodeError.

    A file or a pipe that is not UTF-8 (Windows' ANSI code page, cp1252, for `attn-kata check > out.txt` or a CI
    log; PYTHONIOENCODING=ascii) is switched to UTF-8, which every editor and log viewer reads. A terminal keeps
    its encoding (Windows' console is UTF-8 already, through WriteConsoleW), and what it cannot show is replaced."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        reconfigure = getattr(stream, "reconfigure", None)  # a TextIOWrapper's; a test's capture may have none
        if encoding in ("utf8", "utf8sig") or reconfigure is None:
            continue
        try:
            tty = stream.isatty()
        except (OSError, ValueError):
            tty = False
        with contextlib.suppress(OSError, ValueError, LookupError):
            if tty:
                reconfigure(errors="replace")
            else:
                reconfigure(encoding="utf-8", errors="replace")


class NotARegularFile(OSError):
    """The target exists and is a device, a FIFO, a socket or a folder."""


def check_target(path: Path) -> None:
    """Raise NotARegularFile if `path` exists (not following a link) and is not a regular file or a link."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise NotARegularFile(f"{path} exists and is not a regular file")


@contextlib.contextmanager
def writing(path: Path, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file beside `path` for writing ("w": UTF-8 text, "wb": bytes); on a clean exit it replaces
    `path`, on an error it is removed and `path` is left as it was."""
    path = Path(path)
    check_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:64]}.", suffix=".tmp")
    try:
        opener: Callable[[], IO] = (lambda: os.fdopen(fd, "wb")) if "b" in mode else (
            lambda: os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline=""))
        with opener() as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # as open() would have made it (mkstemp makes 0600)
        check_target(path)  # made meanwhile? still never replace a device
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` as described above."""
    with writing(path) as f:
        f.write(text)


def remove_tree(top: str | os.PathLike[str]) -> None:
    """Remove a folder a worker wrote, whatever it holds, never raising. On POSIX, `shutil.rmtree` recurses (a
    submission nesting 1,200 folders made it raise RecursionError and left the tree on disk, red team 13), and a
    path per level grows past PATH_MAX. Here every nested folder is first moved up beside the others (a rename
    within the tree), so the work is linear in the entries and never holds more than two folders open."""
    if sys.platform == "win32":
        # no O_DIRECTORY and no scandir over a descriptor there; a path is bounded by MAX_PATH, so the depth that
        # made shutil.rmtree recurse too far cannot be built
        shutil.rmtree(top, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.unlink(top)
        return
    try:
        top_fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(top)  # a file or a link in its place
        return
    moved = 0
    try:
        while True:
            with os.scandir(top_fd) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
            if not entries:
                break
            for name, is_dir in entries:
                if not is_dir:
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=top_fd)
                    continue
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                 dir_fd=top_fd)
                except OSError:
                    continue
                try:
                    with os.scandir(fd) as it:
                        children = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
                    for child, child_dir in children:
                        with contextlib.suppress(OSError):
                            if child_dir:  # one level up, beside the others: removed in a later pass
                                moved += 1
                                os.rename(child, f".attn-kata-rm-{moved}", src_dir_fd=fd, dst_dir_fd=top_fd)
                            else:
                                os.unlink(child, dir_fd=fd)
                finally:
                    os.close(fd)
                with contextlib.suppress(OSError):
                    os.rmdir(name, dir_fd=top_fd)
            if moved > 10_000_000:  # a file system that does not let go: stop rather than spin
                break
    except OSError:
        pass
    finally:
        os.close(top_fd)
    with contextlib.suppress(OSError):
        os.rmdir(top)
