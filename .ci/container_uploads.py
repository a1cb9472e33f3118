"""Uploads that go for the course secret and the kata's solutions, graded as Gradescope and PrairieLearn grade them,
inside whatever container .ci/setups.sh emulates (Docker's capabilities and seccomp profile, as root). Run from a
checkout, with its venv's python:

    python .ci/container_uploads.py

For each platform: the autograder as `attn-kata gradescope build` / `prairielearn build` makes it, laid out as the
platform lays it out, the course secret in secret.txt (mode 0600, root's, as the zip carries it), then three uploads:
  honest   the reference's step 1: full marks on it whenever the run grades at all;
  thief    reads the kata's solutions/step01_dot_scores.py by its path and answers with it (zeros if it cannot);
  leak     reads secret.txt, every /proc/PID/environ and cmdline it can, and raises with what it found, so anything
           it reads lands in the feedback.
Passes when each run either refuses to grade with a reason that names the missing layer, or grades with the thief
at 0 on step 1 and no secret anywhere in the results. Where a run refused, for the record only (an instructor's
waiver): what the same uploads reach under `attn-kata grade --secret ... --allow-weak-sandbox`. Exits 1 on any
breach.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECRET = "course-secret-" + os.urandom(8).hex()
REFUSAL_WORDS = ("WeakSandbox", "sandbox")

THIEF = """
import torch
try:
    REF = open({solutions!r} + "/step01_dot_scores.py", encoding="utf-8").read()
except OSError as e:
    REF = None
def attention_scores(inputs, query):
    if REF is None:
        return torch.zeros(inputs.shape[0])
    ns = {{}}
    exec(REF, ns)
    return ns["attention_scores"](inputs, query)
"""

LEAK = """
import os, torch
FOUND = []
for path in ({secret_file!r},):
    try:
        FOUND.append("file:" + open(path, encoding="utf-8").read().strip())
    except OSError as e:
        pass
try:
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
except OSError:
    pids = []
for pid in pids:
    for part in ("environ", "cmdline"):
        try:
            data = open("/proc/%s/%s" % (pid, part), "rb").read()
        except OSError:
            continue
        chunks = data.split(b"\\0")
        for i, chunk in enumerate(chunks):
            if b"secret" in chunk.lower():  # ATTN_KATA_SECRET=..., or --secret and the value after it
                FOUND.append("proc:" + b" ".join(chunks[i:i + 2]).decode("utf-8", "replace")[:200])
def attention_scores(inputs, query):
    if FOUND:
        raise RuntimeError("LEAKED " + " | ".join(FOUND))
    return torch.zeros(inputs.shape[0])
