"""Every bound the grader sets, in one table: its value, why it is that value, and the modules that enforce it.

The modules read their bound from here (`from grader.limits import ARCHIVE_MEMBERS as MAX_MEMBERS`), so a value
lives in one place; docs/instructors.md renders the table (`python -m grader.dev docs` writes it) and
tests/test_docs.py checks that the docs show every entry and that each module named under `where` reads it.
A leaf: it imports nothing of the grader, so the worker and the sandbox may read it too.
"""

from __future__ import annotations

from dataclasses import dataclass

KiB, MiB, GiB = 1024, 1024**2, 1024**3


@dataclass(frozen=True)
class Limit:
    name: str
    value: int | float
    unit: str  # "s", "min", "bytes", or what is counted ("files", "characters", "× the step time-out", …)
    area: str  # the table's section
    where: tuple[str, ...]  # the modules that read it from here and enforce it
    why: str

    def shown(self) -> str:
        """The value as a person reads it: 64 MiB, 10 s, 4,096 cells."""
        if self.unit == "bytes":
            for size, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
                if self.value >= size and self.value % size == 0:
                    return f"{self.value // size:,} {name}"
            return f"{self.value:,} bytes"
        number = f"{self.value:g}" if isinstance(self.value, float) else f"{self.value:,}"
        return f"{number} {self.unit}"


LIMITS: list[Limit] = []


def _bound(name: str, value: int | float, unit: str, area: str, where: str | tuple[str, ...], why: str):
    LIMITS.append(Limit(name, value, unit, area, (where,) if isinstance(where, str) else where, why))
    return value


# --- time ----------------------------------------------------------------------------------------------------------
TIME = "Time"
STEP_TIMEOUT = _bound("STEP_TIMEOUT", 10.0, "s", TIME, "grader.settings",
                      "wall clock per step, enforced from outside the worker (the grader stops waiting and kills it); "
                      "`--timeout` changes it")
LOAD_TIMEOUT = _bound("LOAD_TIMEOUT", 30.0, "s", TIME, "grader.settings",
                      "importing a submission (its module-level code) in the worker: a hang there is a status with "
                      "its reason, never a wait without end")
MAX_TIMEOUT_OPTION = _bound("MAX_TIMEOUT_OPTION", 3600, "s", TIME, "grader.cli",
                            "the largest `--timeout` accepted (exit 2 above it): an hour a step is already a mistake")
SUBMISSION_BUDGET = _bound("SUBMISSION_BUDGET", 2.0, "× the step time-out", TIME, "grader.grading.engine",
                           "one submission's wall clock for all its steps: a submission whose every function hangs "
                           "costs about two time-outs, not fourteen; past it the row is `over_budget`")
WORKER_CPU_SECONDS = _bound("WORKER_CPU_SECONDS", 60, "s", TIME, ("grader.sandbox.confine", "grader.worker.portable"),
                            "RLIMIT_CPU: a backstop behind the wall-clock limit, should the grader's wait fail")
DAEMON_IDLE = _bound("DAEMON_IDLE", 600.0, "s", TIME, "grader.daemon.server",
                     "the warm background grader stops after this much idle time (`ATTN_KATA_DAEMON_IDLE` changes it)")
DAEMON_TICK = _bound("DAEMON_TICK", 2.0, "s", TIME, "grader.daemon.server",
                     "how often an idle daemon looks at the files on disk, to stop when the grader or the kata changes")
DAEMON_LOCK_PATIENCE = _bound("DAEMON_LOCK_PATIENCE", 3.0, "s", TIME, "grader.daemon.server",
                              "how long a new daemon waits for a stopping one to let go of the lock")
DAEMON_START_TIMEOUT = _bound("DAEMON_START_TIMEOUT", 30.0, "s", TIME, "grader.daemon.client",
                              "how long a command waits for a new daemon to listen (it binds before it warms up: "
                              "its zygote, the reference); past it the command grades in-process")
DAEMON_BUSY_PATIENCE = _bound("DAEMON_BUSY_PATIENCE", 3.0, "s", TIME, "grader.daemon.client",
                              "how long a command waits for another command's starting daemon")
ORPHAN_SCAN_INTERVAL = _bound("ORPHAN_SCAN_INTERVAL", 0.5, "s", TIME, "grader.pool.zygote",
                              "how often the zygote looks for orphaned processes to kill while it reaps")
WATCH_POLL = _bound("WATCH_POLL", 0.1, "s", TIME, "grader.learner.watch",
                    "how often `watch` looks for a key or a save")
