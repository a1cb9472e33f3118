#!/usr/bin/python3
"""Run a command under an emulation of Docker's default seccomp profile, as far as the grader's sandbox meets it.

    /usr/bin/python3 .ci/docker_seccomp.py [--landlock-allowed] [--] COMMAND ARGS...

Gradescope and PrairieLearn run their graders as root in a Docker container with Docker's default capability set
and its default seccomp profile (moby profiles/seccomp/default.json). For a process without CAP_SYS_ADMIN that
profile refuses, with EPERM: unshare, setns, mount, umount2, pivot_root, clone with any CLONE_NEW* flag; the kernel
keyrings (add_key, request_key, keyctl) always; bpf, perf_event_open; io_uring (removed from the allow-list in
Docker 25); and the Landlock calls, which only Docker 24+ allows (before that, like every call the profile does not
list, they fail with EPERM). clone3 fails with ENOSYS, so that libc falls back to clone, whose flags the profile can
read. `--landlock-allowed` emulates a Docker 24+ profile that lets landlock_* through.

The filter is installed here, with libseccomp's Python binding (Debian: python3-seccomp, for /usr/bin/python3),
then this process becomes COMMAND (os.execvp): the filter holds for it and everything it starts. Run it under
`setpriv --bounding-set` (.ci/setups.sh) for Docker's capability set as well.
"""

from __future__ import annotations

import errno
import os
import sys

import seccomp

CLONE_NEW = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET: Docker's clone mask
EPERM_CALLS = ("unshare", "setns", "mount", "umount2", "pivot_root", "add_key", "request_key", "keyctl", "bpf",
               "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register", "open_tree", "move_mount",
               "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr")
LANDLOCK = ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self")


def install(landlock_allowed: bool) -> list[str]:
    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    denied = []
    for name in EPERM_CALLS + (() if landlock_allowed else LANDLOCK):
        try:
            f.add_rule(seccomp.ERRNO(errno.EPERM), name)
            denied.append(name)
        except (RuntimeError, ValueError, OSError):
            pass  # a call this libseccomp does not know: this kernel's ABI lacks it too
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    # any namespace flag: the profile allows clone only when (flags & CLONE_NEW) == 0
    for bit in range(32):
        if CLONE_NEW & (1 << bit):
            f.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, 1 << bit, 1 << bit))
    f.load()  # sets no_new_privs first, as Docker does
    return denied


def main(argv: list[str]) -> int:
    args = argv[1:]
    landlock_allowed = False
    while args and args[0].startswith("--"):
        flag = args.pop(0)
        if flag == "--":
            break
        if flag == "--landlock-allowed":
            landlock_allowed = True
        else:
            print(f"docker_seccomp: unknown option {flag}", file=sys.stderr)
            return 2
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    denied = install(landlock_allowed)
    if os.environ.get("DOCKER_SECCOMP_VERBOSE"):
        print(f"docker_seccomp: EPERM for {', '.join(denied)}, namespace clones; ENOSYS for clone3", file=sys.stderr)
    os.execvp(args[0], args)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
