#!/usr/bin/env bash
# The sandbox's proofs in every set-up a grader meets (issue 23). .ci/run's main suite is set-up 1 (root, the
# checkout's .venv: here a Python only root can read); this script prints its banner and doctor, then runs the
# tests marked `sandbox` (pytest -m sandbox: hostile uploads, the red team's confinement tests, doctor, stand-ins,
# seccomp, the worker's uid) and `attn-kata doctor --secret` again in
#   2. root with a world-readable Python: Debian's /usr/bin/python3 and a venv of it;
#   3. a non-root user (katauser, made if absent; the CI user itself when CI is not root) with its own copy of the
#      checkout and its own venv: no namespaces, cgroups or tmpfs, only what an unprivileged process can set up
#      (its workers write no file instead of a tmpfs of their own: its doctor must pass too);
#   docker: a Gradescope/PrairieLearn container, emulated: root in set-up 2's venv under Docker's default capability
#      bounding set (setpriv), its seccomp profile (.ci/docker_seccomp.py) and read-only cgroup mounts, first as
#      Docker before 24 (Landlock refused: every upload graded with a course secret must be refused, saying why),
#      then as Docker 24+ (Landlock allowed: graded, and uploads that read secret.txt and the kata's solutions
#      earn nothing: .ci/container_uploads.py); `docker-tests` adds tests/test_gradescope.py and
#      tests/test_prairielearn.py in the Docker 24+ container.
# Each set-up gets a copy of what git sees (git ls-files -co --exclude-standard, as .ci/wheel_smoke.sh copies it),
# a venv (torch==2.13.0 first: the CPU build; then `pip install -e .`), a banner (id, which python, the doctor
# table), a JUnit file checked by tests/check_skips.py, and a check that no process of its workers' uid outlived it.
# Exits non-zero if any set-up fails; prints the timings.
#
#   .ci/setups.sh                 # 1 2 3 docker
#   .ci/setups.sh 2 docker-tests  # some of them
#   ATTN_KATA_SETUPS_DIR=/tmp/s .ci/setups.sh   # keep the copies and venvs there (reused by the next run)
#
# Needs: root or passwordless sudo; Debian's python3 with venv, python3-seccomp, util-linux's setpriv and unshare
# (.ci/run installs them); the network or a local index for torch.
set -euo pipefail
REPO="${ATTN_KATA_CHECKOUT:-$(cd "$(dirname "$0")/.." && pwd)}"  # the checkout (default: this script's)
SETUPS=("$@")
[ ${#SETUPS[@]} -gt 0 ] || SETUPS=(1 2 3 docker)
SYSPY=/usr/bin/python3
KATA_USER="${ATTN_KATA_CI_USER:-katauser}"

if [ -n "${ATTN_KATA_SETUPS_DIR:-}" ]; then
    WORK="$ATTN_KATA_SETUPS_DIR"
    mkdir -p "$WORK"
else
    WORK="$(mktemp -d /tmp/attn-kata-setups.XXXXXX)"
    trap 'rm -rf "$WORK"' EXIT
fi
chmod 755 "$WORK"  # set-up 2's venv lives here: `nobody` must be able to read it for the worker to become nobody

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if ! sudo -n true 2>/dev/null; then echo "setups: needs root or passwordless sudo" >&2; exit 1; fi
    SUDO="sudo -n"
fi
for need in "$SYSPY -c 'import ensurepip, venv'" "$SYSPY -c 'import seccomp'" "command -v setpriv"; do
    if ! eval "$need" >/dev/null 2>&1; then
        echo "setups: '$need' failed: install python3-venv, python3-seccomp, util-linux (.ci/run does)" >&2
        exit 1
    fi
done

# the environment every set-up's commands get (env -i): nothing of CI's but pip's settings
PIPCONF="$WORK/pip.conf"  # the CI user's own pip configuration (an index on this machine's disk), for the others
: >"$PIPCONF"
for f in "${XDG_CONFIG_HOME:-$HOME/.config}/pip/pip.conf" "$HOME/.pip/pip.conf" "${PIP_CONFIG_FILE:-/nonexistent}"; do
    if [ -r "$f" ]; then cat "$f" >>"$PIPCONF"; echo >>"$PIPCONF"; fi
done
chmod 644 "$PIPCONF"
KEEP=(LANG=C.UTF-8 ATTN_KATA_NO_DAEMON=1 ATTN_KATA_LANG=en COLUMNS=160 PIP_CONFIG_FILE="$PIPCONF")
while IFS='=' read -r name value; do
    case "$name" in PIP_CONFIG_FILE) ;; PIP_*) KEEP+=("$name=$value") ;; esac
