"""Confinement of a worker process (runs inside the worker, before any learner code)."""

from __future__ import annotations

import sys

assert sys.platform == "linux", "the Linux backend's own module"  # the type checker skips it elsewhere

import contextlib
import ctypes
import functools
import os
import resource
import signal
import struct
import tempfile
from pathlib import Path
from typing import Any

import torch

from grader import limits as bounds
from grader.sandbox import capabilities, landlock, seccomp
from grader.sandbox.common import (  # noqa: F401 - this module's API too
    CappedOutput,
    hard_exit,
    reset_torch_state,
    work_caches,
)
from grader.settings import KATA_ROOT

DEFAULT_LIMITS: dict[str, Any] = {
    "cpu_seconds": bounds.WORKER_CPU_SECONDS,  # a backstop; the per-step wall-clock limit is enforced from outside
    "memory_bytes": bounds.WORKER_ADDRESS_SPACE,  # address space above what torch already maps
    "file_bytes": bounds.WORKER_FILE_BYTES,
    "open_files": bounds.WORKER_OPEN_FILES,
    "processes": bounds.WORKER_PROCESSES,  # a fork bomb stops here (enforced once the worker is not root)
    "disk_bytes": bounds.WORKER_DISK_BYTES,  # its private tmpfs: everything it can write, log included
    "output_bytes": bounds.WORKER_OUTPUT_BYTES,  # what its prints may fill in the log; the rest is dropped
    "tree_memory_bytes": bounds.WORKER_TREE_MEMORY,  # the worker and all it forks (memory cgroup)
}
NOBODY = 65534


def _limit(which: int, value: int) -> None:
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


CLONE_NEWNET = 0x40000000
PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4
PR_SET_PDEATHSIG = 1
# never all of /dev: a worker of the grader's own uid could read the grader's terminal (/dev/pts/N: what is typed
# while a batch runs) and, as uid 0 without capabilities, disks, consoles and input devices
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
ROOT = KATA_ROOT
# never all of /etc: it holds /etc/shadow, gshadow, sudoers, SSH host keys (ssh/), TLS private keys (ssl/private)
# and machine-id (confidential by machine-id(5): a stable id of the host). Only what Python, glibc and torch read
# at run time (traced in a worker): the loader's cache, the time zone, name service and resolver configuration
# (pwd, grp, getpass.getuser(), socket's look-ups: passwd and group are world-readable by design and hold no
# secret), MIME types, the OS's name (platform), OpenSSL's configuration and public CA certificates (ssl's
# default context; /usr/lib/ssl/certs links here). Absent ones are skipped; each is a grant of its own.
ETC = tuple(f"/etc/{name}" for name in (
    "ld.so.cache", "localtime", "timezone", "nsswitch.conf", "passwd", "group", "host.conf", "hosts",
    "resolv.conf", "gai.conf", "services", "protocols", "mime.types", "os-release", "locale.alias",
    "ssl/openssl.cnf", "ssl/certs", "pki/tls/certs", "pki/ca-trust/extracted"))
LAYERS: dict[str, bool] = {}  # what confine() managed to apply, reported by `attn-kata doctor`


@functools.cache  # the same for every worker: computed once in the zygote (grader/pool/preload.py)
def readable_paths() -> list[str]:
    """What a worker may read: Python and its packages, system libraries; never the kata's own folder
    (KATA_ROOT: a checkout's root, or grader/kata/ inside an installed wheel, where solutions/ lives)."""
    # no /proc: a worker sees no other process's cmdline, environ, maps or memory (nor its own pid's files,
    # which it never needs once confined); of /dev only the devices that hold nothing of anyone's (DEVICES)
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/lib", "/lib64", *ETC,
             "/sys/devices/system/cpu", *DEVICES}
    paths |= {p for p in sys.path if p and os.path.isdir(p)}
    grants = grants_without(sorted(p for p in paths if os.path.exists(p)), ROOT)
    for extra in filter(None, os.environ.get("ATTN_KATA_HIDE", "").split(os.pathsep)):
        grants = grants_without(grants, Path(extra))  # a reference kept outside the kata (grader/pool/zygote.py)
    return grants


