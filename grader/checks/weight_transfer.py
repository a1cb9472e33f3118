"""Step 12 (exercise 3.1): transfer_weights(sa_v2, sa_v1) makes v1 compute what v2 computes."""

from __future__ import annotations

from grader.checks import Case, Gen, Outcome, cases, check, expect, hints
from grader.checks.common import linear_shapes
from grader.i18n import N_, _

STEP = "weight_transfer"

hints(
    STEP,
    N_(
        "Both classes compute the same thing; only the way the weight matrices are stored differs."
    ),
    N_(
        "Exercise 3.1 (§3.4.2): nn.Linear stores weight as (d_out, d_in) and computes x @ weight.T, while "
        "SelfAttention_v1 computes x @ W with W of shape (d_in, d_out). So each of sa_v1's W_query, W_key, "
        "W_value must become the transpose of the matching nn.Linear weight of sa_v2."
    ),
    N_(
        "sa_v2.W_query.weight (d_out, d_in) -> .T (d_in, d_out). sa_v1.W_query = "
        "nn.Parameter(sa_v2.W_query.weight.T.detach().clone()); the same for W_key and W_value; return "
        "sa_v1. Then sa_v1(x) and sa_v2(x) agree: (num_tokens, d_in) -> (num_tokens, d_out)."
    ),
)


def _case(g: Gen, d_in: int, d_out: int, n: int) -> Case:
    inputs = {**g.weights(linear_shapes("", d_in, d_out)), "x": g.randn(n, d_in)}
    return Case("transfer", inputs, {"d_in": d_in, "d_out": d_out}, g.seed())


@cases(STEP)
def _cases(g: Gen) -> dict[str, Case]:
    def draw() -> tuple[int, ...]:
        d_in = g.int(3, 5)
        return d_in, d_in + g.int(1, 2), g.int(4, 7)

    d_in, d_out, n = g.distinct(draw)  # d_in, d_out and num_tokens pairwise distinct under every secret
    return {"rect": _case(g, d_in, d_out, n), "square": _case(g, 4, 4, g.distinct(lambda: (g.int(5, 7),))[0])}


@check(STEP, N_("after the transfer, v1 gives v2's output (d_in ≠ d_out)"))
def v1_gives_v2_output(r: Outcome) -> None:
    expect.close(r.got("rect", "out_v1"), r.want("rect", "out_v1"), "sa_v1(x)", ("num_tokens", "d_out"))


@check(STEP, N_("each of W_query, W_key, W_value comes from the matching layer, transposed"))
def weights_from_matching_layers(r: Outcome) -> None:
    r.got("rect", "out_v1")  # if the case crashed, say so (not _("no longer a tensor"))
    for name in ("W_query", "W_key", "W_value"):
        expect.true(r.has("rect", f"v1.{name}"), _("sa_v1.{name} is no longer a tensor").format(name=name))
        got = expect.tensor(r.got("rect", f"v1.{name}"), f"sa_v1.{name}")
        if got.shape == r.want("rect", f"v1.{name}").shape:
            for other in ("W_query", "W_key", "W_value"):
                theirs = r.want("rect", f"v1.{other}")
                if other != name and got.shape == theirs.shape and got.allclose(theirs):
                    raise expect.Failed(_("sa_v1.{name} holds sa_v2.{other}'s weight: query, key and value "
                                          "swapped").format(name=name, other=other))
        expect.close(got, r.want("rect", f"v1.{name}"),
                     _("sa_v1.{name} (nn.Linear stores (d_out, d_in): transpose)").format(name=name),
                     ("d_in", "d_out"))


@check(STEP, N_("square weights (d_in = d_out) are transposed too"))
def square_weights_transposed(r: Outcome) -> None:
    expect.close(r.got("square", "out_v1"), r.want("square", "out_v1"), _("sa_v1(x) with d_in = d_out"),
                 ("num_tokens", "d_out"))


@check(STEP, N_("sa_v2 is left unchanged"))
def sa_v2_unchanged(r: Outcome) -> None:
    # judged on the cases whose run completed: a crash in sa_v1's forward is charged by the checks above
    ran = [c for c in ("rect", "square") if r.learner[c].status == "ok"] or ["rect"]
    for case in ran:
        for name in ("W_query", "W_key", "W_value"):
            expect.close(r.got(case, f"v2.{name}"), r.inputs(case)[f"w.{name}.weight"],
                         _("sa_v2.{name}.weight after the transfer (copy, do not transpose "
                           "in place)").format(name=name))
