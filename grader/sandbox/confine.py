"""Confinement of a worker process (runs inside the worker, before any learner code)."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

import torch

from grader.sandbox import capabilities, landlock, seccomp
from grader.settings import KATA_ROOT

DEFAULT_LIMITS: dict[str, Any] = {
    "cpu_seconds": 60,  # a backstop; the per-step wall-clock limit is enforced from outside
    "memory_bytes": 1024**3,  # address space above what torch already maps
    "file_bytes": 16 * 1024**2,
    "open_files": 256,
    "processes": 32,  # a fork bomb stops here (enforced once the worker is not root)
    "disk_bytes": 64 * 1024**2,  # its private tmpfs: everything it can write, log included
    "output_bytes": 1024**2,  # what its prints may fill in the log; the rest is dropped, never an error
    "tree_memory_bytes": 1536 * 1024**2,  # the worker and all it forks (memory cgroup): new pages and copies
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
# never all of /dev: a worker of the grader's own uid could read the grader's terminal (/dev/pts/N: what is typed
# while a batch runs) and, as uid 0 without capabilities, disks, consoles and input devices
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
ROOT = KATA_ROOT
LAYERS: dict[str, bool] = {}  # what confine() managed to apply, reported by `attn-kata doctor`


@functools.cache  # the same for every worker: computed once in the zygote (grader/pool/preload.py)
def readable_paths() -> list[str]:
    """What a worker may read: Python and its packages, system libraries; never the kata's own folder
    (KATA_ROOT: a checkout's root, or grader/kata/ inside an installed wheel, where solutions/ lives)."""
    # no /proc: a worker sees no other process's cmdline, environ, maps or memory (nor its own pid's files,
    # which it never needs once confined); of /dev only the devices that hold nothing of anyone's (DEVICES)
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/lib", "/lib64", "/etc",
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
    network, a pids cgroup, no capabilities, nobody where possible, rlimits, Landlock. Each layer is recorded
    as what this process can observe of itself afterwards, never as what a step meant to do."""
    limits = {**DEFAULT_LIMITS, **config.get("limits", {})}
    skip = set(config.get("skip_layers") or ())  # fault injection for the tests: which layers to leave off
    os.setsid()  # own process group
    workdir = config["workdir"]  # made (and later removed) by the grader
    is_root = os.geteuid() == 0
    # a size-capped tmpfs of its own over the work dir, in a mount namespace of its own: what it writes cannot
    # fill the shared disk, and vanishes with it (an immutable file included)
    tmpfs = is_root and "tmpfs" not in skip and _private_tmpfs(workdir, int(limits["disk_bytes"]))
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
    ruleset, promised = (-1, dict(landlock.NONE)) if "landlock" in skip else landlock.prepare(
        read=readable_paths(), write=[workdir, os.devnull])
    nproc = int(limits["processes"])
    if is_root and _readable_by_others(sys.base_prefix) and _readable_by_others(sys.prefix):
        # never run learner code as root where Python itself stays readable: become nobody
        os.chown(workdir, NOBODY, NOBODY)
        os.chown(os.path.join(workdir, "output.log"), NOBODY, NOBODY)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    if os.geteuid() != 0:
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
    no_sockets = "seccomp" not in skip and caps and seccomp.no_sockets()  # needs no_new_privs (set by the drop)
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
        "seccomp_no_sockets": no_sockets,
        "landlock_filesystem": enforced["filesystem"],
        "landlock_no_tcp": enforced["tcp"],
        "landlock_signal_scope": enforced["signals"],
    })


class CappedOutput(io.TextIOBase):
    """sys.stdout and sys.stderr of a worker: the first `cap` bytes go to its log, the rest is dropped, so a
    learner's prints never become an error (a full disk, a file-size limit)."""

    def __init__(self, fd: int, cap: int):
        self._fd, self._left = fd, cap
        self.dropped = False  # some output went over the cap: the report says so (grader.grading.engine)

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        data = str(s).encode("utf-8", "replace")
        keep = data[:max(self._left, 0)]
        self.dropped = self.dropped or len(keep) < len(data)
        if keep:
            try:
                os.write(self._fd, keep)
                self._left -= len(keep)
            except OSError:
                self._left = 0
        return len(s)

    def fileno(self) -> int:
        return self._fd

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


CLONE_NEWIPC = 0x08000000
CLONE_NEWNS, MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV = 0x00020000, 1 << 14, 1 << 18, 2, 4


def _private_tmpfs(workdir: str, size: int) -> bool:
    libc = landlock.libc
    if libc.unshare(CLONE_NEWNS) != 0:
        return False
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:  # nothing we mount leaks out
        return False
    opts = f"size={size},mode=0700,nr_inodes=4096".encode()
    return libc.mount(b"tmpfs", workdir.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts) == 0


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
    """Could `nobody` still import from here? (Not when Python lives under a 0700 /root.)"""
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
            with contextlib.suppress(FileExistsError):
                os.mkdir(group)
            for name, value in (*limits, ("cgroup.procs", 0)):
                fd = os.open(f"{group}/{name}", os.O_WRONLY)
                try:
                    os.write(fd, str(value).encode())
                finally:
                    os.close(fd)
        except OSError:
            continue
        if layer == "cgroup_v2":
            joined = {"pids_cgroup": True, "memory_cgroup": True}
        else:
            joined[layer] = True
    return joined


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


def reset_torch_state(seed: int) -> None:
    """Undo what learner code may have changed in torch's global defaults, then seed its RNG."""
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)
    torch.default_generator.manual_seed(seed)  # CPU only: torch.manual_seed also queues CUDA work


def hard_exit(code: int = 0) -> None:
    os._exit(code)


def remove_stale_cgroups() -> None:
    """Groups left by a zygote that died: remove those whose worker is gone."""
    for base in (PIDS_CGROUP, Path("/sys/fs/cgroup")):
        with contextlib.suppress(OSError):
            for group in (base / "attn-kata").glob("worker-*"):
                pid = group.name.removeprefix("worker-")
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    remove_cgroup(int(pid))
