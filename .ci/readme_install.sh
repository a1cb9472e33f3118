#!/usr/bin/env bash
# The README's install, as written (issue 25): the "Without a clone" block and the notebook block, run line by
# line by a user that is not root, with Debian's own /usr/bin/python3 (an externally managed Python: pip refuses
# outside a venv), in an empty folder. The wheel built from this checkout stands in for the wheel file the README
# names and for PyPI (PIP_FIND_LINKS); the git line names a placeholder repository and is only shown. PyTorch's
# CPU index is made unreachable (issue 38) and the README's fallback block followed: its fail-fast line must fail
# within a minute, then its find-links line installs a local copy of the pinned CPU wheel; the torch installed is
# checked to be the CPU build (torch.version.cuda is None) after the torch line and after the kata's line.
# Called by .ci/run after wheel_smoke.sh; needs the dev venv active (its setuptools builds the wheel).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d /tmp/attn-kata-readme.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
chmod 0755 "$WORK"
SYSTEM_PY=/usr/bin/python3
[ -x "$SYSTEM_PY" ] || { echo "readme install: no $SYSTEM_PY (apt-get install python3-venv)" >&2; exit 1; }

echo "== the README's blocks"
python - "$REPO/README.md" "$WORK" <<'EOF'
import re, sys
from pathlib import Path
text, work = Path(sys.argv[1]).read_text(encoding="utf-8"), Path(sys.argv[2])
blocks = re.findall(r"<!-- ci: \.ci/readme_install\.sh runs this block[^\n]*-->\n```bash\n(.*?)```", text, re.S)
assert len(blocks) == 2, f"expected the install block and the notebook block, found {len(blocks)}"
for name, block in zip(("install.txt", "notebook.txt"), blocks):
    (work / name).write_text(block, encoding="utf-8")
    print(f"-- {name}\n{block}")
fallback = re.findall(r"<!-- ci: \.ci/readme_install\.sh follows this block[^\n]*-->\n```bash\n(.*?)```", text, re.S)
assert len(fallback) == 1, f"expected the blocked-index fallback block once, found {len(fallback)}"
(work / "fallback.txt").write_text(fallback[0], encoding="utf-8")
print(f"-- fallback.txt\n{fallback[0]}")
EOF

echo "== a local wheel for the fallback: the pinned CPU torch from this machine's find-links (else pip download)"
TORCH_PIN="$(sed -n 's/^TORCH_PIN = "\(.*\)"$/\1/p' "$REPO/grader/torch_pin.py")"
mkdir "$WORK/wheels"
for d in ${PIP_FIND_LINKS:-} $(python -m pip config get global.find-links 2>/dev/null || true); do
    for w in "${d#file://}"/torch-"$TORCH_PIN"+cpu-*.whl; do [ -f "$w" ] && ln -sf "$w" "$WORK/wheels/"; done
done
ls "$WORK"/wheels/torch-*.whl >/dev/null 2>&1 || python -m pip download -q --no-deps "torch==$TORCH_PIN" \
    --index-url https://download.pytorch.org/whl/cpu -d "$WORK/wheels"
ls "$WORK/wheels"
chmod a+rx "$WORK/wheels"

