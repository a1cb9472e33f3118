"""Check ids are stable: grader/checks/ids.txt lists every registered check's id and the retired ones.

An id (`<step>.<the check function's name>`, grader.checks.registration.check_id) is what a report, Gradescope's and
PrairieLearn's tests and an export follow a check by, in every language and across versions. So this fails when an
id changes or disappears without being moved under [retired], when a new one is not listed, and when a retired id
is taken again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import checks
from grader.checks.registration import ID_PART, check, check_id
from grader.registry import STEPS

IDS = Path(checks.__file__).resolve().parent / "ids.txt"


def listed() -> tuple[list[str], list[str]]:
    """ids.txt's current ids and retired ids, in order (a line: an id, then an optional `# why`)."""
    current: list[str] = []
    retired: list[str] = []
    into = current
    for line in IDS.read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].strip()
        if text == "[retired]":
            into = retired
        elif text:
            into.append(text)
    return current, retired


def registered() -> list[str]:
    checks.load_all()
    return [c.id for s in STEPS for c in checks.CHECKS[s.id]]


def test_every_listed_id_is_well_formed_and_listed_once() -> None:
    current, retired = listed()
    every = current + retired
    assert current, "ids.txt lists no check"
    for cid in every:
        step, _dot, name = cid.partition(".")
        assert ID_PART.fullmatch(step) and ID_PART.fullmatch(name), f"not <step>.<snake_case name>: {cid!r}"
    twice = sorted({c for c in every if every.count(c) > 1})
    assert not twice, f"listed more than once (a retired id is never current again): {twice}"


def test_the_registered_ids_are_the_listed_ones() -> None:
    current, retired = listed()
    ids = registered()
    reused = sorted(set(ids) & set(retired))
    assert not reused, f"retired ids taken again (name these checks otherwise): {reused}"
    gone = [c for c in current if c not in ids]
    assert not gone, (f"ids no check has any more: {gone}. An id never changes; if the check was removed or "
                      "renamed on purpose, move its id under [retired] in grader/checks/ids.txt")
    new = [c for c in ids if c not in current]
    assert not new, f"ids not in grader/checks/ids.txt (add them, in grading order): {new}"
    assert ids == current, "grader/checks/ids.txt lists the ids in another order than the steps grade them"


def test_every_step_has_checks_with_ids_derived_from_their_functions() -> None:
    checks.load_all()
    for s in STEPS:
        specs = checks.CHECKS[s.id]
        assert specs, s.id
        for c in specs:
            assert c.id.startswith(f"{s.id}.") and c.key == c.id, c


def test_registration_refuses_a_bad_or_repeated_id() -> None:
    checks.load_all()

    def Bad(r: object) -> None:  # not snake_case, on purpose
        raise AssertionError

    def _private(r: object) -> None:
        raise AssertionError

    for fn in (Bad, _private, lambda r: None):
        with pytest.raises(ValueError, match="snake_case"):
            check_id("dot_scores", fn)
    # a second check named like one already registered: refused, and nothing registered
    before = list(checks.CHECKS["dot_scores"])
    taken = before[0].id.partition(".")[2]
    twin = type(lambda: None)(Bad.__code__, {}, taken)
    with pytest.raises(ValueError, match="registered twice"):
        check("dot_scores", "a title")(twin)
    assert checks.CHECKS["dot_scores"] == before


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_reports_ids_are_the_same_in_every_language(lang: str) -> None:
    """The id is never translated: the same in the English and the Chinese report, the title worded."""
    from grader.grading.engine import grade

    root = Path(__file__).resolve().parent.parent
    report = grade(str(root / "solutions"), steps=["causal_attention"]).worded(lang)
    (step,) = report.steps
    assert [c.id for c in step.checks] == [c.id for c in checks.CHECKS["causal_attention"]]
    assert "causal_attention.mask_cut_to_num_tokens" in [c["id"] for c in report.to_dict()["steps"][0]["checks"]]
    if lang == "zh":
        assert any(c.name != spec.name for c, spec in zip(step.checks, checks.CHECKS["causal_attention"], strict=True))


def test_the_catalogue_lists_the_same_ids_and_titles() -> None:
    """grader/checks/catalogue.json (what the pytest plugin and `hint` read without torch) says the same checks,
    ids and titles as the imported modules register (its freshness as a whole: tests/test_docs.py)."""
    from grader.registry import catalogue

    declared = catalogue()
    assert [c["id"] for s in STEPS for c in declared[s.id]["checks"]] == listed()[0]
    assert [(c["id"], c["title"]) for s in STEPS for c in declared[s.id]["checks"]] == [
        (c.id, c.name) for s in STEPS for c in checks.CHECKS[s.id]]