def grants_without(paths: list[str], hidden: Path) -> list[str]:
    """`paths` as Landlock grants that leave `hidden` out. A grant covers everything beneath it and Landlock
    cannot subtract a subfolder, so a grant above `hidden` (site-packages, when a wheel put the kata in
    grader/kata/) is replaced by its children, one level at a time down the way to `hidden`. Every
    comparison is between resolved paths: Landlock follows a link to the folder it names (a venv's lib64)."""
    hidden = Path(os.path.realpath(hidden))
    reference = hidden / "solutions"
    out: set[str] = set()
    todo = [(Path(os.path.realpath(p)), True) for p in paths]
    while todo:
        p, asked = todo.pop()
        # the kata itself; beneath it only what was asked for by name (a checkout's own .venv), never what a
        # split finds there, and never the reference even when asked for (a sys.path entry in solutions/)
        if p == hidden or (hidden in p.parents and (not asked or reference == p or reference in p.parents)):
            continue
        if p not in hidden.parents:
            out.add(str(p))
            continue
        try:
            children = os.listdir(p)
        except OSError:
            continue
        todo += [(Path(os.path.realpath(p / c)), False) for c in children]
    return sorted(out)


def _new_netns() -> bool:
    return landlock.libc.unshare(CLONE_NEWNET) == 0  # libc as loaded once, in the zygote


class Confining:
    """What the layers of one worker's confinement share, each leaving it for the next (`CONFINEMENT`)."""

    __slots__ = ("cgroups", "config", "enforced", "filtered", "grader_gid", "grader_uid", "is_root", "layers",
                 "limits", "nobody", "promised", "ruleset", "skip", "view", "workdir")

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.limits: dict[str, Any] = {**DEFAULT_LIMITS, **config.get("limits", {})}
        self.skip = set(config.get("skip_layers") or ())  # fault injection for the tests: which layers to leave off
        self.workdir: str = config["workdir"]  # made (and later removed) by the grader
        self.grader_uid, self.grader_gid = os.geteuid(), os.getegid()
        self.is_root = self.grader_uid == 0
        self.view = self.nobody = False
        self.layers: dict[str, bool] = {}  # what each layer function found it could apply
        self.cgroups: dict[str, bool] = {}
        self.ruleset, self.promised = -1, dict(landlock.NONE)
        self.filtered: dict[str, bool] = {}
        self.enforced: dict[str, bool] = {}


def _session(c: Confining) -> None:
    os.setsid()  # own process group


def _mount_view(c: Confining) -> None:
    """A root grader's worker never keeps uid 0 (it would own every root-owned file: chmod needs no capability):
    it becomes NOBODY where NOBODY can reach what it must read, if need be through a mount view of its own that
    opens the way to a Python under a 0700 /root (_open_the_way); where neither is possible it stays root and
    says so (unprivileged_user, owns_nothing_outside: instructor grading refuses)."""
    c.view = c.is_root and _own_mount_namespace()
    if c.is_root and "user" not in c.skip:
        way, importable, tmp = VIEW or prepare_view()
        if os.path.dirname(c.workdir) != tmp:  # its work dir too, where the grader's temp dir is not the zygote's
            way = _recipe(_merged(view_plan()[0], _plan([c.workdir], set())[0]))
        c.nobody = importable and (not way or (c.view and _open_the_way(way)))


def _private_tmpfs_layer(c: Confining) -> None:
    """A size-capped tmpfs of its own over the work dir, in a mount namespace of its own: what it writes cannot
    fill the shared disk, and vanishes with it (an immutable file included)."""
    c.layers["private_tmpfs"] = c.view and "tmpfs" not in c.skip and _private_tmpfs(
        c.workdir, int(c.limits["disk_bytes"]), NOBODY if c.nobody else c.grader_uid)


