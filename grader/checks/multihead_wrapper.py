"""Step 10: MultiHeadAttentionWrapper: num_heads CausalAttention heads, concatenated."""

from __future__ import annotations

import re
from typing import Any

import torch

from grader.checks import Case, Gen, Outcome, book_inputs, cases, check, diagnosis, expect, hints, mistakes
from grader.checks.causal_attention import plan, qkv_bias_cases
from grader.checks.common import QKV_BIAS_CHECK, book, grads_match, linear_shapes, module, qkv_bias_added
from grader.i18n import N_, _
from grader.worker import probes

STEP = "multihead_wrapper"

hints(
    STEP,
    N_(
        "Several independent causal attention heads side by side; glue their outputs together."
    ),
    N_(
        "§3.6.1: keep num_heads CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) modules in "
        "an nn.ModuleList called heads (a plain list would hide their parameters), run each on x, and "
        "concatenate along the last dimension."
    ),
    N_(
        "self.heads = nn.ModuleList(CausalAttention(...) for _ in range(num_heads)). x (b, num_tokens, "
        "d_in); each head(x) -> (b, num_tokens, d_out); torch.cat(list of head(x), dim=-1) -> (b, "
        "num_tokens, num_heads * d_out)."
    ),
)

CLS = "MultiHeadAttentionWrapper"
DIMS = ("batch", "num_tokens", "num_heads * d_out")
# where a structural cause is said once (grader.checks.structure)
STRUCTURE_CHECK = N_("heads is an nn.ModuleList of num_heads independent heads")


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    c = plan(g, CLS, "heads.{h}.", {"num_heads": 3}, n_heads=3, single_head_only=False)
    d_in, d_out = 3, 4
    c["one"] = module(CLS, g, {"d_in": d_in, "d_out": d_out, "context_length": 5, "dropout": 0.0, "num_heads": 1},
                      linear_shapes("heads.0.", d_in, d_out), g.randn(2, 5, d_in))
    c["book"] = book(CLS, g, {"d_in": 3, "d_out": 2, "context_length": 6, "dropout": 0.0, "num_heads": 2}, 123,
                     torch.stack((book_inputs(), book_inputs()), dim=0))
    # the heads are stand-ins (grader.worker.standins) that create biases when they are given qkv_bias=True
    return c | qkv_bias_cases(g, CLS, c["fwd"], "heads.{h}.", 3)


@check(STEP, STRUCTURE_CHECK)
def heads_module_list(r: Outcome) -> None:
    s = r.got("fwd", "structure")
    expect.true(s["heads_type"] == "ModuleList", _("self.heads is {type}, expected nn.ModuleList "
                  "(a plain list hides the heads' weights from .parameters())").format(type=s["heads_type"]))
    heads = s["heads"] or []  # None when self.heads is no nn.ModuleList
    expect.true(len(heads) == 3, _("1 head, expected num_heads = 3") if len(heads) == 1 else
                _("{n} heads, expected num_heads = 3").format(n=len(heads)))
    want = r.want("fwd", "structure")["n_unique_params"]
    expect.true(s["n_unique_params"] == want,
                _("the heads share weights ({n} distinct parameters, expected {want}): build a new "
                  "CausalAttention for every head").format(n=s["n_unique_params"], want=want))


@check(STEP, N_("heads concatenated on the last dim"))
def heads_concatenated(r: Outcome) -> None:
    expect.close(r.got("fwd"), r.want("fwd"), _("context vectors"), DIMS)


@check(STEP, N_("num_heads = 1 is a single CausalAttention"))
def single_head(r: Outcome) -> None:
    expect.close(r.got("one"), r.want("one"), _("context vectors of one head"), DIMS)


@check(STEP, N_("inputs shorter than context_length"))
def shorter_inputs(r: Outcome) -> None:
    expect.close(r.got("short"), r.want("short"), _("context vectors for num_tokens < context_length"), DIMS)


