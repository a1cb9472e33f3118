#!/usr/bin/env bash
# The kata as a learner who never clones it gets it: the wheel, built from this checkout, installed (torch first)
# into a fresh venv outside the checkout, used from an empty folder: init, list, check on the stub (not started,
# exit 1), step 1 solved and checked from a subfolder (exit 0), then a notebook that grades its own function with
# check(), run through nbclient on that venv's own kernel. Called by .ci/run; needs the dev venv active (it builds
# with its setuptools) and the network or a local index for torch.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d /tmp/attn-kata-wheel.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
export ATTN_KATA_NO_DAEMON=1 ATTN_KATA_LANG=en  # nothing left running after the script; English output to match

step() { printf '\n== %s\n' "$*"; }
expect_rc() {  # expect_rc CODE command...: run it, fail unless it exits with CODE
    local want=$1 rc=0
    shift
    "$@" >"$WORK/out" 2>&1 || rc=$?
    cat "$WORK/out"
    if [ "$rc" -ne "$want" ]; then echo "wheel smoke: '$*' exited $rc, expected $want" >&2; exit 1; fi
}

step "build the wheel from what git sees (no stale build/ folder)"
mkdir "$WORK/src"
(cd "$REPO" && git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
    [ -f "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$WORK/src")
python -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/dist" "$WORK/src"
WHEEL="$(ls "$WORK"/dist/attention_kata-*.whl)"
rm -rf "$WORK/src"
ls -l "$WHEEL"

step "a fresh venv outside the checkout: torch first, then the wheel (not editable)"
python3 -m venv "$WORK/venv"
V="$WORK/venv/bin"
start=$(date +%s)
"$V/pip" install -q torch==2.13.0
torch_done=$(date +%s)
"$V/pip" install -q "$WHEEL"
echo "install times: torch $((torch_done - start)) s, the wheel and its dependencies $(($(date +%s) - torch_done)) s"
echo "venv size, plain install: $(du -sh "$WORK/venv" | cut -f1)"
cd "$WORK"  # not the checkout: `python -c` would import its grader/ from the current folder
"$V/python" -c "import grader, sys; assert grader.__file__.startswith(sys.prefix), grader.__file__; print(grader.__file__)"

step "from an empty folder: init, list, check the stub"
mkdir "$WORK/empty"
cd "$WORK/empty"
"$V/attn-kata" --version
expect_rc 0 "$V/attn-kata" init ws
cd ws
expect_rc 0 "$V/attn-kata" list
expect_rc 1 "$V/attn-kata" check dot_scores
grep -q "not started" "$WORK/out"

step "step 1 solved, checked from a subfolder"
cp "$REPO/solutions/step01_dot_scores.py" step01_dot_scores.py
mkdir -p notes/today
cd notes/today
expect_rc 0 "$V/attn-kata" check dot_scores
grep -q "passed" "$WORK/out"

step "a notebook grades its own function with check(), on this venv's kernel"
# the light install has no Jupyter: a learner's Jupyter brings a kernel; here nbclient and ipykernel, in this venv
"$V/pip" install -q nbclient ipykernel
cd "$WORK/empty"
"$V/python" - "$REPO/solutions/step01_dot_scores.py" <<'EOF'
import sys

import nbclient
import nbformat

solution = open(sys.argv[1], encoding="utf-8").read()
cells = ["from grader import check", solution, 'r = check("dot_scores")', 'check("softmax")',
         "print(r.score, r.max_score)"]
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
nbclient.NotebookClient(nb, timeout=600, kernel_name="python3").execute()
html = ["".join(o.get("data", {}).get("text/html", "") for o in nb.cells[i].outputs) for i in (2, 3)]
assert [len(nb.cells[i].outputs) for i in (2, 3)] == [1, 1], [nb.cells[i].outputs for i in (2, 3)]
assert "passed" in html[0] and "not started" in html[1], html
score, top = nb.cells[4].outputs[0]["text"].split()
assert float(score) == float(top) > 0, (score, top)
print(f"notebook: dot_scores {score}/{top} through check(); softmax not started; one output per check()")
EOF
echo "wheel smoke test passed"
