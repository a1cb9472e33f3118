"""The one policy table: per context, which sandbox layers grading with a secret needs, and why.

Everything that decides or says what a secret needs reads this table, so they cannot disagree:
- the gate (grader.pool.session.required_layers / missing_layers: the worker refuses to import a line of a
  submission where a need of its context is missing, and the trusted side refuses to grade);
- `attn-kata doctor`'s required rows (grader.instructor.doctor: a row is required where it proves a need);
- every report's `sandbox` key (grader.grading.engine.sandbox_record: its `missing` are this table's needs);
- docs/design.md's table (`python -m grader.dev docs` writes it from `table_markdown()`).
tests/test_policy.py fails where the gate and doctor differ.

A need is met by any one of its `layers`: the names a worker records of itself after confinement
(grader.sandbox.confine.LAYERS, each the layer function of the same name in confine.CONFINEMENT or a read-back).
A need with no layers is met by construction (no process that runs learner code is ever given it) and is proven
by doctor's attack alone: no worker can observe it of itself, so the gate has nothing to check at run time.

Nothing here imports torch or a Linux-only module: every platform reads it (the portable backend to refuse).
"""

from __future__ import annotations

from dataclasses import dataclass

# Where grading happens decides what it needs.
CONTEXTS: dict[str, str] = {
    # Gradescope, PrairieLearn: one student's upload in a container that is thrown away afterwards
    "container": "one submission's container (Gradescope, PrairieLearn): one student's upload, thrown away after",
    # batch, grade, nbgrader on a JupyterHub: many students' workers side by side on one machine
    "host": "a shared class host (batch, grade, nbgrader): many students' workers side by side on one machine",
    # check, watch, grade without a secret: the learner's own code on the learner's machine
    "learner": "a learner's own machine (check, watch, grade without a secret): no secret, the learner's own code",
}
SECRET_CONTEXTS = ("host", "container")  # where a secret may be held at all (the learner's context never holds one)


@dataclass(frozen=True)
class Need:
    name: str  # as the refusal, the report's sandbox.missing and doctor's output say it
    layers: tuple[str, ...]  # any one of these observed layers meets it; () = met by construction
    contexts: tuple[str, ...]  # where grading with a secret needs it
    why: str  # the attack it stops (the red team that found it, where one did)
    fix: str  # what to do where it is missing (the refusal says it)
    rows: tuple[str, ...]  # doctor's rows whose attacks prove it (each then required there)


BOTH = ("host", "container")
HOST = ("host",)
SECCOMP = "a kernel with seccomp filters (CONFIG_SECCOMP_FILTER)"