def _private_dir(c: Confining) -> None:
    """Its work dir as its current folder; nothing the learner prints reaches the grader's stdout (and so never a
    --format json stream): stdin from /dev/null, stdout and stderr to its capped log."""
    os.chdir(c.workdir)
    log = os.open(os.path.join(c.workdir, "output.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(devnull)
    sys.stdout = sys.stderr = CappedOutput(1, int(c.limits["output_bytes"]))


def _clean_env(c: Confining) -> None:
    os.environ.clear()
    os.environ.update(WORKER_ENV | {"HOME": c.workdir, "TMPDIR": c.workdir} | work_caches(c.workdir))


def _network_namespace(c: Confining) -> None:
    c.layers["network_namespace"] = c.is_root and "network" not in c.skip and _new_netns()


def _join_cgroups_layer(c: Confining) -> None:
    c.cgroups = _join_cgroups(int(c.limits["processes"]), int(c.limits["tree_memory_bytes"]),
                              int(c.config.get("pid", -1))) if c.is_root and "cgroup" not in c.skip else {}


def _ipc_namespace(c: Confining) -> None:  # no shared memory, queues
    c.layers["ipc_namespace"] = c.is_root and "ipc" not in c.skip and landlock.libc.unshare(CLONE_NEWIPC) == 0


def _landlock_rules(c: Confining) -> None:
    """Landlock's rules, made now and enforced last. Without a tmpfs of its own, where the disk must be capped
    (grading with a secret on a shared class host: engine.worker_config), another way: the worker may write no
    file at all (its prints go to output.log, opened above and capped by RLIMIT_FSIZE); honest code writes none.
    A learner's own check keeps its folder writable."""
    no_writes = not c.layers["private_tmpfs"] and c.config.get("no_file_writes") is True
    c.layers["landlock_no_file_writes"] = no_writes  # until enforce() says whether Landlock holds it
    writable = [os.devnull] if no_writes else [c.workdir, os.devnull]
    if "landlock" not in c.skip:
        c.ruleset, c.promised = landlock.prepare(read=[*readable_paths(), c.workdir], write=writable,
                                                 scope_signals="landlock_signals" not in c.skip)


def _unprivileged_user(c: Confining) -> None:
    if c.nobody:  # after the namespaces and cgroups (they need root's capabilities)
        _become_nobody(c.workdir, c.layers["private_tmpfs"])


def _parent_death_signal(c: Confining) -> None:
    """It dies with whoever forked it (a zygote, or the zygote that became its grading process): that one, killed,
    could no longer end it. After the change of uid, which clears the setting."""
    landlock.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _owns_nothing_outside_layer(c: Confining) -> None:
    c.layers["owns_nothing_outside"] = _owns_nothing_outside(c.grader_uid, c.grader_gid)


def _rlimits(c: Confining) -> None:
    limits = c.limits
    nproc = int(limits["processes"])
    if os.geteuid() != 0 and not c.cgroups.get("pids_cgroup"):  # a pids cgroup caps the tree already
        nproc += _processes_of(os.geteuid())  # RLIMIT_NPROC counts the whole user
        _limit(resource.RLIMIT_NPROC, nproc)
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_CPU, int(limits["cpu_seconds"]))
    _limit(resource.RLIMIT_FSIZE, int(limits["file_bytes"]))
    _limit(resource.RLIMIT_NOFILE, int(limits["open_files"]))
    _limit(resource.RLIMIT_AS, _address_space() + int(limits["memory_bytes"]))
    torch.set_num_threads(1)


def _cgroups_read_back(c: Confining) -> None:
    pid = int(c.config.get("pid", -1))
    c.cgroups = {layer: joined and _in_cgroup(pid, layer)  # read back while /proc is visible
                 for layer, joined in c.cgroups.items()}


def _no_capabilities(c: Confining) -> None:
    """After the netns and the cgroup (they need CAP_SYS_ADMIN), before Landlock."""
    c.layers["no_capabilities"] = "capabilities" not in c.skip and capabilities.drop_all()


def _seccomp(c: Confining) -> None:
    """After the drop (and every unshare, mount and setuid above: the filter denies them), before Landlock's
    enforce; whatever the uid and whatever the drop could do (a grader that is not root keeps a full bounding
    set): install() sets no_new_privs itself. Read back by calls the filter must refuse, never by its return."""
    c.filtered = seccomp.observed() if "seccomp" not in c.skip and seccomp.install() else {}


def _not_dumpable(c: Confining) -> None:
    """Never dumped: where core_pattern is a pipe (apport, systemd-coredump) the kernel runs its helper as root,
    outside the sandbox, on this process's memory whatever RLIMIT_CORE says."""
    landlock.libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _landlock(c: Confining) -> None:
    c.enforced = landlock.enforce(c.ruleset, c.promised)


# The layers in the order they are applied, one small function each (as nsjail's containment reads): each row is
# named by the layer it claims (grader.sandbox.policy's layer names) or, for a step that claims none, by what it
# does. A red-team fix is one row and one function. What each claims is read back afterwards (`_record`).
CONFINEMENT: tuple[tuple[str, Any], ...] = (
    ("session", _session),
    ("mount_view", _mount_view),
    ("private_tmpfs", _private_tmpfs_layer),
    ("private_dir", _private_dir),
    ("clean_env", _clean_env),
    ("network_namespace", _network_namespace),
    ("cgroups", _join_cgroups_layer),
    ("ipc_namespace", _ipc_namespace),
    ("landlock_rules", _landlock_rules),
    ("unprivileged_user", _unprivileged_user),
    ("parent_death_signal", _parent_death_signal),
    ("owns_nothing_outside", _owns_nothing_outside_layer),
    ("rlimits", _rlimits),
    ("cgroups_read_back", _cgroups_read_back),
    ("no_capabilities", _no_capabilities),
    ("seccomp", _seccomp),
    ("not_dumpable", _not_dumpable),
    ("landlock", _landlock),
)


def _record(c: Confining) -> dict[str, bool]:
    """Each layer as this process can observe it of itself afterwards, never as what a step meant to do."""
    filtered, enforced = c.filtered, c.enforced
    return _observed(c.workdir, c.limits) | {
        "network_namespace": c.layers["network_namespace"],
        "pids_cgroup": c.cgroups.get("pids_cgroup", False),
        "memory_cgroup": c.cgroups.get("memory_cgroup", False),
        "ipc_namespace": c.layers["ipc_namespace"],
        "no_capabilities": c.layers["no_capabilities"],
        "private_tmpfs": c.layers["private_tmpfs"],
        # the disk capped without a tmpfs
        "landlock_no_file_writes": c.layers["landlock_no_file_writes"] and enforced["filesystem"],
        "owns_nothing_outside": c.layers["owns_nothing_outside"],
        "seccomp_no_sockets": filtered.get("seccomp_no_sockets", False),
        # chmod, chown, utime, xattrs, file locks (taken or read), tty and inode-flag ioctls: refused
        "seccomp_no_file_changes": filtered.get("seccomp_no_file_changes", False),
        "seccomp_no_ipc": filtered.get("seccomp_no_ipc", False),  # System V and POSIX IPC refused
        # another process's limits, nice value, scheduling, I/O priority: refused (its own allowed)
        "seccomp_no_process_changes": filtered.get("seccomp_no_process_changes", False),
        # a signal to any process but itself and its own group: refused (kill, tgkill, ..., pidfd_send_signal)
        "seccomp_no_signals_out": filtered.get("seccomp_no_signals_out", False),
        "landlock_filesystem": enforced["filesystem"],
        "landlock_no_tcp": enforced["tcp"],
        "landlock_signal_scope": enforced["signals"],
    }


def confine(config: dict[str, Any]) -> None:
    """Layered (`CONFINEMENT`, in order): own session, a mount view and nobody when the grader is root, a private
    tmpfs, a private dir with quiet stdio, a clean env, own PID namespace (made by the zygote), no network, a pids
    and a memory cgroup, no IPC, rlimits, no capabilities, seccomp, not dumpable, Landlock. Each layer is recorded
    as what this process can observe of itself afterwards, never as what a step meant to do."""
    c = Confining(config)
    for _name, layer in CONFINEMENT:
        layer(c)
    LAYERS.clear()
    LAYERS.update(_record(c))


CLONE_NEWIPC = 0x08000000
CLONE_NEWNS, MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV = 0x00020000, 1 << 14, 1 << 18, 2, 4


MS_RDONLY, MS_REMOUNT = 1, 32
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442  # the same on x86_64 and aarch64
AT_FDCWD, AT_EMPTY_PATH, AT_RECURSIVE, OPEN_TREE_CLONE, MOVE_MOUNT_F_EMPTY_PATH = -100, 0x1000, 0x8000, 1, 4
MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 2, 4


def _own_mount_namespace() -> bool:
    """A mount namespace of its own (needs CAP_SYS_ADMIN), where nothing mounted leaks out."""
    libc = landlock.libc
    return libc.unshare(CLONE_NEWNS) == 0 and libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0


def _private_tmpfs(workdir: str, size: int, uid: int) -> bool:
    """A size-capped tmpfs over the work dir, owned by the uid the worker will run as."""
    opts = f"size={size},mode=0700,nr_inodes={bounds.WORKER_DISK_INODES},uid={uid},gid={uid}".encode()
    return landlock.libc.mount(b"tmpfs", workdir.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts) == 0


def _allows(st: os.stat_result, bits: int) -> bool:
    """Does the mode grant NOBODY (no supplementary groups, its group NOBODY) `bits` (4 read, 1 search)?"""
    shift = 6 if st.st_uid == NOBODY else 3 if st.st_gid == NOBODY else 0
    return (st.st_mode >> shift) & bits == bits


Plan = tuple[tuple[str, tuple[str, ...]], ...]


def _plan(paths: list[str] | set[str], essential: set[str]) -> tuple[Plan, bool]:
    """The folders on the way to `paths` that NOBODY cannot search (a 0700 /root), shallowest first, each with
    its children on that way; and whether NOBODY can read the `essential` ones themselves then (what imports
    need: a folder that is itself closed to it no mount view opens)."""
    hide: dict[str, set[str]] = {}
    ok = True
    for path in {*paths, *essential}:
        parts = Path(os.path.realpath(path)).parts
        try:
            for i in range(1, len(parts)):
                if not _allows(os.stat(os.path.join(*parts[:i])), 1):
                    hide.setdefault(os.path.join(*parts[:i]), set()).add(parts[i])
                    ok = ok and i > 1  # a tmpfs over / would not change what the worker's root resolves
            if path in essential:
                st = os.stat(path)
                ok = ok and _allows(st, 5 if os.path.isdir(path) else 4)
        except OSError:
            ok = ok and path not in essential
    return _merged((), tuple(hide.items())), ok  # type: ignore[arg-type]


@functools.cache  # the same for every worker: computed once in the zygote (grader/pool/preload.py)
def view_plan() -> tuple[Plan, bool]:
    """What a worker of a root grader must open in its mount view to run as NOBODY (`_plan`): the way to every
    Landlock grant and to the temp dir that holds work dirs; its imports need Python's prefixes and the folders
    on sys.path."""
    essential = {sys.prefix, sys.base_prefix, sys.exec_prefix, *(p for p in sys.path if p and os.path.isdir(p))}
    return _plan([*readable_paths(), tempfile.gettempdir()], {os.path.realpath(p) for p in essential})


Recipe = tuple[tuple[bytes, tuple[tuple[bytes, bool], ...]], ...]
VIEW: tuple[Recipe, bool, str | None] | None = None  # prepare_view(), run in the zygote: every worker inherits it


def _recipe(plan: Plan) -> Recipe:
    """`plan` as the byte paths the mount calls take, and whether each child is a folder."""
    return tuple((os.fsencode(f), tuple((os.fsencode(os.path.join(f, c)), os.path.isdir(os.path.join(f, c)))
                                        for c in children)) for f, children in plan)


def prepare_view() -> tuple[Recipe, bool, str | None]:
    """view_plan() made ready once, in the zygote: each worker then only makes its mounts. A fork's first write
    to a page (here 2 MiB huge pages, grader/pool/preload.py) copies it, so whatever a worker would compute
    (paths, stats, ctypes arguments) costs it far more than the computation. The temp dir is given when work
    dirs made in it need nothing more than the plan (NOBODY can search it)."""
    global VIEW
    plan, importable = view_plan()
    tmp = tempfile.gettempdir()
    try:
        searchable = _allows(os.stat(tmp), 1)
    except OSError:
        searchable = False
    VIEW = (_recipe(plan), importable, tmp if searchable else None)
    for name in ("mount", "unshare", "setfsuid", "setfsgid", "prctl", "capget", "capset"):  # ctypes makes a
        getattr(landlock.libc, name)  # function on first use (and the worker would pay for it): made here
    return VIEW


_NOSUID = ctypes.create_string_buffer(struct.pack("=QQQQ", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0), 32)
_TREE_ARGS = (ctypes.c_uint(OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC), ctypes.c_uint(AT_EMPTY_PATH | AT_RECURSIVE),
              ctypes.c_size_t(32), ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH), ctypes.c_int(AT_FDCWD))
