"""Build synthetic class submissions from solutions/ (correct) and a few buggy variants.

Used by benchmarks/bench_batch.py and tests/test_batch.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDER = ("dot_scores", "softmax", "context_vector", "all_tokens", "self_attention_v1", "self_attention_v2",
         "causal_mask", "dropout", "causal_attention", "multihead_wrapper", "multihead_attention",
         "weight_transfer", "two_dim_output", "gpt2_size")
# an import of another step's file, by its numbered name (`step09_causal_attention`) or its older one
_LOCAL_IMPORT = re.compile(r"^from (?:step\d\d_)?(" + "|".join(ORDER) + r") import .*$", re.M)

# (name, old, new): small, realistic mistakes
BUGS = {
    "no_scaling": ("causal_attention", "keys.shape[-1] ** 0.5", "1.0"),
    "wrong_mask": ("causal_mask", "diagonal=1", "diagonal=0"),
    "softmax_dim0": ("softmax", "dim=-1", "dim=0"),
}


def cells() -> list[tuple[str, str]]:
    """(step id, source) for each solution file, in the chapter's order, local imports removed."""
    out = []
    for step in ORDER:
        src = (ROOT / "solutions" / f"step{ORDER.index(step) + 1:02d}_{step}.py").read_text(encoding="utf-8")
        out.append((step, _LOCAL_IMPORT.sub("", src)))
    return out


def module_source(bug: str | None = None) -> str:
    parts = []
    for step, src in cells():
        if bug and BUGS[bug][0] == step:
            src = src.replace(BUGS[bug][1], BUGS[bug][2])
        parts.append(src)
    return "\n\n".join(parts)


def notebook(source_cells: list[str]) -> str:
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                     "source": s} for i, s in enumerate(source_cells)],
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                       "language_info": {"name": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1)


def notebook_source(bug: str | None = None) -> str:
    srcs = []
    for step, src in cells():
        if bug and BUGS[bug][0] == step:
            src = src.replace(BUGS[bug][1], BUGS[bug][2])
        srcs.append(src)
    return notebook(srcs)


def variant(i: int) -> str | None:
    """Submission i's bug (None: correct): most are correct, every 4th has one of the bugs."""
    names = list(BUGS)
    return names[(i // 4) % len(names)] if i % 4 == 3 else None


def make_class(directory: Path, n: int, kind: str = "ipynb") -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        bug = variant(i)
        # a comment makes every submission's content (and so its key) distinct
        if kind == "ipynb":
            text = notebook_source(bug).replace('"cells": [', f'"cells": [{{"cell_type": "markdown", '
                                                f'"id": "m", "metadata": {{}}, "source": "student {i}"}},', 1)
        else:
            text = f"# student {i}\n" + module_source(bug)
        p = directory / f"student{i:03d}.{kind}"
        p.write_text(text, encoding="utf-8")
        paths.append(p)
    return paths
