"""Structural causes first (issue 12): one message for one cause.

When a module's structure stops the probes before anything runs (heads in a plain Python list, parameters that
cannot be matched to the reference's roles, a parameter of the wrong shape), every case built on it fails the same
way, and so does every check that reads one of them. The learner should read that cause once, on the step's
structure check, and not five times: the other checks that fail with the same words, or only because no output
could be compared (Outcome.require_work), are reported as skipped, pointing at it. Their score is 0 either way.
"""

from __future__ import annotations

import importlib

from grader.checks.model import CaseResult
from grader.checks.vouching import NOT_YET, NOT_YET_AFTER
from grader.i18n import N_, _, translate

# a step's structure check: where the structural cause is said in full (else the first check that says it)
STRUCTURE_ATTR = "STRUCTURE_CHECK"
SKIPPED = N_("skipped: see “{check}” (the same cause)")


def waits(msg: str) -> bool:
    """A failed check's message (its English value) says the point only waits for right outputs (checks.Waiting:
    NOT_YET, common.SHOWN_BY_OUTPUTS): no finding, shown with a neutral mark and the status "waiting"."""
    from grader.checks.common import SHOWN_BY_OUTPUTS  # common imports the checks' package, which imports this

    _what, _sep, shown = SHOWN_BY_OUTPUTS.partition("{what}")
    return str(msg) == str(_(NOT_YET)) or str(msg).endswith(shown)


def structure_check(step: str) -> str | None:
    """The msgid of `step`'s structure check, if its module names one."""
    return getattr(importlib.import_module(f"grader.checks.{step}"), STRUCTURE_ATTR, None)


def first(step: str, names: list[str], verdicts: list[tuple[bool, str]],
          cases: dict[str, CaseResult]) -> list[tuple[bool, str]]:
    """`verdicts` (passed, message) of the checks `names` (msgids, in order), with a structural cause said once.
    Messages are compared as their English values (grader.i18n.Text): one wording, whatever the reader's."""
    # one cause, however many sizes it is said at (the book's example names its own shapes): by template
    kinds: dict[str, set[str]] = {}
    for r in cases.values():
        if r.status == "wrong_type":
            kinds.setdefault(r.msgid or r.text(), set()).add(r.text())
    no_work = str(_(NOT_YET))
    _finding, _sep, after = str(_(NOT_YET_AFTER)).partition("{finding}")

    def consequence(msg: str) -> bool:
        """Failed only because no output could be compared: what a fact says waits for a right output."""
        return msg == no_work or msg.endswith(after)

    repeated = [texts for texts in kinds.values() if sum(not ok and msg in texts for ok, msg in verdicts) >= 2]
    if not repeated:
        return verdicts
    preferred = structure_check(step)
    order = sorted(range(len(names)), key=lambda i: names[i] != preferred)  # the structure check first
    out = list(verdicts)
    for texts in repeated:
        home = next(i for i in order if not verdicts[i][0] and verdicts[i][1] in texts)
        skipped = translate(None, SKIPPED).format(check=translate(None, names[home]))
        for i, (ok, msg) in enumerate(verdicts):
            if i != home and not ok and (msg in texts or consequence(msg)):
                out[i] = (False, skipped)
    return out