CLASSROOM_STEP_MINUTES = _bound("CLASSROOM_STEP_MINUTES", 3, "min", TIME, "grader.platforms.classroom",
                                "GitHub Classroom's command grader time-out per step: a cold start (torch installed, "
                                "imported) and the step fit well within")
PRAIRIELEARN_TIMEOUT = _bound("PRAIRIELEARN_TIMEOUT", 120, "s", TIME, "grader.platforms.prairielearn",
                              "`externalGradingOptions.timeout` of the question: PrairieLearn allows 600; a cold start "
                              "and all 14 steps take well under a minute")

# --- the worker's resources ----------------------------------------------------------------------------------------
WORKER = "A worker's resources"
WORKER_ADDRESS_SPACE = _bound("WORKER_ADDRESS_SPACE", 1 * GiB, "bytes", WORKER, "grader.sandbox.confine",
                              "RLIMIT_AS above what torch already maps: an honest step needs a few MB; a memory bomb "
                              "is that step's `memory_limit`")
PORTABLE_ADDRESS_SPACE = _bound("PORTABLE_ADDRESS_SPACE", 2 * GiB, "bytes", WORKER, "grader.worker.portable",
                                "the same on the portable backend (macOS ignores it), whose torch maps more")
WORKER_TREE_MEMORY = _bound("WORKER_TREE_MEMORY", 1536 * MiB, "bytes", WORKER, "grader.sandbox.confine",
                            "the memory cgroup of a worker and all it forks: RLIMIT_AS holds per process, not per tree")
WORKER_PROCESSES = _bound("WORKER_PROCESSES", 32, "processes", WORKER, "grader.sandbox.confine",
                          "the pids cgroup (or RLIMIT_NPROC once the worker is not root): a fork bomb stops here")
WORKER_OPEN_FILES = _bound("WORKER_OPEN_FILES", 256, "files", WORKER,
                           ("grader.sandbox.confine", "grader.worker.portable"), "RLIMIT_NOFILE")
WORKER_FILE_BYTES = _bound("WORKER_FILE_BYTES", 16 * MiB, "bytes", WORKER,
                           ("grader.sandbox.confine", "grader.worker.portable"),
                           "RLIMIT_FSIZE: the largest file a worker may write; honest code writes none")
WORKER_DISK_BYTES = _bound("WORKER_DISK_BYTES", 64 * MiB, "bytes", WORKER, "grader.sandbox.confine",
                           "the worker's private tmpfs: everything it can write, its log included")
WORKER_DISK_INODES = _bound("WORKER_DISK_INODES", 4096, "inodes", WORKER, "grader.sandbox.confine",
                            "files and folders on that tmpfs")
WORKER_OUTPUT_BYTES = _bound("WORKER_OUTPUT_BYTES", 1 * MiB, "bytes", WORKER,
                             ("grader.sandbox.confine", "grader.worker.portable"),
                             "what a worker's prints may fill in its log; the rest is dropped, never an error")

# --- what crosses between processes --------------------------------------------------------------------------------
CHANNEL = "What crosses from a worker to the grader"
CHANNEL_MESSAGE_BYTES = _bound("CHANNEL_MESSAGE_BYTES", 64 * MiB, "bytes", CHANNEL, "grader.sandbox.framing",
                               "one message on a worker's channel (a whole step's outputs): far above any honest "
                               "answer")
CHANNEL_TENSORS = _bound("CHANNEL_TENSORS", 4096, "tensors", CHANNEL, "grader.sandbox.channel",
                         "tensors in one message")
CHANNEL_JSON_DEPTH = _bound("CHANNEL_JSON_DEPTH", 32, "levels", CHANNEL, "grader.sandbox.channel",
                            "nesting of a message's header and document, checked before it is parsed; an honest "
                            "message needs under 10")
CHANNEL_JSON_NODES = _bound("CHANNEL_JSON_NODES", 1_000_000, "values", CHANNEL, "grader.sandbox.channel",
                            "containers, keys and scalars in one message's document")
CHANNEL_STRING_CHARS = _bound("CHANNEL_STRING_CHARS", 4 * MiB, "characters", CHANNEL, "grader.sandbox.channel",
                              "one string in a message: above a submission's largest unit of source")
WIRE_NAME_CHARS = _bound("WIRE_NAME_CHARS", 256, "characters", CHANNEL, "grader.sandbox.wire",
                         "a case, module, key or exception name in a worker's answer")
