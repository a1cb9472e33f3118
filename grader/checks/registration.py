"""Registration: what a step module declares about its step, collected by step id.

A step module (grader/checks/<step>.py) declares, at import:
  @cases(STEP)   def _(g: Gen) -> dict[str, Case]            the probes to run, with inputs drawn from the secret
  @check(STEP, N_("what is checked"), points=1)               a check (Outcome -> None, raises Failed), vouched;
  def mask_cut_to_num_tokens(r: Outcome) -> None               its function's name makes its id: `<step>.<name>`
  hints(STEP, N_("nudge"), N_("key idea"), N_("recipe"))     the three hint levels
  pictures(STEP, {"case": "what produced it"})               the cases whose output is a matrix of attention weights
  mistakes(STEP, {"id": N_("message")})  @diagnosis(STEP)    the classic mistakes its outputs can show (optional)
and, where its outputs are random by design, a `proof` of work (grader.checks.vouching). `python -m grader.dev docs`
writes what they declare into grader/checks/catalogue.json, which `attn-kata hint` and the pytest plugin read
without importing torch (grader.registry.catalogue).

Check names, hints and mistakes are msgids marked N_() (the Chinese is in grader/locale). Trusted side: imported
by the grading process and the learner's commands, never by a worker.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

from grader.checks.model import Case, CheckSpec
from grader.checks.vouching import Outcome, vouched
from grader.registry import STEPS

HINT_LEVELS = 3  # a nudge, the key idea with the book section, the shape-by-shape recipe

CASES: dict[str, Callable[[Any], dict[str, Case]]] = {}  # step -> its @cases function (called with a Gen)
CHECKS: dict[str, list[CheckSpec]] = {}
HINTS: dict[str, tuple[str, ...]] = {}
PICTURES: dict[str, dict[str, str]] = {}  # step -> case -> a label: what the learner's code computed there
MISTAKES: dict[str, str] = {}  # diagnosis id -> its message (an English msgid)
STEP_MISTAKES: dict[str, list[str]] = {}  # step -> the ids of the mistakes its module declares, in order
# step -> fn(outcome, kit) -> ids of the mistakes its outputs show; `kit` is grader.grading.diagnose (its models)
DIAGNOSES: dict[str, Callable[[Outcome, Any], list[str]]] = {}


def cases(step: str) -> Callable:
    def deco(fn: Callable[[Any], dict[str, Case]]) -> Callable:
        CASES[step] = fn
        return fn

    return deco


ID_PART = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")  # snake_case: each part of an id (`<step>.<name>`)


def check_id(step: str, fn: Callable) -> str:
    """A check's stable id, `<step>.<its function's name>` (`causal_attention.mask_cut_to_num_tokens`): what reports,
    platforms and exports follow a check by, in every language and across versions; its title may be reworded."""
    name = getattr(fn, "__name__", "")
    for part in (step, name):
        if not ID_PART.fullmatch(part):
            raise ValueError(f"check {part!r} of step {step!r}: a check id is <step>.<function name>, each part "
                             "snake_case (a-z, 0-9, single underscores, a letter first)")
    return f"{step}.{name}"


def check(step: str, name: str, points: float = 1.0) -> Callable:
    """Register a check, vouched (grader.checks.vouching.vouched): it earns its point only once some output of the
    step equals the reference's. Its id is `<step>.<the function's name>`, unique (grader/checks/ids.txt lists
    them, and the retired ones, which no check may take again: tests/test_check_ids.py)."""
    def deco(fn: Callable[[Outcome], None]) -> Callable:
        cid = check_id(step, fn)
        if any(c.id == cid for specs in CHECKS.values() for c in specs):
            raise ValueError(f"check id {cid!r} registered twice: name each check function of a step differently")
        CHECKS.setdefault(step, []).append(CheckSpec(step, name, vouched(fn), points, cid))
        return fn

    return deco


def hints(step: str, *levels: str) -> tuple[str, ...]:
    """Register a step's hints: a nudge, the key idea with the book section, the shape-by-shape recipe (it may
    show the key lines). Printed through rich, so no square brackets that start with a letter (`x[i]` is markup).
    Each is an N_("…") msgid; grader.registry.hints reads them from the catalogue (python -m grader.dev docs)."""
    HINTS[step] = tuple(levels)
    return HINTS[step]


def pictures(step: str, labelled: dict[str, str]) -> None:
    """Register the cases whose output ("out") is a matrix of attention weights: the learner's and the reference's
    are drawn side by side (grader.render.heatmap). The label says what produced it: code, not translated."""
    PICTURES[step] = dict(labelled)


def mistakes(step: str, messages: dict[str, str]) -> None:
    """Register the messages of the mistakes a step's diagnosis names (id -> N_ msgid; ids are global: another
    step's diagnosis may name them too). The book section of the step graded is added when shown."""
    for diag_id, text in messages.items():
        if MISTAKES.get(diag_id, text) != text:
            raise ValueError(f"mistake {diag_id!r} registered twice with different messages ({step})")
        MISTAKES[diag_id] = text
        STEP_MISTAKES.setdefault(step, []).append(diag_id)


def diagnosis(step: str) -> Callable:
    """Register a step's diagnosis: fn(outcome, kit) -> the ids of the classic mistakes the learner's outputs show,
    built from the mistake models of grader.grading.diagnose (passed as `kit`: this layer cannot import it)."""
    def deco(fn: Callable[[Outcome, Any], list[str]]) -> Callable:
        DIAGNOSES[step] = fn
        return fn

    return deco


def load_all() -> None:
    for s in STEPS:
        importlib.import_module(f"grader.checks.{s.id}")

