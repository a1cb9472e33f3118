"""The four things made from a kata file agree (issue 38): the stub, the notebook's cell, nbgrader's solution regions
and the README's signature table all come from one reading of it (grader/katafile.py), and here they are compared:
the same functions' bodies, the same regions, the same signatures."""

from __future__ import annotations

import re

import pytest

from grader import dev, katafile
from grader.learner import init, watch
from grader.platforms.nbgrader import assignment
from grader.registry import BY_MODULE, STEPS, Step
from grader.settings import KATA_ROOT

REGION = re.compile(r"( *)### BEGIN SOLUTION\n.*?### END SOLUTION\n", re.S)


def solution(step: Step) -> str:
    return (KATA_ROOT / "solutions" / step.file).read_text(encoding="utf-8")


@pytest.mark.parametrize("step", STEPS, ids=[s.id for s in STEPS])
def test_the_four_transforms_agree(step: Step) -> None:
    kata = katafile.parse(solution(step))
    # the stub: what reset writes is what exercises/ holds, and it replaces exactly nbgrader's regions
    stub = watch.stub_from_solution(solution(step))
    assert stub == kata.stub() == init.stub_text(step)
    assert {(b.first, b.last, b.col) for b in kata.bodies} == set(kata.stub_spans)
    lines = solution(step).splitlines()
    for body in kata.bodies:  # nbgrader's region may begin earlier only by the comments above the first statement
        assert body.solution_first <= body.first
        assert all(lines[n - 1].strip().startswith("#") for n in range(body.solution_first, body.first))
    # nbgrader's source cell with each region collapsed to the stub's line is the notebook's cell for the stub,
    # less the comments nbgrader counts as solution
    regions, region_imports = assignment._solution_source(step)
    assert regions == kata.solution_regions(BY_MODULE)[0]
    assert regions.count("### BEGIN SOLUTION") == len(kata.bodies) == regions.count("### END SOLUTION")
    collapsed = REGION.sub(lambda m: m.group(1) + katafile.STUB_LINE + "\n", regions)
    comments = {lines[n - 1] for b in kata.bodies for n in range(b.solution_first, b.first)}
    cell, cell_imports = init.split_stub(stub)
    assert collapsed == "".join(line for line in cell.splitlines(keepends=True) if line.rstrip("\n") not in comments)
    assert cell_imports == region_imports  # the same imports from outside the kata
    # the README's signatures: the solution's are the stub's (a learner writes what the table says)
    signatures = dev.signatures(step)
    assert signatures == kata.signatures(step.names) == katafile.parse(stub).signatures(step.names)
    table = dev.readme_steps()
    assert all(f"`{sig}`" in table for sig in signatures)


def test_the_notebook_holds_each_stubs_cell() -> None:
    nb = init.notebook("en")
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    for step in STEPS:
        assert init.split_stub(katafile.parse(solution(step)).stub())[0] in sources, step.id