_SHELL = (b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k,nr_inodes=256,mode=0755",
          MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _open_the_way(recipe: Recipe) -> bool:
    """In this process's own mount namespace, while root: make each folder of the recipe searchable by NOBODY
    without touching the real file system. Each needed child is cloned (open_tree, nosuid and nodev), a small
    root-owned 0755 tmpfs is mounted over the folder, the child's mount point made there and the clone moved onto
    it, then that tmpfs is made read-only: the rest of the folder (the rest of /root) is absent from the view."""
    syscall, mount = landlock.libc.syscall, landlock.libc.mount
    clone, recursive, size, moving, here = _TREE_ARGS
    tmpfs, flags, opts, readonly = _SHELL
    for folder, children in recipe:
        trees: list[int] = []
        try:
            for path, _ in children:
                trees.append(syscall(SYS_OPEN_TREE, here, path, clone))
                if trees[-1] < 0 or syscall(SYS_MOUNT_SETATTR, trees[-1], b"", recursive, _NOSUID, size) != 0:
                    return False
            if mount(tmpfs, folder, tmpfs, flags, opts) != 0:
                return False
            for (path, is_dir), fd in zip(children, trees, strict=True):
                if is_dir:
                    os.mkdir(path)
                else:
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
                if syscall(SYS_MOVE_MOUNT, fd, b"", here, path, moving) != 0:
                    return False
            if mount(None, folder, None, readonly, None) != 0:
                return False
        except OSError:
            return False
        finally:
            for fd in trees:
                if fd >= 0:
                    os.close(fd)
    return True


def _merged(plan: Plan, more: Plan) -> Plan:
    folders: dict[str, set[str]] = {}
    for folder, children in (*plan, *more):
        folders.setdefault(folder, set()).update(children)
    return tuple(sorted(((f, tuple(sorted(c))) for f, c in folders.items()), key=lambda fc: fc[0].count("/")))


def _become_nobody(workdir: str, tmpfs: bool) -> None:
    if not tmpfs:  # the grader's own folder (mode 0700): the tmpfs, when there, is NOBODY's already
        os.chown(workdir, NOBODY, NOBODY)
    os.fchown(1, NOBODY, NOBODY)  # output.log (stdout and stderr)
    capabilities.drop_bounding()  # needs CAP_SETPCAP, which setuid() takes with the rest
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def _owns_nothing_outside(grader_uid: int, grader_gid: int) -> bool:
    """Every uid and gid of this process (real, effective, saved, filesystem) is one that is neither root's nor
    the grading user's (NOBODY: the overflow id, by convention the owner of no file), with no supplementary
    groups: no chmod, chown or utime of a file outside its work dir can succeed as the owner."""
    if os.geteuid() in (0, grader_uid):
        return False
    libc = landlock.libc
    uids = {*os.getresuid(), libc.setfsuid(-1)}  # an invalid id: changes nothing, returns the current one
    gids = {*os.getresgid(), libc.setfsgid(-1)}
    return (len(uids) == 1 and not uids & {0, grader_uid} and len(gids) == 1 and not gids & {0, grader_gid}
            and not os.getgroups())


WORKER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "ATTN_KATA_WORKER": "1"}


