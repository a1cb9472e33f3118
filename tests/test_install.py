"""Install instructions that are right on a machine that is not this one (issue 25): torch's CPU build from
PyTorch's CPU index, the kata from a wheel, a git URL or the registry, Jupyter as the `[notebook]` extra, a release
workflow, and a GitHub Classroom install line that works before the package is published."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grader.platforms import classroom

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def readme_commands() -> list[str]:
    """Every line of the README's bash blocks (comments dropped)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        lines += [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    return lines


def test_every_readme_torch_install_takes_the_cpu_build() -> None:
    """A bare `pip install torch` on Linux resolves to the CUDA build (18 nvidia wheels and triton)."""
    torch_lines = [line for line in readme_commands() if re.search(r"pip install[^&]*\btorch\b", line)]
    assert len(torch_lines) >= 3, torch_lines
    for line in torch_lines:
        for part in line.split("&&"):
            if re.search(r"pip install .*\btorch\b", part):
                # or the fallback where PyTorch's index is blocked (issue 38): a local CPU wheel, or a mirror of
                # the CPU index (pip picks torch-X+cpu from find-links over PyPI's torch-X: a local label sorts higher)
                fallback = "--find-links DIR" in part or re.match(r"PIP_INDEX_URL=\S+/whl/cpu ", part)
                assert CPU_INDEX in part or fallback, line


def test_the_readme_installs_the_kata_from_a_wheel_a_git_url_and_the_registry_and_names_jupyter() -> None:
    lines = readme_commands()
    assert any(re.fullmatch(r"pip install attention_kata-[\d.]+-py3-none-any\.whl", line) for line in lines), lines
    assert any(re.fullmatch(r'pip install "attention-kata @ git\+https://\S+@v[\d.]+"', line) for line in lines)
    assert "pip install attention-kata" in lines
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert 'pip install "attention-kata[notebook]"' in text and "jupyter lab attention.ipynb" in text


def test_the_notebook_extra_brings_jupyter_and_a_kernel() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # (tomllib is 3.11+; the kata runs on 3.10)
    extra = re.search(r"^notebook = \[(.*)\]$", text, flags=re.M)
    assert extra and '"jupyterlab>=4"' in extra.group(1) and '"ipykernel>=6"' in extra.group(1)
    dependencies = re.search(r"^dependencies = \[(.*?)^\]", text, flags=re.M | re.S)
    assert dependencies and "jupyter" not in dependencies.group(1)  # a terminal learner installs none of it


def test_the_release_workflow_builds_tests_then_publishes_a_tag_with_trusted_publishing() -> None:
    path = ROOT / ".github" / "workflows" / "release.yml"
    ok = subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path)],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wf = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert wf[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as true
    jobs = wf["jobs"]
    assert jobs["test"]["needs"] == "build" and jobs["publish"]["needs"] == "test"
    publish = jobs["publish"]
    assert publish["permissions"] == {"id-token": "write"} and publish["environment"]["name"] == "pypi"
    assert publish["steps"][-1]["uses"].startswith("pypa/gh-action-pypi-publish@")
    assert not any("password" in (s.get("with") or {}) for s in publish["steps"])  # no token: trusted publishing
    runs = "\n".join(s.get("run", "") for s in jobs["test"]["steps"])
    assert CPU_INDEX in runs and "attention_kata-*.whl" in runs and "attn-kata\" check dot_scores" in runs
    assert "python -m build" in "\n".join(s.get("run", "") for s in jobs["build"]["steps"])


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          timeout=60).stdout.strip()


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    repo = tmp_path / "kata"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "f").write_text("x\n")
    git(repo, "add", "f")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")
    return repo


def test_classroom_installs_from_the_clone_it_runs_from_before_publication(clone: Path) -> None:
    """A clone with a remote: that repository at this commit, over https (a runner has no ssh key)."""
    commit = git(clone, "rev-parse", "HEAD")
    git(clone, "remote", "add", "origin", "git@github.com:teacher/attention-kata.git")
    want = f"attention-kata @ git+https://github.com/teacher/attention-kata.git@{commit}"
    assert classroom.default_install(clone) == want
    git(clone, "tag", f"v{classroom.grader_version()}")  # the version's tag, where it is this commit
    assert classroom.default_install(clone).endswith(f".git@v{classroom.grader_version()}")
    text = classroom.workflow(install=classroom.default_install(clone))
    assert '"attention-kata @ git+https://github.com/teacher/attention-kata.git@v' in text


def test_classroom_without_a_usable_remote_falls_back_to_the_registry(clone: Path, tmp_path: Path) -> None:
    version = classroom.grader_version()
    assert classroom.default_install(clone) == f"attention-kata=={version}"  # no remote
    git(clone, "remote", "add", "origin", str(tmp_path))  # a local path is no use on a runner
    assert classroom.default_install(clone) == f"attention-kata=={version}"
    assert classroom.default_install(tmp_path / "nowhere") == f"attention-kata=={version}"