"""


def py(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=env or clean_env())


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_KATA_")}
    return {**env, "ATTN_KATA_NO_DAEMON": "1", "ATTN_KATA_LANG": "en", "ATTN_KATA_PYTHON": sys.executable, **extra}


def extract(zip_path: Path, dest: Path) -> None:
    """As unzip does: each file with the mode the zip gives it (zipfile.extractall drops modes)."""
    with zipfile.ZipFile(zip_path) as zf:
        for info in zf.infolist():
            out = Path(zf.extract(info, dest))
            mode = (info.external_attr >> 16) & 0o777
            if mode and out.is_file():
                out.chmod(mode)


def gradescope_tree(work: Path) -> tuple[Path, Path, Path]:
    """(the root, the secret file, the solutions folder) of a Gradescope /autograder."""
    work.mkdir(parents=True, exist_ok=True)
    zip_path = work / "autograder.zip"
    proc = py("-m", "grader", "gradescope", "build", "--out", str(zip_path), "--secret", SECRET, cwd=ROOT)
    if proc.returncode != 0:  # an older build without --secret: the secret added as the zip would carry it
        proc = py("-m", "grader", "gradescope", "build", "--out", str(zip_path), cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
    root = work / "autograder"
    (root / "submission").mkdir(parents=True)
    extract(zip_path, root / "source")
    secret = root / "source" / "secret.txt"
    if not secret.exists():
        secret.write_text(SECRET, encoding="utf-8")
    secret.chmod(0o600)
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    return root, secret, root / "source" / "kata" / "solutions"


def gradescope_run(root: Path, upload: str) -> tuple[dict, str]:
    sub = root / "submission"
    shutil.rmtree(sub)
    sub.mkdir()
    (sub / "attention.py").write_text(upload, encoding="utf-8")
    proc = subprocess.run(["bash", str(root / "run_autograder")], cwd=root, capture_output=True, text=True,
                          timeout=600, env=clean_env(AUTOGRADER_ROOT=str(root)))
    doc = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    tests = [t for t in doc.get("tests", []) if "dot_scores" in t.get("tags", [])]
    graded = bool(doc.get("tests"))
    return ({"graded": graded, "score": sum(t["score"] for t in tests), "max": sum(t["max_score"] for t in tests),
             "message": doc.get("output", "")}, json.dumps(doc) + proc.stdout + proc.stderr)


def prairielearn_tree(work: Path) -> tuple[Path, Path, Path]:
    work.mkdir(parents=True, exist_ok=True)
    question = work / "question"
    proc = py("-m", "grader", "--lang", "en", "prairielearn", "build", str(question), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    root = work / "grade"
    shutil.copytree(question / "tests", root / "tests")
    (root / "student").mkdir()
    (root / "data").mkdir()
    (root / "data" / "data.json").write_text("{}")
    secret = root / "tests" / "secret.txt"
    secret.write_text(SECRET, encoding="utf-8")
    secret.chmod(0o600)
    return root, secret, root / "tests" / "kata" / "solutions"


def prairielearn_run(root: Path, upload: str) -> tuple[dict, str]:
    student = root / "student"
    shutil.rmtree(student)
    student.mkdir()
    (student / "attention.py").write_text(upload, encoding="utf-8")
    shutil.rmtree(root / "results", ignore_errors=True)
    proc = subprocess.run(["bash", str(root / "tests" / "run.sh")], cwd=root, capture_output=True, text=True,
                          timeout=600, env=clean_env(PL_GRADE_ROOT=str(root)))
    doc = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    tests = [t for t in doc.get("tests", []) if t["name"].startswith("1. dot_scores")]
    graded = doc.get("gradable", True) is not False
    return ({"graded": graded, "score": sum(t["points"] for t in tests), "max": sum(t["max_points"] for t in tests),
             "message": doc.get("message", "") or "; ".join(doc.get("format_errors", []))},
            json.dumps(doc) + proc.stdout + proc.stderr)


def weak(kata: Path, upload: str, work: Path) -> dict:
    """The same upload under an instructor's waiver (--allow-weak-sandbox): what the worker can reach here."""
    path = work / "weak.py"
    path.write_text(upload, encoding="utf-8")
    env = clean_env(PYTHONPATH=str(kata), ATTN_KATA_SOLUTIONS=str(kata / "solutions"))
    proc = py("-m", "grader", "grade", str(path), "--step", "dot_scores", "--format", "json", "--secret", "waived-key",
              "--allow-weak-sandbox", cwd=kata, env=env)
    try:
        step = json.loads(proc.stdout)["steps"][0]
    except (ValueError, KeyError, IndexError):
        return {"error": (proc.stderr or proc.stdout)[-300:]}
    detail = next((c.get("message", "") for c in step.get("checks", []) if "LEAKED" in c.get("message", "")), "")
    detail = detail[detail.find("LEAKED"):][:300]
    return {"score": step["score"], "max": step["max_score"], "status": step["status"],
            "secret_read": "waived-key" in proc.stdout, "detail": detail if "LEAKED" in proc.stdout else ""}


def main() -> int:
    print(f"container uploads: uid {os.geteuid()}, python {sys.executable}")
    status = Path("/proc/self/status").read_text().splitlines()
    print("  ", " ".join(line.strip() for line in status if line.startswith(("CapEff", "CapBnd", "Seccomp:"))))
    honest = (ROOT / "solutions" / "step01_dot_scores.py").read_text(encoding="utf-8")
    breaches: list[str] = []
    work = Path(tempfile.mkdtemp(prefix="attn-kata-container-"))
    work.chmod(0o755)  # a container's /autograder: root's, readable by all
    try:
        for platform, make, run in (("gradescope", gradescope_tree, gradescope_run),
                                    ("prairielearn", prairielearn_tree, prairielearn_run)):
            root, secret_file, solutions = make(work / platform)
            print(f"\n{platform}: secret in {secret_file} (mode {stat.filemode(secret_file.stat().st_mode)})")
            uploads = {"honest": honest, "thief": THIEF.format(solutions=str(solutions)),
                       "leak": LEAK.format(secret_file=str(secret_file))}
            refused = False
            for name, upload in uploads.items():
                res, everything = run(root, textwrap.dedent(upload))
                refused = refused or not res["graded"]
                line = f"  {name:6s} graded={res['graded']} dot_scores {res['score']}/{res['max']}"
                if not res["graded"] or not res["max"]:
                    line += f" | {res['message'][:400]}"
                print(line)
                if SECRET in everything:
                    breaches.append(f"{platform}/{name}: the course secret appears in the results or the output")
                if not res["graded"] or not res["max"]:
                    if not any(w in res["message"] for w in REFUSAL_WORDS):
                        breaches.append(f"{platform}/{name}: not graded, without a sandbox reason: {res['message']}")
                elif name == "honest" and res["score"] != res["max"]:
                    breaches.append(f"{platform}/honest: graded but not full marks on step 1 ({res['score']})")
                elif name != "honest" and res["score"] != 0:
                    breaches.append(f"{platform}/{name}: {res['score']}/{res['max']} on step 1 from what it read")
            if refused:  # what the refusal keeps from a student here: the same uploads under an instructor's waiver
                kata = solutions.parent
                print(f"  with --allow-weak-sandbox (for the record): thief {weak(kata, uploads['thief'], work)}")
                print(f"  with --allow-weak-sandbox (for the record): leak {weak(kata, uploads['leak'], work)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for b in breaches:
        print("BREACH:", b, file=sys.stderr)
    print("container uploads:", "breached" if breaches else "no upload read the secret or the solutions for marks")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
