"""Hidden checks: one module per step (grader/checks/<step>.py), each declaring everything about its step: its
cases (seeded inputs), its checks, its three hints, the cases drawn as pictures and the mistakes it diagnoses.

The machinery lives in four modules, re-exported here for the step modules:
  model         Case, CaseResult, CheckSpec, Failed, Waiting: the data
  registration  cases, check, hints, pictures, mistakes, diagnosis: what a step module declares, by step id
  inputs        Gen, plans: the cases drawn from the course secret
  vouching      Outcome, proof: the rule that a fact the worker reports counts only once the outputs are right

Check names are msgids marked N_() (translated when the report is built); Failed messages are written
with grader.i18n._ and run under i18n.deferred() (runner.py): their messages are worded at the edge (Report.worded).

Checks run under pytest in the trusted process only (grader/grading/runner.py).
"""

from __future__ import annotations

from grader.checks.inputs import JOURNEY, Gen, book_inputs, plans
from grader.checks.model import Case, CaseResult, CheckSpec, Failed, Waiting, describe_failure
from grader.checks.registration import (
    CASES,
    CHECKS,
    DIAGNOSES,
    HINT_LEVELS,
    HINTS,
    MISTAKES,
    PICTURES,
    cases,
    check,
    diagnosis,
    hints,
    load_all,
    mistakes,
    pictures,
)
from grader.checks.vouching import (
    NO_WORK_BUDGET,
    NO_WORK_STARTS,
    NOT_YET,
    NOT_YET_AFTER,
    PROOFS,
    VOUCH_ATOL,
    VOUCH_RTOL,
    Outcome,
    no_work,
    proof,
    vouched,
)

__all__ = ["CASES", "CHECKS", "DIAGNOSES", "HINTS", "HINT_LEVELS", "JOURNEY", "MISTAKES", "NOT_YET", "NOT_YET_AFTER",
           "NO_WORK_BUDGET", "NO_WORK_STARTS", "PICTURES", "PROOFS", "VOUCH_ATOL", "VOUCH_RTOL", "Case", "CaseResult",
           "CheckSpec", "Failed", "Gen", "Outcome", "Waiting", "book_inputs", "cases", "check", "describe_failure",
           "diagnosis", "hints", "load_all", "mistakes", "no_work", "pictures", "plans", "proof",
           "vouched"]