NEEDS: tuple[Need, ...] = (
    Need("kata files and /proc unreadable (Landlock)", ("landlock_filesystem",), BOTH,
         "reading solutions/ from disk, another process's cmdline, environ or memory (the secret), the grader's "
         "terminal",
         "Linux 5.13+ with Landlock enabled (lsm=landlock); in Docker, version 23 or later (older seccomp profiles "
         "block Landlock's calls)",
         ("kata files unreadable (Landlock)", "other processes invisible (PID namespace, /proc hidden)",
          "the secret is unreachable")),
    Need("the reference is unreachable", (), BOTH,
         "a reference output or its code in the worker's memory: no process that runs learner code ever imports "
         "the reference (the zygote never loads it; import-linter and tests/test_architecture.py hold it)",
         "nothing to enable: it holds by construction; `attn-kata doctor` proves it by its attack",
         ("the reference is unreachable",)),
    Need("no capabilities", ("no_capabilities", "unprivileged_user"), BOTH,
         "chattr +i, chown, ptrace, mounts, raw I/O", "a kernel that lets a process drop its capabilities",
         ("no capabilities",)),
    # another uid is not enough: a grader that is not root gives its workers its own uid, and before Linux 6.12
    # Landlock cannot scope signals (red team 15: `os.kill(-1, SIGKILL)` ended the grade and a classmate's worker)
    Need("cannot signal other processes", ("pid_namespace", "landlock_signal_scope", "seccomp_no_signals_out"), BOTH,
         "killing or stopping its grading process or a classmate's worker, directly or by SIGIO (red teams 15, 16)",
         "run the batch as root (each worker gets a PID namespace), or " + SECCOMP + ", or Linux 6.12+ (Landlock "
         "scopes signals)",
         ("cannot signal the grader (PID namespace, Landlock scope or seccomp)",)),
    Need("no new sockets (seccomp)", ("seccomp_no_sockets",), BOTH,
         "connecting to a socket file left reachable on the machine (a warm daemon's, a desktop bus's, syslog's)",
         SECCOMP, ("no grader socket is reachable",)),
    Need("disk use capped (private tmpfs, or no file writes)", ("private_tmpfs", "landlock_no_file_writes"), HOST,
         "filling the shared disk under classmates graded at the same time",
         "run the batch as root (each worker gets a tmpfs of its own), or Landlock (Linux 5.13+; its workers then "
         "write no file), or grade each submission in a container",
         ("disk use capped (private tmpfs, or no file writes)",)),
    # where a grader is not root there is no IPC namespace: seccomp refuses every System V and POSIX IPC call
    Need("nothing shared between workers (IPC namespace)", ("ipc_namespace", "seccomp_no_ipc"), HOST,
         "a shared memory segment, queue or key a classmate graded at the same time reads (a covert channel)",
         "run the batch as root, or " + SECCOMP + ", or grade each submission in a container of its own",
         ("nothing shared with other workers (IPC namespace, no keyrings)",)),
    # chmod, chown and utime need no capability of a file's owner, and Landlock does not cover them
    Need("runs as a uid that owns nothing outside its work dir", ("owns_nothing_outside", "seccomp_no_file_changes"),
         BOTH, "chmod, chown or utime of a file its uid owns outside its work dir (a root program made setuid)",
         "run the batch as root (its workers then run as nobody), or a kernel with seccomp filters (which then deny "
         "chmod, chown, utime and extended attributes)",
         ("owns nothing outside its folder (another uid, or seccomp)",)),
    Need("never root (a root grader's worker runs as nobody)", ("unprivileged_user",), BOTH,
         "root's file ownership: every root-owned file is its own to chmod",
         "a Python that others can read (a venv of /usr/bin/python3), or a mount namespace for each worker "
         "(CAP_SYS_ADMIN; in Docker --cap-add SYS_ADMIN) to open the way to a Python under a folder only root can "
         "read",
         ("not running as root",)),
    # what no uid stops: a lock, taken or read, on any file it may read (POSIX record locks on /etc/passwd carried
    # a reference to a classmate graded at the same time); and, whatever its uid, no metadata change by an owner
    Need("no chmod, chown, xattr, utime or locks (seccomp)", ("seccomp_no_file_changes",), BOTH,
         "an owner's metadata change outside its work dir, a lock a classmate reads (a covert channel), typing "
         "into a terminal",
         SECCOMP,
         ("its uid's files outside its folder keep mode, owner, times, xattrs (seccomp)",
          "no file locks, taken or read (seccomp)", "no tty input or inode-flag ioctls (seccomp)")),
    # a process of the same uid may lower another's limits (RLIMIT_CPU 1: a classmate's worker killed), renice it
    # or pin it to one CPU (a classmate's time-out), and Landlock scopes none of it
    Need("cannot change other processes' limits or scheduling", ("pid_namespace", "seccomp_no_process_changes"),
         BOTH, "a classmate's worker given RLIMIT_CPU 1, SCHED_IDLE or one CPU",
         "run the batch as root, or " + SECCOMP,
         ("cannot change another process's limits or scheduling (PID namespace or seccomp)",)),
)
BY_NAME = {need.name: need for need in NEEDS}

# The waiver (--allow-weak-sandbox, ATTN_KATA_ALLOW_WEAK_SANDBOX=1) waives these needs of the Linux sandbox, and
# nothing else: never the portable backend's refusal to hold a secret (it confines nothing: its worker runs as the
# grader's user, unconfined, and could read the secret from its ancestors' environment and command line).
WAIVABLE = tuple(need.name for need in NEEDS if need.layers)
PORTABLE_HOLDS_SECRET = False


def needs(context: str) -> list[Need]:
    """What grading with a secret needs in `context` (none in the learner's, which never holds one)."""
    return [need for need in NEEDS if context in need.contexts]


def gate(context: str) -> dict[str, tuple[str, ...]]:
    """The needs a worker can observe of itself, each with its alternatives: what the gate checks."""
    return {need.name: need.layers for need in needs(context) if need.layers}


def required_rows(context: str = "host") -> dict[str, str]:
    """doctor's required rows in `context`, each with the need it proves."""
    return {row: need.name for need in needs(context) for row in need.rows}


def fix(name: str) -> str:
    return BY_NAME[name].fix if name in BY_NAME else ""


def table_markdown() -> str:
    """docs/design.md's policy table (between `<!-- policy:start -->` and `<!-- policy:end -->`)."""
    shown = {"yes": "needed", "no": "—"}
    out = ["| need | met by any of (worker's own layers) | " + " | ".join(f"`{c}`" for c in CONTEXTS) + " | why |",
           "|---|---|" + "---|" * len(CONTEXTS) + "---|"]
    for need in NEEDS:
        layers = ", ".join(f"`{x}`" for x in need.layers) or "by construction (doctor's attack proves it)"
        cells = " | ".join(shown["yes" if c in need.contexts else "no"] for c in CONTEXTS)
        out.append(f"| {need.name} | {layers} | {cells} | {need.why.replace('|', '/')} |")
    out += ["", "The waiver (`--allow-weak-sandbox`, `ATTN_KATA_ALLOW_WEAK_SANDBOX=1`) waives the needs above that a "
            "worker observes (the Linux sandbox's layers), and nothing else: the portable backend never holds a "
            "secret, waived or not. The learner's context holds no secret and needs none of them."]
    return "\n".join(out)
