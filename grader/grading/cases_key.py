"""Hidden cases drawn afresh for each submission's content, where students resubmit under one secret.

Feedback names hidden inputs (a learner's exception may echo them) and one expected value per failing
comparison. On a platform that grades each attempt as it comes (Gradescope, PrairieLearn), a student could
read them off one attempt's feedback and hard-code them in the next. So there the cases are drawn from
HMAC(secret, sha256 of everything uploaded): the same upload always gets the same cases (a regrade gives the same
score), and any change, a table of learned values included, gets new ones. An upload holding the answers to its
own cases would have to predict an HMAC of itself. Outcomes do not depend on which cases are drawn
(tests/test_secrets.py), so honest code scores the same.

A batch keeps one set of cases per secret: it grades a class once, and its reference runs once for all.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from pathlib import Path
from typing import Any

from grader import limits
from grader.files import open_no_follow
from grader.grading.ingest import MAX_NOTEBOOK_BYTES

CHUNK = 1 << 20
MAX_FILES = limits.CASES_KEY_FILES  # an upload's files hashed; past that, only their count is
MAX_FILE_BYTES = MAX_NOTEBOOK_BYTES + 1  # of one file, at most what ingest ever reads; past that, only its size
MAX_BYTES = 8 * MAX_FILE_BYTES  # of all files together; past that, their sizes only


def content_digest(path: Path) -> bytes:
    """sha256 over the upload: a file's bytes, or, for a folder, every entry's relative path and kind, with each
    regular file's bytes (symbolic links by their target's text, never followed). Of a file longer than ingest ever
    reads, its first MAX_FILE_BYTES and its size (past MAX_BYTES in all, sizes only): a 4 GB sparse file (hidden,
    never graded) costs no more than a 32 MiB one."""
    h = hashlib.sha256()
    if not path.is_dir():
        _file(h, path)
        return h.digest()
    n = used = 0
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            n += 1
            if n > MAX_FILES:  # counted, not read
                continue
            full = Path(dirpath, name)
            h.update(b"\0entry\0" + os.fsencode(full.relative_to(path)) + b"\0")
            used += _file(h, full, min(MAX_FILE_BYTES, MAX_BYTES - used))
    h.update(b"\0count\0%d" % n)
    return h.digest()


def _file(h: Any, path: Path, cap: int = MAX_FILE_BYTES) -> int:
    """Feed one entry to h; the bytes read (at most cap)."""
    read = 0
    try:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            h.update(b"link\0" + os.fsencode(os.readlink(path)))
        elif stat.S_ISREG(st.st_mode):
            fd = open_no_follow(path)
            with os.fdopen(fd, "rb") as f:
                h.update(b"file\0")
                size = os.fstat(f.fileno()).st_size
                while read < cap and (chunk := f.read(min(CHUNK, cap - read))):
                    h.update(chunk)
                    read += len(chunk)
                if size > cap:  # the rest is never read, by the grader or here: its size stands for it
                    h.update(b"\0size\0%d" % size)
        else:
            h.update(b"other\0")
    except OSError as exc:  # unreadable: the grader reports it; its name still counts
        h.update(b"unreadable\0" + str(exc.errno).encode())
    return read


def per_submission(secret: str, upload: Path) -> str:
    """The secret this upload's cases are drawn from (hex): the course's secret, keyed by the upload's content."""
    return hmac.new(secret.encode(), b"attn-kata/upload/" + content_digest(upload), hashlib.sha256).hexdigest()