@check(STEP, N_("the book's example: torch.manual_seed(123), num_heads=2"))
def book_example(r: Outcome) -> None:
    expect.close(r.got("book"), r.want("book"), "mha(batch)", DIMS)


@check(STEP, N_("gradients reach every head"))
def gradients(r: Outcome) -> None:
    grads_match(r, "fwd", "MultiHeadAttentionWrapper")


@check(STEP, QKV_BIAS_CHECK)
def qkv_bias(r: Outcome) -> None:
    qkv_bias_added(r, "fwd", "bias_ctor", "bias", N_(
        "qkv_bias=True gives the heads no bias parameter (the wrapper has the same parameters as with "
        "qkv_bias=False): pass qkv_bias on to every head, CausalAttention(d_in, d_out, context_length, dropout, "
        "qkv_bias)"), N_("qkv_bias=True adds {got} parameters, expected {want}: in every head a bias of d_out for "
                         "each of W_query, W_key and W_value, nothing else"), DIMS)


# ---------------------------------------------------------------- diagnosis (grader.grading.diagnose)

mistakes(STEP, {
    "heads_cat_wrong_dim": N_(
        'the heads are concatenated along the wrong dimension: join their outputs along the features '
        'with torch.cat([...], dim=-1)'),
    "heads_stacked": N_(
        'the heads are stacked (torch.stack adds a new dimension): concatenate them with '
        'torch.cat([...], dim=-1)'),
    "heads_share_weights": N_(
        'all heads share one set of weights ([CausalAttention(...)] * num_heads repeats one object): '
        'build a new CausalAttention for every head, e.g. [CausalAttention(...) for _ in '
        'range(num_heads)]'),
})


def _shared_heads(r: Outcome, kit: Any) -> bool:
    """One head object repeated: fewer distinct parameters than heads × 3, seen in the structure facts, or
    (as the grader cannot then load each head's weights) in the probe's own report of the parameters that
    exist: only heads.0's, although num_heads > 1."""
    for case in ("fwd", "short"):
        s, want = kit.got(r, case, "structure"), kit.want(r, case, "structure")
        if isinstance(s, dict) and isinstance(want, dict) and isinstance(s.get("n_unique_params"), int) \
                and s["n_unique_params"] < want.get("n_unique_params", 0):
            return True
        res = r.learner.get(case)
        heads = int(r.case_specs[case].params.get("ctor", {}).get("num_heads", 1)) if case in r.case_specs else 1
        # the probe's structured report (its template and parameters), never the English text made of them
        if res is not None and res.status == "wrong_type" and heads > 1 and res.msgid in (probes.NO_PARAMETER,
                                                                                        probes.NO_ROLE):
            asked = str(res.params.get("name", res.params.get("roles", "")))
            has = str(res.params.get("have", ""))
            if re.match(r"heads\.[1-9]", asked) and set(re.findall(r"(?:^|, )heads\.(\d+)\.", has)) == {"0"}:
                return True
    return False


@diagnosis(STEP)
def _diagnose(r: Outcome, kit: Any) -> list[str]:
    found = ["heads_share_weights"] if _shared_heads(r, kit) else []

    def chunks(r: Outcome, case: str) -> list[torch.Tensor] | None:
        ref = kit.want(r, case)
        if not isinstance(ref, torch.Tensor):
            return None
        return list(ref.split(int(r.case_specs[case].params["ctor"]["d_out"]), dim=-1))

    def cat_wrong(r: Outcome, case: str) -> list[torch.Tensor] | None:
        parts = chunks(r, case)
        return None if parts is None or len(parts) < 2 else [torch.cat(parts, dim=d) for d in (0, 1)]

    def stacked(r: Outcome, case: str) -> list[torch.Tensor] | None:
        parts = chunks(r, case)
        return None if parts is None else [torch.stack(parts, dim=d) for d in range(parts[0].dim() + 1)]

    for diag_id, model in (("heads_cat_wrong_dim", cat_wrong), ("heads_stacked", stacked)):
        if kit.matches(r, ["fwd", "short", "one"], model):
            found.append(diag_id)
    return found
