"""Step 4: all scores, weights and context vectors at once, with matrix products (no loops: their work must not
grow with num_tokens, grader.worker.probes.loops)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from grader.checks import JOURNEY, Case, Gen, Outcome, cases, check, diagnosis, expect, hints, pictures
from grader.checks.common import call
from grader.i18n import N_, _, join

STEP = "all_tokens"

hints(
    STEP,
    N_(
        "Every token is a query now: steps 1-3 for all tokens at once become three matrix operations, no "
        "loops."
    ),
    N_(
        "§3.3.2: all pairwise dot products are one matrix product of inputs with its transpose; softmax "
        "each row (dim=-1, so every row of attention weights sums to 1); then the attention weights times "
        "the inputs give every context vector."
    ),
    N_(
        "attn_scores = inputs @ inputs.T: (num_tokens, d_in) @ (d_in, num_tokens) -> (num_tokens, "
        "num_tokens). attn_weights = torch.softmax(attn_scores, dim=-1): (num_tokens, num_tokens). "
        "all_context_vecs = attn_weights @ inputs: (num_tokens, num_tokens) @ (num_tokens, d_in) -> "
        "(num_tokens, d_in)."
    ),
)
# drawn next to the reference's: the learner's attention weights here (grader.render.heatmap)
pictures(STEP, {"weights": "all_attention_weights(attn_scores)"})

SQ = ("num_tokens", "num_tokens")


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    n, d = g.distinct(lambda: (g.int(7, 10), g.int(2, 4)), 6, 3)  # more tokens than the book's 6, never its d_in = 3
    return {
        "scores_book": call("all_attention_scores", g, inputs=JOURNEY),
        "scores": call("all_attention_scores", g, inputs=g.randn(n, d)),
        "weights": call("all_attention_weights", g, attn_scores=g.randn(n, n, scale=2.0)),
        "context": call("all_context_vectors", g, attn_weights=torch.softmax(g.randn(n, n), -1),
                        inputs=g.randn(n, d)),
        "single_scores": call("all_attention_scores", g, inputs=g.randn(1, d)),
        "single_context": call("all_context_vectors", g, attn_weights=torch.ones(1, 1), inputs=g.randn(1, d)),
        # drawn last, so that every case above keeps its inputs
        "loops_scores": _loops("all_attention_scores", ["inputs"], lambda k: [g.randn(k, d)]),
        "loops_weights": _loops("all_attention_weights", ["attn_scores"], lambda k: [g.randn(k, k, scale=2.0)]),
        "loops_context": _loops("all_context_vectors", ["attn_weights", "inputs"],
                                lambda k: [torch.softmax(g.randn(k, k), -1), g.randn(k, d)]),
    }


# "no Python loops" as behaviour (grader.worker.probes.loops): each function runs at these numbers of tokens, the
# book's 6 and 4 times as many, and its work must neither grow nor take a torch call per token. No tensor comes back:
# the counts are facts, believed once the same function's outputs are right (grader.checks.vouching)
LOOP_SIZES = (6, 24)
LOOP_CASES = {"loops_scores": "all_attention_scores", "loops_weights": "all_attention_weights",
              "loops_context": "all_context_vectors"}
LOOP_FIXES = {
    "all_attention_scores": N_("use one matrix product: inputs @ inputs.T"),
    "all_attention_weights": N_("softmax every row at once: torch.softmax(attn_scores, dim=-1)"),
    "all_context_vectors": N_("use one matrix product: attn_weights @ inputs"),
}
WORK_MEASURES = {"lines": N_("Python line events"), "calls": N_("torch calls"), "ops": N_("torch operations")}
# why a count proves nothing (grader.worker.counting): code the probe could not watch did the work
TAMPERED = {
    "trace": N_("tracing was switched off or replaced while it ran"),
    "modes": N_("torch's function or dispatch modes were removed while it ran"),
    "thread": N_("it started a thread"),
}


def _loops(fn: str, args: list[str], draw: Callable[[int], list[torch.Tensor]]) -> Case:
    inputs = {f"{k}.{a}": t for k in LOOP_SIZES for a, t in zip(args, draw(k), strict=True)}
    return Case("loops", inputs, {"fn": fn, "args": args, "sizes": list(LOOP_SIZES)})


@check(STEP, N_("all_attention_scores = inputs @ inputs.T"))
def attention_scores(r: Outcome) -> None:
    for case in ("scores_book", "scores"):
        expect.close(r.got(case), r.want(case), _("attention scores"), SQ)


@check(STEP, N_("all_attention_weights: softmax of each row, rows sum to 1"))
def attention_weights(r: Outcome) -> None:
    got = expect.tensor(r.got("weights"), _("attention weights"))
    expect.shape(got, r.want("weights").shape, _("attention weights"), SQ)
    sums = got.sum(dim=-1)
    expect.true(bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-5)),
                _("rows of the attention weights do not sum to 1: normalise along dim=-1 (each row)"))
    expect.close(got, r.want("weights"), _("attention weights"), SQ)


@check(STEP, N_("all_context_vectors = attn_weights @ inputs"))
def context_vectors(r: Outcome) -> None:
    expect.close(r.got("context"), r.want("context"), _("context vectors"), ("num_tokens", "d_in"))


@check(STEP, N_("a single token"))
def single_token(r: Outcome) -> None:
    expect.close(r.got("single_scores"), r.want("single_scores"), _("scores of one token"), SQ)
    expect.close(r.got("single_context"), r.want("single_context"), _("context vector of one token"),
                 ("num_tokens", "d_in"))


@check(STEP, N_("no Python loops: matrix products only"))
def no_python_loops(r: Outcome) -> None:
    works = {fn: r.got(case, "work") for case, fn in LOOP_CASES.items()}  # each vouched by fn's right outputs
    found = [_loop_finding(fn, work) for fn, work in works.items()]
    expect.true(not any(found), join("; ", [f for f in found if f]))


def _loop_finding(fn: str, work: dict[str, Any]) -> str:
    """What the counts of `fn`'s work at two sizes (grader.worker.probes.loops) say: "" when nothing grew."""
    if work["tampered"] or len(work["sizes"]) != 2 or len(work["lines"]) not in (2, 4) or any(
            len(work[k]) != len(work["lines"]) for k in ("calls", "ops")):  # or a report no worker of ours makes
        return _("{name}: the grader could not count its work ({why}), so it cannot tell whether it runs a Python "
                 "loop").format(name=fn, why=join(", ", [_(TAMPERED.get(t, TAMPERED["trace"]))
                                                         for t in work["tampered"] or ["trace"]]))
    small, large = work["sizes"]
    for measure, what in WORK_MEASURES.items():
        counts = work[measure]
        # small, large, small, large: the first call may pay for a lazy import (it is small, so that never looks
        # like growth); a loop over the tokens does more at the large size in each pair (the last is said; the worker
        # stops after the first where it grew)
        for a, b in reversed(list(zip(counts[0::2], counts[1::2], strict=False))):
            if b > a:
                return _("{name} runs a Python loop over the tokens (its work grew with num_tokens: {small_count} "
                         "{what} at {small} tokens, {large_count} at {large}); {fix}").format(
                    name=fn, small_count=a, what=_(what), small=small, large_count=b, large=large,
                    fix=_(LOOP_FIXES[fn]))
    # a loop over a fixed number of rows (the inputs padded to it) does the same work at both sizes, but at least as
    # many torch calls as there are tokens; vectorised code makes a handful at any size
    if work["calls"][-1] >= large:
        return _("{name} runs a Python loop ({count} torch calls at {large} tokens, one or more per token); "
                 "{fix}").format(name=fn, count=work["calls"][-1], large=large, fix=_(LOOP_FIXES[fn]))
    return ""


# ---------------------------------------------------------------- diagnosis (grader.grading.diagnose)


@diagnosis(STEP)
def _diagnose(r: Outcome, kit: Any) -> list[str]:
    def wrong_dim(r: Outcome, case: str) -> torch.Tensor:
        return torch.softmax(r.inputs(case)["attn_scores"].to(torch.float64), dim=0)

    return ["softmax_wrong_dim"] if kit.matches(r, ["weights"], wrong_dim) else []