done < <(env)

as() {  # as WHO DIR COMMAND...: run COMMAND as WHO (root or a user name) in DIR, in a clean environment
    local who=$1 dir=$2 home
    shift 2
    home="$(getent passwd "$who" | cut -d: -f6)"
    local envs=(env -i "${KEEP[@]}" HOME="$home" USER="$who" PATH="$dir/.venv/bin:/usr/local/bin:/usr/bin:/bin")
    if [ "$who" = "$(id -un)" ]; then
        (cd "$dir" && "${envs[@]}" "$@")
    elif [ "$(id -u)" -eq 0 ]; then
        (cd "$dir" && setpriv --reuid="$who" --regid="$who" --init-groups -- "${envs[@]}" "$@")
    elif [ "$who" = root ]; then
        (cd "$dir" && sudo -n -- "${envs[@]}" "$@")
    else
        (cd "$dir" && sudo -n -u "$who" -- "${envs[@]}" "$@")
    fi
}

copy_checkout() {  # copy_checkout DEST OWNER: what git sees of the checkout, owned by OWNER
    local dest=$1 owner=$2
    $SUDO mkdir -p "$dest"
    (cd "$REPO" && git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
        [ -f "$f" ] && printf '%s\0' "$f"
    done | tar --null -T - -cf -) | $SUDO tar -xf - -C "$dest"
    $SUDO chown -R "$owner:" "$dest"
}

pip_q() {  # pip_q WHO DIR ARGS...: pip install -q, without the warnings of an index folder that lacks a package
    local who=$1 dir=$2
    shift 2
    as "$who" "$dir" python -m pip install -q "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a dir" || true; }
}

make_venv() {  # make_venv WHO DIR: DIR/.venv from Debian's python3, torch first, then the kata (editable)
    local who=$1 dir=$2
    if [ -x "$dir/.venv/bin/attn-kata" ]; then
        pip_q "$who" "$dir" --no-deps -e .  # a kept venv (ATTN_KATA_SETUPS_DIR): only the kata again
        pip_q "$who" "$dir" pytest-xdist
        return
    fi
    as "$who" "$dir" "$SYSPY" -m venv .venv
    pip_q "$who" "$dir" torch==2.13.0  # the CPU build: a bare `torch` pulls CUDA's
    pip_q "$who" "$dir" -e .  # the kata's own dependencies: the sandbox tests' modules need nothing of [dev]
    pip_q "$who" "$dir" pytest-xdist  # but two test files at a time, as the README's command runs them
}

banner() {  # banner WHO DIR TITLE
    local who=$1 dir=$2
    printf '\n======== set-up %s\n' "$3"
    as "$who" "$dir" sh -c 'echo "id: $(id)"; echo "python: $(command -v python) -> $(readlink -f "$(command -v python)")"'
    as "$who" "$dir" python -c 'import os, sys, torch
from pathlib import Path
from grader.sandbox import landlock
def others(p):  # every folder down to p searchable by others: could `nobody` import from here?
    p = Path(p).resolve()
    return all(os.stat(q).st_mode & 0o001 for q in (p, *p.parents))
print("sys.prefix", sys.prefix, "| base", sys.base_prefix, "| readable by others:",
      others(sys.prefix) and others(sys.base_prefix))
print("torch", torch.__version__, "| Landlock ABI", landlock.abi(), "| euid", os.geteuid())'
}

