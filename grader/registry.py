"""The one declarative list of steps. The CLI, the checks, the stubs' self-test and the docs read it.

Adding a step: add a `Step` here, a stub in exercises/stepNN_<id>.py (`Step.file`), the reference in
solutions/stepNN_<id>.py, a checks module grader/checks/<id>.py, its hints and buggy fixtures (see CONTRIBUTING.md,
"Adding a step"); tests/test_steps.py names any part that is missing.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Step:
    number: int
    id: str
    names: tuple[str, ...]  # public names the learner writes (docs/design.md §1)
    section: str  # book section
    title: str  # the plain title; shown through grader.i18n.step_title ("Step 7 · … (§3.5.1)")
    title_zh: str
    core: bool = True
    # names of earlier steps this one builds on: the grader swaps in public stand-ins for them (never the
    # reference: grader/worker/standins.py), so a mistake in the earlier step is not charged twice
    uses: tuple[str, ...] = field(default=())

    @property
    def stem(self) -> str:
        """The step file's module name: the number first, zero-padded, so that any file list shows the steps in
        order, and still an identifier, so that a later step imports it (`from step09_causal_attention import …`)."""
        return f"step{self.number:02d}_{self.id}"

    @property
    def file(self) -> str:
        """The step's file in exercises/, solutions/ and a workspace (`step01_dot_scores.py`)."""
        return f"{self.stem}.py"

    @property
    def legacy_file(self) -> str:
        """The name the step's file had before it was numbered (`dot_scores.py`): still read and importable, so that a
        workspace or an upload made then grades as it did (grader.submission.step_path)."""
        return f"{self.id}.py"

    @property
    def files(self) -> tuple[str, str]:
        """The step file's names, in the order grading prefers them when a folder holds both."""
        return self.file, self.legacy_file


STEPS: tuple[Step, ...] = (
    Step(1, "dot_scores", ("attention_scores",), "3.3.1",
         "Input embeddings -> ω (attention scores)",
         "输入嵌入 → ω（注意力得分）"),
    Step(2, "softmax", ("normalize_by_sum", "softmax_naive", "attention_weights"), "3.3.1",
         "ω -> α (attention weights)",
         "ω → α（注意力权重）"),
    Step(3, "context_vector", ("context_vector",), "3.3.1",
         "α -> z (context vector)",
         "α → z（上下文向量）"),
    Step(4, "all_tokens", ("all_attention_scores", "all_attention_weights", "all_context_vectors"), "3.3.2",
         "Attention weights for all input tokens",
         "为所有输入 token 计算注意力权重"),
    Step(5, "self_attention_v1", ("SelfAttention_v1",), "3.4.1",
         "SelfAttention_v1: a basic implementation",
         "SelfAttention_v1：基础实现"),
    Step(6, "self_attention_v2", ("SelfAttention_v2",), "3.4.2",
         "SelfAttention_v2: using nn.Linear",
         "SelfAttention_v2：使用 nn.Linear"),
    Step(7, "causal_mask", ("causal_mask", "masked_attention_weights"), "3.5.1",
         "Applying a causal attention mask",
         "应用因果注意力掩码"),
    Step(8, "dropout", ("dropout_attention",), "3.5.2",
         "Masking additional attention weights with dropout",
         "使用 Dropout 掩码额外注意力权重"),
    Step(9, "causal_attention", ("CausalAttention",), "3.5.3",
         "A compact causal self-attention class",
         "实现紧凑的因果自注意力类"),
    Step(10, "multihead_wrapper", ("MultiHeadAttentionWrapper",), "3.6.1",
         "MultiHeadAttentionWrapper",
         "MultiHeadAttentionWrapper",
         uses=("CausalAttention",)),
    Step(11, "multihead_attention", ("MultiHeadAttention",), "3.6.2",
         "Multi-head attention with weight splits",
         "多头注意力：权重拆分", core=False),
    Step(12, "weight_transfer", ("transfer_weights",), "ex. 3.1",
         "Exercise 3.1: comparing SelfAttention_v1 and v2",
         "练习 3.1：比较 v1 与 v2", core=False,
         uses=("SelfAttention_v1", "SelfAttention_v2")),
    Step(13, "two_dim_output", ("two_dim_wrapper",), "ex. 3.2",
         "Exercise 3.2: returning two-dimensional embedding vectors",
         "练习 3.2：返回二维嵌入向量", core=False,
         uses=("MultiHeadAttentionWrapper",)),
    Step(14, "gpt2_size", ("gpt2_attention",), "ex. 3.3",
         "Exercise 3.3: initializing a GPT-2-size attention module",
         "练习 3.3：初始化 GPT-2 规模的注意力模块", core=False,
         uses=("MultiHeadAttention",)),
)

BY_ID: dict[str, Step] = {s.id: s for s in STEPS}
ALL_NAMES: tuple[str, ...] = tuple(n for s in STEPS for n in s.names)
# a step file's module names, both of which a learner's code may import: `step09_causal_attention` and the older
# `causal_attention` (one module: grader.worker.serve serves the one under the other's name)
BY_MODULE: dict[str, Step] = {**{s.id: s for s in STEPS}, **{s.stem: s for s in STEPS}}
STEP_FILES: frozenset[str] = frozenset(f for s in STEPS for f in s.files)


def get_step(key: str) -> Step:
    """Look a step up by id or number ("7" or "causal_mask")."""
    if key in BY_ID:
        return BY_ID[key]
    if key.isdigit() and 1 <= int(key) <= len(STEPS):
        return STEPS[int(key) - 1]
    raise KeyError(key)


CHECKS_FOLDER = Path(__file__).parent / "checks"
CATALOGUE = "catalogue.json"  # in grader/checks/: what each step module declares (python -m grader.dev docs)


def catalogue(checks: Path | None = None) -> dict[str, dict[str, Any]]:
    """Each step's declarations as grader/checks/catalogue.json records them (step id -> its hints, checks with
    their ids, titles and points, pictures and mistakes: English msgids), read without importing the step modules,
    which import torch: `attn-kata hint` and listing the pytest plugin's tests stay quick. Written from the imported
    modules by `python -m grader.dev docs`; tests/test_docs.py fails when it is stale. {} when it cannot be read.
    `checks`: another folder than the package's grader/checks (a test's copy)."""
    if checks is None:
        return _catalogue(CHECKS_FOLDER / CATALOGUE)
    return _read_catalogue(checks / CATALOGUE)


@functools.cache
def _catalogue(path: Path) -> dict[str, dict[str, Any]]:
    return _read_catalogue(path)


def _read_catalogue(path: Path) -> dict[str, dict[str, Any]]:
    try:
        steps = json.loads(path.read_text(encoding="utf-8"))["steps"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return steps if isinstance(steps, dict) else {}


def hints(step_id: str, checks: Path | None = None) -> tuple[str, ...]:
    """A step's hints (English msgids: a nudge, the key idea, the recipe), as its module grader/checks/<id>.py
    declares them (`hints(STEP, N_("…"), …)`), from the catalogue (no torch). () when it records none for the step
    (tests/test_steps.py names it). `checks`: another folder than the package's grader/checks (a test's copy)."""
    levels = catalogue(checks).get(step_id, {}).get("hints", [])
    return tuple(h for h in levels if isinstance(h, str)) if isinstance(levels, list) else ()