WIRE_KIND_CHARS = _bound("WIRE_KIND_CHARS", 1000, "characters", CHANNEL, "grader.sandbox.wire",
                         "what a public name is bound to (a type's name)")
WIRE_TEXT_CHARS = _bound("WIRE_TEXT_CHARS", 2000, "characters", CHANNEL, "grader.sandbox.wire",
                         "a message or a line of code (the worker itself cuts them shorter)")
WIRE_ENTRIES = _bound("WIRE_ENTRIES", 256, "entries", CHANNEL, "grader.sandbox.wire",
                      "entries of one mapping (modules with errors, sandbox layers, cases, a message's parameters)")
FACT_DEPTH = _bound("FACT_DEPTH", 8, "levels", CHANNEL, "grader.sandbox.wire",
                    "nesting of a fact (an honest `structure` fact needs 5)")
FACT_NODES = _bound("FACT_NODES", 20_000, "values", CHANNEL, "grader.sandbox.wire", "values in one case's facts")
FACT_CHARS = _bound("FACT_CHARS", 16_384, "characters", CHANNEL, "grader.sandbox.wire",
                    "characters of one case's fact strings and keys (the reference's largest holds ~1,600); a batch "
                    "keeps a chunk's answers until it judges them, and facts padded to the channel's caps once held "
                    "~56 MB a step")
TENSOR_NDIM = _bound("TENSOR_NDIM", 16, "dimensions", CHANNEL, "grader.sandbox.wire",
                     "dimensions of one answer: a wrong answer may have a few extra; shapes are compared first")
CASE_ELEMENTS = _bound("CASE_ELEMENTS", 4_000_000, "numbers", CHANNEL, ("grader.sandbox.wire", "grader.worker.serve"),
                       "numbers in one case's answer, checked by the worker before it sends and by the grader when it "
                       "reads; honest answers hold a few thousand")
STEP_ELEMENTS = _bound("STEP_ELEMENTS", 16_000_000, "numbers", CHANNEL, "grader.sandbox.wire",
                       "numbers in one step's answers, all cases together")
WORKER_MESSAGE_CHARS = _bound("WORKER_MESSAGE_CHARS", 500, "characters", CHANNEL, "grader.worker.serve",
                              "an exception's message as the worker reports it")
ANSWER_KEPT_FACTOR = _bound("ANSWER_KEPT_FACTOR", 8, "× the reference's numbers", CHANNEL, "grader.grading.engine",
                            "numbers a step's answers may hold while a chunk waits to be judged (at least "
                            "ANSWER_MIN_KEPT); answers near the channel's cap once took a grading process past 4 GB")
ANSWER_MIN_KEPT = _bound("ANSWER_MIN_KEPT", 65_536, "numbers", CHANNEL, "grader.grading.engine",
                         "the floor under ANSWER_KEPT_FACTOR, for steps whose reference answers are small")
GRADING_MESSAGE_BYTES = _bound("GRADING_MESSAGE_BYTES", 256 * MiB, "bytes", CHANNEL, "grader.grading.forked",
                               "one message from a trusted grading process (a batch chunk's reports)")
GRADING_MEMORY = _bound("GRADING_MEMORY", 4 * GiB, "bytes", CHANNEL, "grader.grading.forked",
                        "address space a trusted grading process may add to what it inherited from the zygote")
DAEMON_MESSAGE_BYTES = _bound("DAEMON_MESSAGE_BYTES", 1 * MiB, "bytes", CHANNEL, "grader.daemon.protocol",
                              "one request to the warm daemon (it carries the client's environment)")
DAEMON_FDS = _bound("DAEMON_FDS", 4, "file descriptors", CHANNEL, "grader.daemon.protocol",
                    "passed with one request: stdin, stdout, stderr, the working directory")
ZYGOTE_REQUEST_CHARS = _bound("ZYGOTE_REQUEST_CHARS", 256, "characters", CHANNEL, "grader.pool.zygote",
                              "one request line to the zygote; a longer one is not from a client of ours")

# --- judging -------------------------------------------------------------------------------------------------------
JUDGING = "Judging"
VOUCH_STARTS = _bound("VOUCH_STARTS", 64, "places", JUDGING, "grader.checks.vouching",
                      "where, in one arrangement of an input, a piece equal to an answer may start: the vouching rule "
                      "asks whether an answer could be had without computing anything (a copy or a slice of an input)")
VOUCH_BUDGET = _bound("VOUCH_BUDGET", 4096, "pieces", JUDGING, "grader.checks.vouching",
                      "pieces compared per answer and input in that search; past it the answer counts as work")