def _observed(workdir: str, limits: dict[str, Any]) -> dict[str, bool]:
    """Layers read back from the process itself, after confinement."""
    st = os.stat(workdir)
    return {
        "session": os.getsid(0) == os.getpid(),
        "pid_namespace": os.getpid() == 1,  # PID 1 of a namespace of its own: no other process has a pid here
        "private_dir": st.st_uid == os.geteuid() and not st.st_mode & 0o077 and os.getcwd() == workdir,
        "clean_env": set(os.environ) == set(WORKER_ENV) | {"HOME", "TMPDIR"} | set(work_caches(workdir)),
        "unprivileged_user": os.geteuid() != 0,
        "not_dumpable": landlock.libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0,
        "rlimits": resource.getrlimit(resource.RLIMIT_CORE)[0] == 0
        and resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY,
    }


def _in_cgroup(pid: int, layer: str) -> bool:
    """Is this process in its group of that controller (v1), or of the unified hierarchy (v2)?"""
    controller = {"pids_cgroup": "pids", "memory_cgroup": "memory"}[layer]
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if path == f"/attn-kata/worker-{pid}" and (controller in controllers.split(",") or not controllers):
                    return True
    except (OSError, ValueError):
        pass
    return False


def _readable_by_others(path: str) -> bool:
    """Could `nobody` import from here without a mount view of its own (.ci/setups.sh prints it)? Not when
    Python lives under a 0700 /root: then view_plan() names the folders a worker opens for it."""
    p = Path(path).resolve()
    for parent in (p, *p.parents):
        try:
            if not os.stat(parent).st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


