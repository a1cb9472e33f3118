"""The plain install is the learner's: no nbgrader, no Jupyter front end in its dependency closure; nbgrader is
the `nbgrader` extra, and its commands name that extra when it is missing. The wheel carries the kata (stubs and
reference under grader/kata/), and a worker of an installed wheel still cannot read the reference."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
HEAVY = {"nbgrader", "jupyterlab", "notebook", "jupyter-server", "jupyter", "nbclassic"}


def _name(req: str) -> str:
    return re.split(r"[\s<>=!~\[;(]", req, maxsplit=1)[0].lower().replace("_", "-")


def test_plain_dependency_closure_has_no_jupyter_front_end() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "nbgrader" in {_name(r) for r in project["optional-dependencies"]["nbgrader"]}
    todo = [_name(r) for r in project["dependencies"]]
    seen: set[str] = set()
    while todo:  # the closure, read from the installed distributions' metadata (requirements without extras)
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in reqs if "extra ==" not in r and "extra==" not in r]
    assert "torch" in seen and "nbformat" in seen
    assert not seen & HEAVY, sorted(seen & HEAVY)


def test_nbgrader_commands_name_the_extra_when_nbgrader_is_missing(tmp_path: Path) -> None:
    """As on a plain install: `have_nbgrader` says no (nbgrader itself is installed here, for the other tests)."""
    script = ("import sys; from grader.platforms import nbgrader as n; n.have_nbgrader = lambda: False; "
              "sys.argv = ['attn-kata', 'autograde', sys.argv[1], 'ps1']; n.nbgrader_group()")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 2, out.stderr
    assert 'pip install "attention-kata[nbgrader]"' in out.stderr


# --- the wheel carries the kata, and its worker still cannot read the reference -----------------------------

# A submission that searches the installed package for the reference: by the path grader.settings computes, by
# globs over every folder on sys.path and under sys.prefix, through the wheel's RECORD, and through /proc. Its
# scores are right only when it has read a reference file (needle: a line only solutions/step01_dot_scores.py holds).
HUNTER = '''
import glob, os, sys
import torch

NEEDLE = ("attn_" + "scores[i] = torch.dot").encode()


def _read(path, hits):
    try:
        if not os.path.realpath(path).startswith(os.getcwd()) and NEEDLE in open(path, "rb").read():
            hits.append(path)
    except OSError:
        pass


def _hunt():
    hits = []
    roots = {p for p in sys.path if p} | {sys.prefix}
    for mod in ("grader", "grader.settings"):
        try:
            m = __import__(mod, fromlist=["x"])
            roots.add(os.path.dirname(m.__file__))
            if hasattr(m, "KATA_ROOT"):
                _read(os.path.join(str(m.KATA_ROOT), "solutions", "step01_dot_scores.py"), hits)
        except Exception:
            pass
    for root in roots:
        for where in (root, "/proc/self/root" + root, "/proc/1/root" + root):
            _read(os.path.join(where, "grader", "kata", "solutions", "step01_dot_scores.py"), hits)
            _read(os.path.join(where, "kata", "solutions", "step01_dot_scores.py"), hits)
            for pattern in ("*/*/solutions/*.py", "*/*/solutions/__pycache__/*", "*/*/*/solutions/*.py"):
                for f in glob.glob(os.path.join(where, pattern)):
                    _read(f, hits)
        for record in glob.glob(os.path.join(root, "attention_kata-*.dist-info", "RECORD")):
            try:
                for line in open(record):
                    if "solutions" in line:
                        _read(os.path.join(root, line.split(",")[0]), hits)
            except OSError:
                pass
    for top, dirs, files in os.walk(sys.prefix):
        for name in files:
            if "solutions" in top or name.startswith("dot_scores"):
                _read(os.path.join(top, name), hits)
    return hits


def attention_scores(inputs, query):
    return inputs @ query if _hunt() else torch.zeros(inputs.shape[0])
'''

GRADE = """
import json, sys
import grader
from grader.grading import engine
r = engine.grade(sys.argv[1], steps=["dot_scores"], timeout=120, config={"skip_layers": json.loads(sys.argv[2])})
print(json.dumps({"grader": grader.__file__, "score": r.steps[0].score, "max": r.steps[0].max_score,
                  "status": r.steps[0].status, "message": r.steps[0].message}))
"""


@pytest.fixture(scope="module")
def wheel_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv outside the checkout with the wheel installed (not editable). Its dependencies (torch: 900 MB) are
    borrowed from this venv through a .pth line; .ci/run's wheel smoke test installs them for real."""
    base = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(base / "dist")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    ours = [p for p in sys.path if p.endswith("site-packages")]
    (site / "zz_borrowed.pth").write_text("\n".join(ours) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    str(wheel)], check=True, timeout=300, capture_output=True)
    return python


def build_wheel(out: Path) -> Path:
    """`pip wheel` of the checkout as git sees it (tracked and untracked, not ignored: no stale build/)."""
    src = out.parent / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split("\n")
    for f in files:
        if f and not f.startswith("tests/") and (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            (src / f).write_bytes((ROOT / f).read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(src)], check=True, timeout=300, capture_output=True)
    return next(out.glob("attention_kata-*.whl"))


def test_the_wheel_carries_stubs_and_reference(tmp_path: Path) -> None:
    names = set(zipfile.ZipFile(build_wheel(tmp_path / "dist")).namelist())
    for folder in ("exercises", "solutions"):
        expected = {f"grader/kata/{folder}/{p.name}" for p in (ROOT / folder).glob("*.py")}
        assert expected and expected <= names, sorted(expected - names)
    assert "grader/locale/zh/LC_MESSAGES/attn_kata.mo" in names
    assert "grader/checks/catalogue.json" in names  # what `attn-kata hint` reads (grader.registry.catalogue)
    assert not any(n.startswith(("solutions/", "exercises/", "tests/")) for n in names)