FAILED=()
TIMES=()
fail() { FAILED+=("$1"); echo "setups: FAILED: $1" >&2; }

doctor() {  # doctor WHO DIR LABEL ALLOWED: the table; a needed row missing fails, unless it is ALLOWED's (by design)
    local who=$1 dir=$2 label=$3 allowed=$4 rc=0 missing
    as "$who" "$dir" env ATTN_KATA_SECRET="ci-canary-$RANDOM$RANDOM" attn-kata doctor >"$WORK/doctor.out" 2>&1 || rc=$?
    cat "$WORK/doctor.out"
    # the last line(s): "missing for instructor grading (--secret): A; B" (wrapped at spaces by the terminal width)
    missing="$(sed -n '/^missing for instructor grading (--secret): /,$p' "$WORK/doctor.out" | tr '\n' ' ' \
        | sed 's/^missing for instructor grading (--secret): //; s/  */ /g; s/ $//')"
    if [ "$rc" -ne 0 ] && [ -n "$allowed" ] && [ "$missing" = "$allowed" ]; then
        echo "$label: doctor --secret exited $rc: missing '$missing', which this set-up lacks by design"
    elif [ "$rc" -ne 0 ]; then
        fail "$label: attn-kata doctor --secret exited $rc (missing for instructor grading: '$missing')"
    elif [ -n "$allowed" ]; then
        fail "$label: attn-kata doctor --secret passed, yet '$allowed' cannot exist here: is the row proven?"
    fi
}

escaped() {  # escaped USER [PIDS BEFORE...]: USER's live processes that init adopted, and their descendants
    local user=$1
    shift
    ps -e -o pid=,ppid=,stat=,user:32= | "$SYSPY" -c '
import sys
user, before = sys.argv[1], set(sys.argv[2:])
procs = [line.split() for line in sys.stdin if len(line.split()) == 4]
live = {p: pp for p, pp, st, u in procs if u == user and not st.startswith("Z") and p not in before}
out = {p for p, pp in live.items() if pp == "1"}  # orphans: whatever started them is gone
grown = True
while grown:
    more = {p for p, pp in live.items() if pp in out} - out
    grown, out = bool(more), out | more
print(" ".join(sorted(out, key=int)))' "$user" "$@"
}

