"""Step 1: attention_scores(inputs, query) -> ω of shape (num_tokens,)."""

from __future__ import annotations

from grader.checks import JOURNEY, Case, Gen, Outcome, cases, check, expect, hints
from grader.checks.common import call
from grader.i18n import N_, _

STEP = "dot_scores"

hints(
    STEP,
    N_(
        "How similar is each input token to the query? One number per token: the dot product."
    ),
    N_(
        "§3.3.1 step 1: the attention score ω_i is the dot product of input token x_i with the query "
        "(torch.dot). A for loop over the rows of inputs is fine, or do all rows in one matrix-vector "
        "product."
    ),
    N_(
        "inputs (num_tokens, d_in), query (d_in,). Loop: attn_scores = torch.zeros(inputs.shape[0]); for i, "
        "x_i in enumerate(inputs): set entry i of attn_scores to torch.dot(x_i, query) -> (num_tokens,). "
        "Vectorised: inputs @ query, (num_tokens, d_in) @ (d_in,) -> (num_tokens,)."
    ),
)

DIMS = ("num_tokens",)


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    n, d = g.distinct(lambda: (g.int(7, 10), g.int(2, 4)), 6, 3)  # num_tokens ≠ d_in; more tokens than the book's 6
    return {
        "book": call("attention_scores", g, inputs=JOURNEY, query=JOURNEY[1]),
        "random": call("attention_scores", g, inputs=g.rand(n, d), query=g.rand(d)),
        "single": call("attention_scores", g, inputs=g.rand(1, d), query=g.rand(d)),
        "signed": call("attention_scores", g, inputs=g.randn(n, d, scale=3.0), query=g.randn(d, scale=3.0)),
    }


@check(STEP, N_("the book's example: query = inputs[1] of 'Your journey starts with one step'"))
def book_example(r: Outcome) -> None:
    expect.close(r.got("book"), r.want("book"), _("ω for query x(2)"), DIMS)


@check(STEP, N_("random inputs with num_tokens ≠ d_in"))
def random_inputs(r: Outcome) -> None:
    expect.close(r.got("random"), r.want("random"), _("attention scores"), DIMS)


@check(STEP, N_("a single token"))
def single_token(r: Outcome) -> None:
    expect.close(r.got("single"), r.want("single"), _("attention scores for one token"), DIMS)


@check(STEP, N_("negative and larger values"))
def negative_and_larger_values(r: Outcome) -> None:
    expect.close(r.got("signed"), r.want("signed"), _("attention scores"), DIMS)


@check(STEP, N_("leaves inputs and query unchanged"))
def inputs_unchanged(r: Outcome) -> None:
    for case in ("book", "random", "signed"):
        expect.true(not r.got(case, "inputs_modified"),
                    _("your function changed `inputs` or `query` in place; compute new tensors instead"))