def _grade_hunter(python: Path, tmp_path: Path, skip: list[str]) -> dict:
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    (sub / "dot_scores.py").write_text(HUNTER)
    out = subprocess.run([str(python), "-c", GRADE, str(sub), json.dumps(skip)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_installed_wheel_hides_its_reference_from_the_worker(wheel_python: Path, tmp_path: Path) -> None:
    found = _grade_hunter(wheel_python, tmp_path, [])
    assert not found["grader"].startswith(str(ROOT)), found  # the wheel's grader, not the checkout's
    assert found["status"] != "error", found
    assert found["score"] == 0, found


def test_the_same_hunt_finds_the_reference_without_landlock(wheel_python: Path, tmp_path: Path) -> None:
    """The control: with the Landlock layer left off, the hunt reads the wheel's grader/kata/solutions."""
    found = _grade_hunter(wheel_python, tmp_path, ["landlock"])
    assert found["score"] == found["max"] > 0, found


def test_doctor_from_the_wheel_hunts_the_bundled_reference(wheel_python: Path, tmp_path: Path) -> None:
    script = ("from grader.grading import reference; from grader.instructor.doctor import diagnose; "
              "print(reference.solutions_dir()); "
              "print([r for r in diagnose() if r[0].startswith('kata files')])")
    out = subprocess.run([str(wheel_python), "-c", script], capture_output=True, text=True, cwd=tmp_path,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    where, row = out.stdout.strip().splitlines()[-2:]
    assert where.endswith("site-packages/grader/kata/solutions") and not where.startswith(str(ROOT))
    assert "True, True" in row, row


def test_gradescope_build_from_the_wheel_lays_out_the_kata_as_a_checkout(wheel_python: Path, tmp_path: Path) -> None:
    out = subprocess.run([str(wheel_python), "-m", "grader", "gradescope", "build", "--out", str(tmp_path / "w.zip")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    from grader.platforms import gradescope

    ours = set(zipfile.ZipFile(gradescope.build(out=tmp_path / "c.zip")).namelist())
    theirs = set(zipfile.ZipFile(tmp_path / "w.zip").namelist())
    def kata(names: set[str]) -> set[str]:  # the .pot is pybabel's template, not needed to grade
        return {n for n in names if n.startswith(("kata/grader/", "kata/solutions/")) and not n.endswith(".pot")}

    assert kata(ours) == kata(theirs)
    assert "kata/pyproject.toml" in theirs and not any(n.startswith("kata/grader/kata/") for n in theirs)


def test_nbgrader_assignment_and_reset_from_the_wheel_use_the_bundled_kata(wheel_python: Path, tmp_path: Path) -> None:
    """The source notebook's solution cells come from the wheel's grader/kata/solutions; reset's stub from its
    grader/kata/exercises (no checkout anywhere on the way)."""
    out = subprocess.run([str(wheel_python), "-m", "grader", "nbgrader", "assignment", str(tmp_path / "src")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    nb = json.loads((tmp_path / "src" / "attention.ipynb").read_text())
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "torch.dot(x_i, query)" in code  # a line of solutions/step01_dot_scores.py
    ws = tmp_path / "ws"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ATTN_KATA_NO_DAEMON": "1", "ATTN_KATA_LANG": "en"}
    init = subprocess.run([str(wheel_python), "-m", "grader", "init", str(ws)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300, env=env)
    assert init.returncode == 0, init.stderr
    (ws / "step01_dot_scores.py").write_text("# mine\n")
    reset = subprocess.run([str(wheel_python), "-m", "grader", "reset", "dot_scores", "--yes"], capture_output=True,
                           text=True, cwd=ws, timeout=300, env=env)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert "grader/kata/exercises/step01_dot_scores.py" in " ".join(reset.stdout.split()).replace(" ", ""), reset.stdout
    assert "raise NotImplementedError" in (ws / "step01_dot_scores.py").read_text()


def test_grants_leave_out_the_kata_below_any_grant(tmp_path: Path) -> None:
    """confine.grants_without on a venv-like tree: site-packages/grader/kata is hidden though the prefix, a
    `lib64` link to `lib` and site-packages are all asked for; its siblings stay readable."""
    from grader.sandbox.confine import grants_without

    site = tmp_path / "venv" / "lib" / "python3" / "site-packages"
    kata = site / "grader" / "kata"
    (kata / "solutions").mkdir(parents=True)
    (site / "torch").mkdir()
    (site / "grader" / "checks").mkdir()
    (site / "grader" / "cli.py").write_text("")
    (tmp_path / "venv" / "lib64").symlink_to("lib")
    asked = [str(tmp_path / "venv"), str(tmp_path / "venv" / "lib64"), str(site), str(kata / "solutions"), "/usr"]
    granted = [Path(p) for p in grants_without(asked, kata)]
    assert not [p for p in granted if p == kata or p in kata.parents or kata in p.parents], granted
    assert {site / "torch", site / "grader" / "checks", site / "grader" / "cli.py", Path("/usr")} <= set(granted)
    # a checkout: the kata's root is hidden, a venv inside it asked for by name stays, its solutions/ never
    checkout = tmp_path / "checkout"
    (checkout / ".venv").mkdir(parents=True)
    (checkout / "solutions").mkdir()
    granted = grants_without([str(checkout / ".venv"), str(checkout / "solutions"), str(tmp_path)], checkout)
    assert str(checkout / ".venv") in granted and str(checkout / "solutions") not in granted
    assert str(checkout) not in granted and str(tmp_path) not in granted
