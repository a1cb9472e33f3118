"""The caches a worker's libraries write (torch.compile's, so FlexAttention's; Triton's) live in its own work dir
(issue 37): left to their default they named the machine's /tmp and its sandbox user
("Permission denied: '/tmp/torchinductor_nobody'") and failed a learner's correct code."""

from __future__ import annotations

from pathlib import Path

from grader.grading.engine import grade
from grader.sandbox.common import work_caches


def test_the_caches_are_inside_the_work_dir() -> None:
    caches = work_caches("/w/attn-kata-worker-1")
    assert set(caches) == {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"}
    assert all(Path(p).parent == Path("/w/attn-kata-worker-1") for p in caches.values())


def test_a_worker_sees_its_compile_cache_in_its_work_dir(tmp_path: Path) -> None:
    sub = tmp_path / "sub.py"
    sub.write_text("import os\n\ndef attention_scores(inputs, query):\n"
                   "    raise ValueError('<' + os.environ.get('TORCHINDUCTOR_CACHE_DIR', 'unset') + '|' + "
                   "os.environ['HOME'] + '>')\n", encoding="utf-8")
    report = grade(str(sub), secret="").worded("en")
    said = next(c.message for s in report.steps for c in s.checks if not c.passed)
    cache, home = said.rsplit(": <", 1)[1].split(">")[0].split("|")
    assert cache != "unset", said
    assert Path(cache).parent == Path(home), said
    assert not cache.startswith("/tmp/torchinductor_"), said
