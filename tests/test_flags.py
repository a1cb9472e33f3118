"""Signs of code that studies the grader (grader/grading/flags.py): found in hostile forms, never in honest code,
reported to the instructor and never a change of score."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from inproc import kata as run_in_process

from grader.grading import engine, flags, ingest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import submissions  # noqa: E402
from test_redteam import FORGE, MODULE_CA  # noqa: E402

HONEST = [ROOT / "solutions", *sorted((ROOT / "tests" / "fixtures" / "correct").iterdir()),
          *sorted((ROOT / "tests" / "fixtures" / "buggy").glob("*.py"))]

# (code, the sign it must raise): forms the red-team helpers used, or their next of kin
HOSTILE = {
    "import_probes": ("import grader.worker.probes as p\n", flags.GRADER),
    "dunder_import": ("p = __import__('grader.worker.probes')\n", flags.GRADER),
    "sys_modules": ("import sys\np = sys.modules['grader.worker.probes']\n", flags.GRADER),
    "getframe": ("import sys\ndef f():\n    return sys._getframe(1).f_locals\n", flags.FRAMES),
    "inspect_stack": ("from inspect import currentframe\nfr = currentframe()\n", flags.FRAMES),
    "traceback_frame": ("try:\n    1/0\nexcept Exception as e:\n    fr = e.__traceback__.tb_frame\n", flags.FRAMES),
    "gc_objects": ("import gc\nobjs = gc.get_objects()\n", flags.HEAP),
    "apply_override": ("import torch.nn as nn\nclass M(nn.Module):\n    def _apply(self, fn, recurse=True):\n"
                       "        return super()._apply(fn, recurse)\n", flags.OVERRIDE),
    "named_buffers_assigned": ("import torch.nn as nn\nclass M(nn.Module):\n    pass\n"
                               "M.named_buffers = lambda self: iter(())\n", flags.OVERRIDE),
    "setattr_reporting": ("import torch.nn as nn\nsetattr(nn.Module, 'state_dict', None)\n", flags.PATCH),
    "torch_patched": ("import torch\ntorch.allclose = lambda *a, **k: True\n", flags.PATCH),
    "tuple_target": ("import torch\nx, torch.softmax = 1, None\n", flags.PATCH),
    "builtins_patched": ("import builtins\nbuiltins.isinstance = lambda *a: True\n", flags.PATCH),
    "sys_modules_store": ("import sys\nsys.modules['torch'] = None\n", flags.PATCH),
    "ctypes": ("import ctypes\n", flags.OUTSIDE),
    "proc": ("open('/proc/self/maps').read()\n", flags.OUTSIDE),
    "fork": ("import os\nos.fork()\n", flags.OUTSIDE),
    "fullwidth": ("import sys\nfr = sys._ｇｅｔｆｒａｍｅ(0)\n", flags.FRAMES),
    # step 4's work is counted under torch's modes (grader/worker/counting.py; tests/test_loops.py)
    "modes_off": ("import torch\nwith torch._C.DisableTorchFunction():\n    pass\n", flags.MODES),
    "modes_popped": ("from torch.utils._python_dispatch import _disable_current_modes\n", flags.MODES),
    "settrace": ("import sys\nsys.settrace(None)\n", flags.FRAMES),
}


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.name)
def test_honest_code_raises_no_flag(path: Path) -> None:
    assert flags.scan(ingest.read_submission(path)) == []


def test_the_books_notebook_raises_no_flag(tmp_path: Path) -> None:
    nb = tmp_path / "book.ipynb"
    nb.write_text(submissions.notebook_source(None), encoding="utf-8")
    assert flags.scan(ingest.read_submission(nb)) == []


def test_configuring_torch_is_no_patch(tmp_path: Path) -> None:
    p = tmp_path / "config.py"
    p.write_text("import torch\ntorch.backends.cudnn.deterministic = True\ntorch.manual_seed(123)\n")
    assert flags.scan(ingest.read_submission(p)) == []


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_forms_are_flagged(tmp_path: Path, name: str) -> None:
    code, sign = HOSTILE[name]
    p = tmp_path / f"{name}.py"
    p.write_text(code, encoding="utf-8")
    found = flags.scan(ingest.read_submission(p))
    what = flags.translate("en", sign).split("`")[0]  # OVERRIDE names the method after its first backtick
    assert any(f["what"].startswith(what) for f in found), found
    assert all(f["where"].startswith(f"{name}.py, line ") for f in found)


def test_a_flag_is_reported_and_changes_no_score(tmp_path: Path) -> None:
    """The red-team's forged buffer (test_redteam.FORGE): the JSON report lists where it studies the grader, in
    the report's language, and the score is its honest twin's."""
    twin, forged = tmp_path / "twin.py", tmp_path / "forged.py"
    twin.write_text(MODULE_CA)
    forged.write_text(MODULE_CA + FORGE)
    want = engine.grade(twin, steps=["causal_attention"])
    got = engine.grade(forged, steps=["causal_attention"])
    assert want.flags == [] and got.score == want.score
    assert got.flags and all(f["what"] == "uses the grader's own modules" for f in got.flags)
    zh = engine.grade(forged, steps=["causal_attention"]).worded("zh").to_dict()["flags"]
    assert zh and all("评分器" in f["what"] for f in zh), zh


def test_a_batch_lists_the_flagged_submissions(tmp_path: Path) -> None:
    """`attn-kata batch`: summary.json's `flagged` names the one submission that studies the grader, with its
    flags, and the console says so; the other is not listed."""
    src = tmp_path / "class"
    src.mkdir()
    (src / "honest.py").write_text(MODULE_CA)
    (src / "forged.py").write_text(MODULE_CA + FORGE)
    out = tmp_path / "out"
    proc = run_in_process("--lang", "en", "batch", str(src), "--out", str(out), "--step", "causal_attention",
                          env={**os.environ, "ATTN_KATA_NO_DAEMON": "1"})  # tests/inproc.py
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert [f["submission"] for f in summary["flagged"]] == ["forged.py"]
    assert summary["flagged"][0]["flags"][0]["where"].startswith("forged.py, line ")
    assert "studies the grader" in proc.stdout and "forged.py" in proc.stdout


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("with_notebook", [True, False])
def test_the_katas_own_scaffolding_raises_no_flag(tmp_path: Path, lang: str, with_notebook: bool) -> None:
    """What `attn-kata init` writes (a notebook's `from grader import check` and check() cells, a workspace's
    stubs), solved or not, is the kata's own: no flag (issue 25: three of four flagged notebooks were honest)."""
    from grader.learner.init import init

    ws = init(tmp_path / "ws", lang=lang, with_notebook=with_notebook)
    target = next(ws.glob("*.ipynb")) if with_notebook else ws
    assert flags.scan(ingest.read_submission(target)) == []
    # and a real grader import beside it still is one
    extra = tmp_path / "hostile.py"
    extra.write_text("from grader import check\nfrom grader.worker import probes\n", encoding="utf-8")
    assert [f["what"] for f in flags.scan(ingest.read_submission(extra))] == [flags.translate("en", flags.GRADER)]