echo "== the wheel, under the name the README gives it"
mkdir "$WORK/src" "$WORK/dist"
(cd "$REPO" && git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
    [ -f "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$WORK/src")
python -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/dist" "$WORK/src"
rm -rf "$WORK/src"
named=$(grep -o 'attention_kata-[0-9.]*-py3-none-any\.whl' "$WORK/install.txt" | head -1)
built=$(cd "$WORK/dist" && ls attention_kata-*.whl)
[ "$named" = "$built" ] || { echo "readme install: the README names $named, the checkout builds $built" >&2; exit 1; }
mkdir "$WORK/home"
cp "$WORK/dist/$built" "$WORK/home/"
chmod -R a+rX "$WORK/dist" "$WORK/home"

# one line at a time, as a learner pastes them; the git line is shown, not run (a placeholder repository)
cat >"$WORK/run.sh" <<EOF
set -euo pipefail
cd "$WORK/home"
run() { printf '\$ %s\n' "\$1"; eval "\$1"; }
while IFS= read -r line; do
    case "\$line" in
        ""|"#"*) continue ;;
        *git+https://github.com/OWNER/*) printf '(shown, not run: a placeholder repository) %s\n' "\$line" ;;
        *"--index-url https://download.pytorch.org/whl/cpu"*)
            # PyTorch's CPU index made unreachable (issue 38), and pip given no other source: the fallback's first
            # line fails, fast; then its find-links line, DIR a folder holding the pinned CPU wheel, installs it
            first=\$(grep -m1 -- '--retries' "$WORK/fallback.txt" | sed 's/  *#.*//')
            blocked="\${first/https:\/\/download.pytorch.org\/whl\/cpu/http:\/\/127.0.0.1:9\/whl\/cpu}"
            began=\$(date +%s)
            if run "env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null \$blocked"
            then echo "readme install: torch installed from an unreachable index"; exit 1; fi
            took=\$((\$(date +%s) - began))
            echo "(PyTorch's CPU index unreachable: the line failed in \$took s; now the README's fallback)"
            [ "\$took" -lt 60 ] || { echo "readme install: the blocked index held pip for \$took s"; exit 1; }
            local_wheel=\$(grep -m1 -- '--find-links DIR' "$WORK/fallback.txt" | sed 's/  *#.*//')
            PIP_FIND_LINKS="$WORK/wheels" run "\${local_wheel//DIR/$WORK/wheels}"
            python -c "import torch; assert torch.version.cuda is None, torch.version.cuda; print('torch', torch.__version__, 'CPU')" ;;
        "pip install attention-kata "*|"pip install attention-kata")
            pip uninstall -q -y attention-kata  # so that the registry line installs it again, from the stand-in
            PIP_FIND_LINKS="$WORK/dist" run "\$line" ;;
        "cd attention-kata && attn-kata check")
            rc=0; run "\$line" || rc=\$?
            [ "\$rc" -eq 1 ] || { echo "readme install: check on the untouched stubs exited \$rc, not 1"; exit 1; }
            cd "$WORK/home" ;;
        *) run "\$line" ;;
    esac
done <"$WORK/install.txt"
python -c "import grader, sys; assert grader.__file__.startswith(sys.prefix), grader.__file__"
python -c "import torch; assert torch.version.cuda is None, torch.version.cuda"  # the kata's line kept the CPU build
! attn-kata --version 2>&1 | grep 'CUDA build'
[ "\$(command -v python3)" = "$WORK/home/.venv/bin/python3" ]
"$WORK/home/.venv/bin/python3" -c "import sys; assert sys.base_prefix == '/usr', sys.base_prefix"
run 'pip install "$built[notebook]"'
while IFS= read -r line; do
    case "\$line" in
        ""|"#"*) continue ;;
        *"jupyter lab "*)  # the server is not started here: the command exists and the notebook is there
            run "\${line%%jupyter lab*}jupyter lab --version"; run "test -s \${line##*jupyter lab }" ;;
        *) run "\$line" ;;
    esac
done <"$WORK/notebook.txt"
echo "readme install passed as \$(id -un), Python \$(python -c 'import platform; print(platform.python_version())') from /usr"
EOF
chmod a+r "$WORK/run.sh"

echo "== as a user that is not root"
export ATTN_KATA_NO_DAEMON=1 ATTN_KATA_LANG=en
if [ "$(id -u)" -eq 0 ]; then
    id kata-ci >/dev/null 2>&1 || useradd --create-home --shell /bin/bash kata-ci
    chown -R kata-ci: "$WORK/home"
    # this machine's pip set-up (its index mirror, find-links), which root has in its own config and environment,
    # for that user too: the README's commands are the subject, not where this machine keeps its packages
    KHOME="$(getent passwd kata-ci | cut -d: -f6)"
    mkdir -p "$KHOME/.config/pip"
    { echo "[global]"; python -m pip config list | sed -E "s/^[^.]*\.([a-z-]+)='(.*)'$/\1 = \2/" | awk '!seen[$1]++'; } \
        >"$KHOME/.config/pip/pip.conf"
    chown -R kata-ci: "$KHOME/.config"
    setpriv --reuid=kata-ci --regid=kata-ci --init-groups -- env -i HOME="$KHOME" \
        PATH=/usr/bin:/bin LANG=C.UTF-8 ATTN_KATA_NO_DAEMON=1 ATTN_KATA_LANG=en \
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_RETRIES=0 bash "$WORK/run.sh"
else
    env PATH=/usr/bin:/bin PIP_RETRIES=0 bash "$WORK/run.sh"
fi