left_running() {  # left_running USER LABEL [PIDS BEFORE...]: processes of USER that escaped fail the set-up, then die
    local user=$1 label=$2 pids pgids i
    shift 2
    pids="$(escaped "$user" "$@")"
    [ -n "$pids" ] || return 0
    fail "$label: $(echo "$pids" | wc -w) process(es) of $user outlived the tests, adopted by init (a worker's descendants escaped)"
    ps -o pid,ppid,pgid,sid,stat,etime,args -p "${pids// /,}" | cut -c1-160 | head -20 || true
    for i in 1 2 3 4 5 6 7 8 9 10; do  # by their process groups (a fork bomb replaces what dies), by id
        pgids="$(ps -o pgid= -p "${pids// /,}" 2>/dev/null | sort -u || true)"
        [ -n "$pgids" ] || break
        for g in $pgids; do $SUDO kill -KILL -- "-$g" 2>/dev/null || true; done
        sleep 0.5
        pids="$(escaped "$user" "$@")"
        [ -n "$pids" ] || break
    done
    if [ -n "$pids" ]; then echo "setups: $(echo "$pids" | wc -w) of them still run: $pids" >&2; fi
}

sandbox_tests() {  # sandbox_tests WHO DIR LABEL: pytest -m sandbox, a JUnit file, check_skips
    local who=$1 dir=$2 label=$3 rc=0 t0
    t0=$(date +%s)
    # the modules that hold a sandbox test (pytest.mark.sandbox in them, or named in conftest's SANDBOX_MODULES): the
    # others are not collected, so their imports ([dev]: nbgrader, pexpect, ...) need not be installed
    local files
    files="$(as "$who" "$dir" python -c 'import pathlib, sys
sys.path.insert(0, "tests")
from conftest import SANDBOX_MODULES
print(" ".join(str(f) for f in sorted(pathlib.Path("tests").glob("test_*.py"))
               if f.stem in SANDBOX_MODULES or "mark.sandbox" in f.read_text(encoding="utf-8")))')"
    echo "$label: pytest -m sandbox in $files"
    # shellcheck disable=SC2086
    as "$who" "$dir" python -m pytest -q -rs -n 2 --dist loadfile -m sandbox -p no:randomly \
        --junitxml="$dir/junit-sandbox.xml" $files \
        || rc=$?
    TIMES+=("$label: sandbox tests $(($(date +%s) - t0)) s")
    if [ "$rc" -ne 0 ]; then fail "$label: pytest -m sandbox exited $rc"; fi
    as "$who" "$dir" python tests/check_skips.py "$dir/junit-sandbox.xml" || fail "$label: check_skips"
}

setup_ci() {  # set-up 1 is .ci/run's own suite: its banner and doctor here, in the checkout's .venv
    banner "$(id -un)" "$REPO" "1: $(id -un), the checkout's .venv (.ci/run's main suite ran every test there)"
    doctor "$(id -un)" "$REPO" "set-up 1" ""
}

setup_world_readable_root() {
    local dir="$WORK/root-debian" t0
    t0=$(date +%s)
    copy_checkout "$dir" root
    make_venv root "$dir"
    TIMES+=("2 (root, Debian python3): copy + install $(($(date +%s) - t0)) s")
    banner root "$dir" "2: root, a world-readable Python (Debian's python3 and a venv): the worker becomes nobody"
    doctor root "$dir" "set-up 2" ""
    local before
    before="$(ps -u nobody -o pid= 2>/dev/null | tr -d ' ' || true)"  # its workers run as nobody
    sandbox_tests root "$dir" "set-up 2"
    # shellcheck disable=SC2086
    left_running nobody "set-up 2" $before
}

setup_non_root() {
    local who="$KATA_USER" home dir t0
    [ "$(id -u)" -ne 0 ] && who="$(id -un)"  # CI not root: the CI user is the non-root user
    if ! id "$who" >/dev/null 2>&1; then $SUDO useradd -m -s /bin/bash "$who"; fi
    home="$(getent passwd "$who" | cut -d: -f6)"
    dir="$home/attention-kata"
    t0=$(date +%s)
    copy_checkout "$dir" "$who"
    make_venv "$who" "$dir"
    TIMES+=("3 ($who): copy + install $(($(date +%s) - t0)) s")
    banner "$who" "$dir" "3: a non-root user ($who) with its own venv"
    # a grader that is not root cannot mount its workers a tmpfs: Landlock lets them write no file instead, so
    # every needed row must be active here too
    doctor "$who" "$dir" "set-up 3" ""
    local before=""
    [ "$who" = "$(id -un)" ] && before="$$ $(ps -u "$who" -o pid= | tr -d ' ' | tr '\n' ' ')"  # CI's own user
    sandbox_tests "$who" "$dir" "set-up 3"
    # shellcheck disable=SC2086
    left_running "$who" "set-up 3" $before
}

# Docker's default capability set (moby oci/caps/defaults.go)
DOCKER_CAPS="-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+setpcap,+net_bind_service,+net_raw"
DOCKER_CAPS+=",+sys_chroot,+mknod,+audit_write,+setfcap"

docker_wrap() {  # docker_wrap [--landlock-allowed]: sets WRAP, the command prefix of a Docker-like container
    # root; a mount namespace with every cgroup mount read-only (as a container sees them); Docker's bounding set,
    # the inheritable set emptied (root's capabilities after the exec are the bounding set); its seccomp profile
    local inner='findmnt -rn -o TARGET -R /sys/fs/cgroup | while read -r m; do mount -o remount,bind,ro "$m"; done
exec "$@"'
    WRAP=(unshare -m --propagation private sh -c "$inner" docker-emulation
        setpriv --bounding-set="$DOCKER_CAPS" --inh-caps=-all --
        "$SYSPY" .ci/docker_seccomp.py "$@" --)
    [ "$(id -u)" -eq 0 ] || WRAP=(sudo -n "${WRAP[@]}")
}

setup_docker() {  # setup_docker [1]: 1 also runs tests/test_gradescope.py and test_prairielearn.py in Docker 24+
    local dir="$WORK/root-debian" t0 rc before with_tests=${1:-0}
    before="$(ps -u nobody -o pid= 2>/dev/null | tr -d ' ' || true)"  # the workers run as nobody
    if [[ " ${SETUPS[*]} " != *" 2 "* ]]; then  # set-up 2's copy and venv, made here when it did not run
        copy_checkout "$dir" root
        make_venv root "$dir"
    fi
    t0=$(date +%s)
    # Docker before 24: its seccomp profile refuses Landlock's calls. Grading with a secret must refuse, saying why
    docker_wrap
    printf '\n======== set-up docker<24: root in a Gradescope/PrairieLearn-like container, Landlock refused\n'
    as root "$dir" "${WRAP[@]}" sh -c 'echo "id: $(id)"; grep -E "^Cap(Prm|Eff|Bnd)|^Seccomp:|^NoNewPrivs" /proc/self/status
        echo "python: $(readlink -f "$(command -v python)")"'
    rc=0
    as root "$dir" "${WRAP[@]}" env ATTN_KATA_SECRET="ci-canary-$RANDOM" attn-kata doctor || rc=$?
    if [ "$rc" -eq 0 ]; then fail "docker<24: doctor --secret passed though this container refuses Landlock"; fi
    as root "$dir" "${WRAP[@]}" python .ci/container_uploads.py || fail "docker<24: an upload breached (above)"
    TIMES+=("docker<24 emulation: $(($(date +%s) - t0)) s")
    # Docker 24+: Landlock allowed, still no namespaces, mounts or cgroups. A container holds one upload (the
    # "container" context: no tmpfs, no IPC namespace needed), so Gradescope's and PrairieLearn's runs must grade
    t0=$(date +%s)
    docker_wrap --landlock-allowed
    printf '\n======== set-up docker24+: the same container, Landlock allowed\n'
    rc=0
    as root "$dir" "${WRAP[@]}" env ATTN_KATA_SECRET="ci-canary-$RANDOM" attn-kata doctor || rc=$?
    echo "docker24+: doctor --secret exited $rc (its required rows are a shared host's; a container needs fewer)"
    if [ "$with_tests" = 1 ]; then  # `docker-tests`: the platforms' own tests too (about 2 minutes more)
        rc=0
        as root "$dir" "${WRAP[@]}" python -m pytest -q -rs -p no:randomly --junitxml="$dir/junit-docker.xml" \
            tests/test_gradescope.py tests/test_prairielearn.py || rc=$?
        if [ "$rc" -ne 0 ]; then fail "docker24+: test_gradescope/test_prairielearn exited $rc"; fi
        as root "$dir" python tests/check_skips.py "$dir/junit-docker.xml" || fail "docker24+: check_skips"
    fi
    as root "$dir" "${WRAP[@]}" python .ci/container_uploads.py || fail "docker24+: an upload breached (above)"
    TIMES+=("docker24+ emulation: $(($(date +%s) - t0)) s")
    # shellcheck disable=SC2086
    left_running nobody "docker" $before
}

for s in "${SETUPS[@]}"; do
    case "$s" in
        1) setup_ci ;;
        2) setup_world_readable_root ;;
        3) setup_non_root ;;
        docker) setup_docker ;;
        docker-tests) setup_docker 1 ;;
        *) echo "setups: unknown set-up '$s' (1, 2, 3, docker, docker-tests)" >&2; exit 2 ;;
    esac
done

printf '\n======== timings\n'
printf '  %s\n' "${TIMES[@]}"
if [ ${#FAILED[@]} -gt 0 ]; then
    printf '\n======== FAILED\n' >&2
    printf '  %s\n' "${FAILED[@]}" >&2
    exit 1
fi
echo "setups: every set-up passed"