PIDS_CGROUP = Path("/sys/fs/cgroup/pids")


MEMORY_CGROUP = "/sys/fs/cgroup/memory"
UNIFIED_CGROUP = "/sys/fs/cgroup"


def _cgroup_plan(processes: int, memory: int) -> list[tuple[str, str, tuple[tuple[str, int], ...]]]:
    """(layer, hierarchy, limits to write): cgroup v1 has a hierarchy per controller, v2 one for all."""
    return [("pids_cgroup", str(PIDS_CGROUP), (("pids.max", processes),)),
            ("memory_cgroup", MEMORY_CGROUP, (("memory.limit_in_bytes", memory),)),
            ("cgroup_v2", UNIFIED_CGROUP, (("pids.max", processes), ("memory.max", memory)))]


def _join_cgroups(processes: int, memory: int, pid: int) -> dict[str, bool]:
    """Root is exempt from RLIMIT_NPROC, and RLIMIT_AS holds per process, not per tree: a pids and a memory
    cgroup cap the worker with everything it forks. Each group is named after the worker's pid as the zygote
    sees it (`pid`: inside its own PID namespace the worker is 1), and "0" written to cgroup.procs means this
    process. Plain os calls: in a fresh fork every Python object touched costs copy-on-write faults."""
    joined = {"pids_cgroup": False, "memory_cgroup": False}
    if pid <= 0:
        return joined
    for layer, base, limits in _cgroup_plan(processes, memory):
        if not os.path.exists(f"{base}/cgroup.procs") or not os.access(base, os.W_OK):
            continue
        if layer == "cgroup_v2" and (joined["pids_cgroup"] or joined["memory_cgroup"]):
            continue  # v1 hierarchies already serve
        group = f"{base}/attn-kata/worker-{pid}"
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(f"{base}/attn-kata")
            if layer == "cgroup_v2":  # v2 gives a child group a controller only where its parent enables it;
                # where the kernel refuses (a controller it lacks), the limits below fail and nothing is claimed
                with contextlib.suppress(OSError):
                    _write(f"{base}/attn-kata/cgroup.subtree_control", "+pids +memory")
            with contextlib.suppress(FileExistsError):
                os.mkdir(group)
            for name, value in (*limits, ("cgroup.procs", 0)):
                _write(f"{group}/{name}", str(value))
        except OSError:
            continue
        if layer == "cgroup_v2":
            joined = {"pids_cgroup": True, "memory_cgroup": True}
        else:
            joined[layer] = True
    return joined


def _write(path: str, text: str) -> None:
    """One write to a cgroup file (plain os calls: no Python file object in a fresh fork)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def remove_cgroup(pid: int) -> bool:
    """Called by the zygote once a worker is reaped: kill whatever is still in its cgroups, remove them.
    Returns False while processes remain (try again later). Plain strings and os calls: this runs for
    every worker, in the zygote, where each page a Python object touches is a copy-on-write fault."""
    for base in (str(PIDS_CGROUP), MEMORY_CGROUP, UNIFIED_CGROUP):
        group = f"{base}/attn-kata/worker-{pid}"
        try:
            with open(f"{group}/cgroup.procs") as f:
                members = f.read().split()
        except FileNotFoundError:
            continue
        except OSError:
            members = []
        for member in members:
            with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                os.kill(int(member), signal.SIGKILL)
        try:
            os.rmdir(group)
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return True


def remove_stale_cgroups() -> None:
    """Groups left by a zygote that died: remove those whose worker is gone."""
    for base in (PIDS_CGROUP, Path("/sys/fs/cgroup")):
        with contextlib.suppress(OSError):
            for group in (base / "attn-kata").glob("worker-*"):
                pid = group.name.removeprefix("worker-")
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    remove_cgroup(int(pid))