# --- submissions ---------------------------------------------------------------------------------------------------
SUBMISSION = "Submissions and uploads"
SOURCE_BYTES = _bound("SOURCE_BYTES", 2 * MiB, "bytes", SUBMISSION, "grader.grading.ingest",
                      "code of one submission (a module, or a notebook's code cells together); above it: `too_large`")
NOTEBOOK_BYTES = _bound("NOTEBOOK_BYTES", 32 * MiB, "bytes", SUBMISSION, "grader.grading.ingest",
                        "a notebook file, outputs included (they are never read); what discovery and the per-upload "
                        "case key hash of a file stops one byte past it")
CODE_CELLS = _bound("CODE_CELLS", 4096, "cells", SUBMISSION, ("grader.grading.ingest", "grader.sandbox.wire"),
                    "code cells read from one notebook (an honest chapter has a few dozen): each is a unit the trusted "
                    "side analyses, and the cells a worker may name in one load error")
HELPER_FILES = _bound("HELPER_FILES", 256, "files", SUBMISSION, "grader.grading.ingest",
                      ".py files beside the step files in a submitted folder")
CASES_KEY_FILES = _bound("CASES_KEY_FILES", 10_000, "files", SUBMISSION, "grader.grading.cases_key",
                         "an upload's files hashed for its own cases (`--cases-per-upload`); past that only their "
                         "count is")
ARCHIVE_MEMBERS = _bound("ARCHIVE_MEMBERS", 2000, "members", SUBMISSION, "grader.instructor.discovery",
                         "members extracted for one student, across every archive they uploaded")
ARCHIVE_MEMBER_BYTES = _bound("ARCHIVE_MEMBER_BYTES", 16 * MiB, "bytes", SUBMISSION, "grader.instructor.discovery",
                              "one extracted member")
ARCHIVE_TOTAL_BYTES = _bound("ARCHIVE_TOTAL_BYTES", 128 * MiB, "bytes", SUBMISSION, "grader.instructor.discovery",
                             "everything extracted for one student")
ARCHIVE_RATIO = _bound("ARCHIVE_RATIO", 200, "× compressed size", SUBMISSION, "grader.instructor.discovery",
                       "expansion of an archive that grows past 1 MiB: a zip bomb is `rejected`")
ARCHIVE_DEPTH = _bound("ARCHIVE_DEPTH", 2, "levels", SUBMISSION, "grader.instructor.discovery",
                       "archives inside archives: an LMS export may hold one zip per student, which may hold one more")
UPLOAD_SEARCH_DEPTH = _bound("UPLOAD_SEARCH_DEPTH", 6, "levels", SUBMISSION, "grader.instructor.discovery",
                             "how deep a workspace or a notebook is looked for inside one upload")
KEY_FILE_BYTES = _bound("KEY_FILE_BYTES", 4096, "bytes", SUBMISSION, "grader.cli_args",
                        "`--secret @FILE`: a course key is a line of text")
BATCH_CHUNK = _bound("BATCH_CHUNK", 24, "submissions", SUBMISSION, "grader.instructor.batch",
                     "the most submissions a batch hands one grading process at a time (fewer near the end, so "
                     "every core stays busy)")
NBGRADER_STAMP_BYTES = _bound("NBGRADER_STAMP_BYTES", 1024, "bytes", SUBMISSION,
                              "grader.platforms.nbgrader.autograde",
                              "a student's `timestamp.txt` (one line)")
NBGRADER_STUDENT_ID = _bound("NBGRADER_STUDENT_ID", 128, "characters", SUBMISSION,
                             "grader.platforms.nbgrader.autograde", "a student id: nbgrader's `Student.id` column")

# --- what people read ----------------------------------------------------------------------------------------------
OUTPUT = "Reports"
REPORT_TEXT_CHARS = _bound("REPORT_TEXT_CHARS", 600, "characters", OUTPUT, "grader.report",
                           "one message in a report or a feedback file (a learner's exception text can be long)")
NBGRADER_SHOWN_CHARS = _bound("NBGRADER_SHOWN_CHARS", 80, "characters", OUTPUT,
                              "grader.platforms.nbgrader.autograde",
                              "a student's value quoted in a `not graded` reason")
HEATMAP_MAX_SIDE = _bound("HEATMAP_MAX_SIDE", 64, "rows or columns", OUTPUT, "grader.grading.pictures",
                          "larger attention matrices are not drawn")
