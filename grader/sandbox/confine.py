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
from grader.sandbox.common import CappedOutput, hard_exit, reset_torch_state  # noqa: F401 - this module's API too
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


def confine(config: dict[str, Any]) -> None:
    """Layered: own session, private dir, quiet stdio, clean env, own PID namespace (made by the zygote), no
    network, a pids cgroup, no capabilities, nobody when the grader is root, rlimits, Landlock. Each layer is
    recorded as what this process can observe of itself afterwards, never as what a step meant to do."""
    limits = {**DEFAULT_LIMITS, **config.get("limits", {})}
    skip = set(config.get("skip_layers") or ())  # fault injection for the tests: which layers to leave off
    os.setsid()  # own process group
    workdir = config["workdir"]  # made (and later removed) by the grader
    grader_uid, grader_gid = os.geteuid(), os.getegid()
    is_root = grader_uid == 0
    # a root grader's worker never keeps uid 0 (it would own every root-owned file: chmod needs no capability):
    # it becomes NOBODY where NOBODY can reach what it must read, if need be through a mount view of its own
    # that opens the way to a Python under a 0700 /root (_open_the_way); where neither is possible it stays
    # root and says so (unprivileged_user, owns_nothing_outside: instructor grading refuses)
    view = is_root and _own_mount_namespace()
    nobody = False
    if is_root and "user" not in skip:
        way, importable, tmp = VIEW or prepare_view()
        if os.path.dirname(workdir) != tmp:  # its work dir too, where the grader's temp dir is not the zygote's
            way = _recipe(_merged(view_plan()[0], _plan([workdir], set())[0]))
        nobody = importable and (not way or (view and _open_the_way(way)))
    # a size-capped tmpfs of its own over the work dir, in a mount namespace of its own: what it writes cannot
    # fill the shared disk, and vanishes with it (an immutable file included)
    tmpfs = view and "tmpfs" not in skip and _private_tmpfs(workdir, int(limits["disk_bytes"]),
                                                            NOBODY if nobody else grader_uid)
    os.chdir(workdir)
    # nothing the learner prints reaches the grader's stdout (and so never a --format json stream)
    log = os.open(os.path.join(workdir, "output.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(devnull)
    out = CappedOutput(1, int(limits["output_bytes"]))
    sys.stdout = sys.stderr = out
    os.environ.clear()
    os.environ.update(WORKER_ENV | {"HOME": workdir, "TMPDIR": workdir})
    network = is_root and "network" not in skip and _new_netns()
    cgroups = _join_cgroups(int(limits["processes"]), int(limits["tree_memory_bytes"]), int(config.get("pid", -1))) \
        if is_root and "cgroup" not in skip else {}
    ipc = is_root and "ipc" not in skip and landlock.libc.unshare(CLONE_NEWIPC) == 0  # no shared memory, queues
    # without a tmpfs of its own, where the disk must be capped (grading with a secret on a shared class host:
    # engine.worker_config), another way: the worker may write no file at all (its prints go to output.log, opened
    # above and capped by RLIMIT_FSIZE); honest code writes none. A learner's own check keeps its folder writable
    no_writes = not tmpfs and config.get("no_file_writes") is True
    writable = [os.devnull] if no_writes else [workdir, os.devnull]
    ruleset, promised = (-1, dict(landlock.NONE)) if "landlock" in skip else landlock.prepare(
        read=[*readable_paths(), workdir], write=writable, scope_signals="landlock_signals" not in skip)
    if nobody:  # after the namespaces and cgroups (they need root's capabilities)
        _become_nobody(workdir, tmpfs)
    # it dies with whoever forked it (a zygote, or the zygote that became its grading process): that one, killed,
    # could no longer end it. After the change of uid, which clears the setting
    landlock.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    owns_nothing = _owns_nothing_outside(grader_uid, grader_gid)
    nproc = int(limits["processes"])
    if os.geteuid() != 0 and not cgroups.get("pids_cgroup"):  # a pids cgroup caps the tree already
        nproc += _processes_of(os.geteuid())  # RLIMIT_NPROC counts the whole user
        _limit(resource.RLIMIT_NPROC, nproc)
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_CPU, int(limits["cpu_seconds"]))
    _limit(resource.RLIMIT_FSIZE, int(limits["file_bytes"]))
    _limit(resource.RLIMIT_NOFILE, int(limits["open_files"]))
    _limit(resource.RLIMIT_AS, _address_space() + int(limits["memory_bytes"]))
    torch.set_num_threads(1)
    cgroups = {layer: joined and _in_cgroup(int(config.get("pid", -1)), layer)  # read back while /proc is visible
               for layer, joined in cgroups.items()}
    # after the netns and the cgroup (they need CAP_SYS_ADMIN), before Landlock
    caps = "capabilities" not in skip and capabilities.drop_all()
    # after the drop (and every unshare, mount and setuid above: the filter denies them), before Landlock's
    # enforce; whatever the uid and whatever the drop could do (a grader that is not root keeps a full bounding
    # set): install() sets no_new_privs itself. Read back by calls the filter must refuse, never by its return
    filtered = seccomp.observed() if "seccomp" not in skip and seccomp.install() else {}
    # never dumped: where core_pattern is a pipe (apport, systemd-coredump) the kernel runs its helper as root,
    # outside the sandbox, on this process's memory whatever RLIMIT_CORE says
    landlock.libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    enforced = landlock.enforce(ruleset, promised)
    LAYERS.clear()
    LAYERS.update(_observed(workdir, limits) | {
        "network_namespace": network,
        "pids_cgroup": cgroups.get("pids_cgroup", False),
        "memory_cgroup": cgroups.get("memory_cgroup", False),
        "ipc_namespace": ipc,
        "no_capabilities": caps,
        "private_tmpfs": tmpfs,
        "landlock_no_file_writes": no_writes and enforced["filesystem"],  # the disk capped without a tmpfs
        "owns_nothing_outside": owns_nothing,
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
    })


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
        "clean_env": set(os.environ) == set(WORKER_ENV) | {"HOME", "TMPDIR"},
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
