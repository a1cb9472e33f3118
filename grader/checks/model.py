"""The data a step's checks work with: what a case asks the worker to run (`Case`), what came back (`CaseResult`),
a registered check (`CheckSpec`) and the verdict a check raises (`Failed`, `Waiting`).

Trusted side: read by the grading process only; the worker gets a case as JSON (grader.grading.engine.request).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.i18n import _


class Failed(AssertionError):
    """A check's verdict, worded for the learner."""


class Waiting(Failed):
    """A verdict that already says the point waits for right outputs (NOT_YET, common.shown_by): said as it is."""


@dataclass
class Case:
    probe: str
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0  # torch's global seed in the worker just before the probe runs
    # no draw of the secret's generator reaches it (the book's example): its answer can be known in advance, so it
    # proves no work (set by `plans`)
    public: bool = False

    def subject(self) -> str:
        """What the case exercises: the function or class it calls (several cases may call the same one)."""
        return str(self.params.get("fn") or self.params.get("cls") or self.probe)


@dataclass
class CheckSpec:
    step: str
    name: str  # the title: an English msgid, worded in the report's language
    fn: Callable[[Any], None]  # takes a grader.checks.vouching.Outcome
    points: float = 1.0
    # the stable id, `<step>.<the check function's name>` (registration.check): never translated, never reused
    # once retired (grader/checks/ids.txt)
    id: str = ""

    @property
    def key(self) -> str:
        """What the runner files the check's verdict under: its id (unique), or step and title for one made by hand."""
        return self.id or f"{self.step}::{self.name}"



@dataclass
class CaseResult:
    status: str  # ok | not_started | missing | wrong_type | error | memory
    tensors: dict[str, torch.Tensor]
    facts: dict[str, Any]
    message: str = ""
    where: dict[str, Any] | None = None
    exception: str = ""
    msgid: str = ""  # a known template (grader.worker.probes.MESSAGES) for `message`, worded in the report's language
    params: dict[str, Any] = field(default_factory=dict)
    # a reference result's answer to Outcome.trivial, with the Case it was computed for: every submission graded
    # under one secret shares the reference's results, so it is computed once per case, not once per check
    trivial_for: tuple[Case, bool] | None = field(default=None, repr=False, compare=False)

    def text(self) -> str:
        """`message` in the current language (the worker sends English plus a msgid and its parameters)."""
        if self.msgid:
            try:
                return _(self.msgid).format(**self.params)
            except (KeyError, IndexError, ValueError, AttributeError):
                pass
        return self.message



def describe_failure(res: CaseResult) -> str:
    if res.status == "not_started":
        return _("not implemented yet (raises NotImplementedError)")
    if res.status in ("missing", "wrong_type"):
        return res.text()
    if res.exception == "MalformedResult":  # refused by grader.sandbox.wire: the message says why
        return res.message
    where = ""
    if res.where:
        where = _(" at {file} line {line}: `{code}`").format(file=res.where.get("file"), line=res.where.get("line"),
                                                            code=res.where.get("code", ""))
    if res.status == "memory":
        return _("ran out of memory{where}").format(where=where)
    return _("your code raised {exception}{where}: {message}").format(exception=res.exception, where=where,
                                                                     message=res.message)
