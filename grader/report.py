"""Report records (schema_version 1; docs/instructors.md) and their JSON form."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from grader import limits
from grader.files import without_surrogates
from grader.i18n import Text, from_data, to_data, word, wording

SCHEMA_VERSION = 1
# keys added within schema_version 1, which a reader may look for (none is ever renamed): 1 = each check's `id`,
# 2 = each check's `status` (CHECK_STATUSES: "waiting", a point that waits until the outputs match the reference)
SCHEMA_MINOR = 2
STATUSES = ("passed", "partial", "failed", "not_started", "error")
CHECK_STATUSES = ("passed", "failed", "waiting")  # "waiting" scores 0, as "failed": nothing was found wrong yet
# what a terminal, an editor or a spreadsheet may act on rather than show: C0 but tab and newline, DEL, C1 (some
# terminals run U+009B as CSI), every bidi control (U+061C, U+200E/F, U+202A-E, U+2066-9) and the Unicode line
# and paragraph separators
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
MAX_TEXT = limits.REPORT_TEXT_CHARS


def clean(text: str, limit: int = MAX_TEXT) -> str:
    """Messages may quote learner output: strip control characters, replace lone surrogates with U+FFFD, cap
    the length. A `Text` stays one, cleaned once it is worded."""
    if isinstance(text, Text):
        return Text(("call", _clean_worded, (text, limit)))
    text = _CONTROL.sub("", without_surrogates(str(text)))
    return text if len(text) <= limit else text[: limit - 1] + "…"


@wording("clean")
def _clean_worded(text: Text, limit: int, lang: str) -> str:
    return clean(text.worded(lang), limit)


@dataclass
class CheckResult:
    name: str  # the title, in the report's language
    score: float
    max_score: float
    passed: bool
    message: str = ""
    # the check's stable id, `<step>.<name>` (grader.checks.registration.check_id): the same in every language and
    # version, what platforms and exports follow a check by; a retired id is never reused (grader/checks/ids.txt)
    id: str = ""
    # not passed, and only because no output matches the reference yet (checks.Waiting): no finding, a neutral mark
    waiting: bool = False

    @property
    def status(self) -> str:
        return "passed" if self.passed else "waiting" if self.waiting else "failed"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "score": self.score, "max_score": self.max_score,
                "passed": self.passed, "status": self.status, "message": self.message}

    def worded(self, lang: str | None) -> CheckResult:
        return CheckResult(word(self.name, lang), self.score, self.max_score, self.passed, word(self.message, lang),
                           self.id, self.waiting)


@dataclass
class StepResult:
    id: str
    title: str
    score: float
    max_score: float
    status: str
    checks: list[CheckResult] = field(default_factory=list)
    detail: str = ""  # why: timeout, crashed (SIGKILL), import error, not implemented, …
    message: str = ""
    # classic mistakes recognised by behaviour (grader/grading/diagnose.py): [{"id", "message"}], report language
    diagnoses: list[dict[str, str]] = field(default_factory=list)
    # the attention weights of its picture cases, both sides' (grader.grading.pictures.Matrix), when the grade was
    # asked for them (engine.grade(..., pictures=True)) for grader.render to draw; never in the JSON report
    pictures: list[Any] = field(default_factory=list, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """= dataclasses.asdict(self), written out: asdict deep-copies every value, ~5× slower."""
        return {"id": self.id, "title": self.title, "score": self.score, "max_score": self.max_score,
                "status": self.status, "checks": [c.to_dict() for c in self.checks], "detail": self.detail,
                "message": self.message, "diagnoses": [dict(d) for d in self.diagnoses]}

    def worded(self, lang: str | None) -> StepResult:
        return StepResult(self.id, word(self.title, lang), self.score, self.max_score, self.status,
                          [c.worded(lang) for c in self.checks], word(self.detail, lang), word(self.message, lang),
                          [{k: word(v, lang) for k, v in d.items()} for d in self.diagnoses],
                          [p.worded(lang) if hasattr(p, "worded") else p for p in self.pictures])


@dataclass
class Report:
    submission: str
    steps: list[StepResult]
    notes: list[str] = field(default_factory=list)
    grader_version: str = ""
    schema_version: int = SCHEMA_VERSION
    # [{"where", "what"}]: code that studies the grader (grader/grading/flags.py), for a human to look at; no score
    flags: list[dict[str, str]] = field(default_factory=list)
    # what confined the worker that ran this code (grader.grading.engine.sandbox_record); empty when none ran
    sandbox: dict[str, Any] = field(default_factory=dict)
    schema_minor: int = SCHEMA_MINOR
    # what changes its scores, where a key graded it (`grade --secret`, a batch): the key's fingerprint (never the
    # key: grader.settings.key_fingerprint), the time-out, the steps, the grader's version; absent without a key
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a note may quote the learner's text (a notebook's magic line): cleaned like every message
        self.notes = [clean(n) for n in self.notes]

    @property
    def score(self) -> float:
        return round(sum(s.score for s in self.steps), 4)

    @property
    def max_score(self) -> float:
        return round(sum(s.max_score for s in self.steps), 4)

    def worded(self, lang: str | None) -> Report:
        """This report with every message in `lang` (the engine leaves them unworded: grader.i18n.Text); the JSON
        of an unworded report is the English one."""
        return Report(self.submission, [s.worded(lang) for s in self.steps], [word(n, lang) for n in self.notes],
                      self.grader_version, self.schema_version,
                      [{k: word(v, lang) for k, v in f.items()} for f in self.flags], self.sandbox,
                      self.schema_minor, dict(self.settings))

    def to_data(self) -> dict[str, Any]:
        """to_dict's shape with every message unworded (grader.i18n.to_data), for a process that words it
        (`from_data`): a grading process sends this, its starter words it in its reader's language."""
        d = self.to_dict()
        d["notes"] = [to_data(n) for n in self.notes]
        d["flags"] = [{k: to_data(v) for k, v in f.items()} for f in self.flags]
        for sd, s in zip(d["steps"], self.steps, strict=True):
            sd["title"], sd["message"] = to_data(s.title), to_data(s.message)
            sd["diagnoses"] = [{k: to_data(v) for k, v in g.items()} for g in s.diagnoses]
            sd["checks"] = [{**cd, "name": to_data(c.name), "message": to_data(c.message)}
                            for cd, c in zip(sd["checks"], s.checks, strict=True)]
        return d

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> Report:
        """`to_data`'s inverse: the same report, its messages unworded again (to_dict: the same JSON)."""
        steps = [StepResult(s["id"], from_data(s["title"]), s["score"], s["max_score"], s["status"],
                            [CheckResult(from_data(c["name"]), c["score"], c["max_score"], c["passed"],
                                         from_data(c["message"]), c.get("id", ""),
                                         c.get("status") == "waiting") for c in s["checks"]],
                            s["detail"], from_data(s["message"]),
                            [{k: from_data(v) for k, v in g.items()} for g in s["diagnoses"]])
                 for s in d["steps"]]
        return cls(d["submission"], steps, [from_data(n) for n in d["notes"]], d["grader_version"],
                   d["schema_version"], [{k: from_data(v) for k, v in f.items()} for f in d["flags"]],
                   dict(d["sandbox"]), d.get("schema_minor", 0), dict(d.get("settings") or {}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "schema_minor": self.schema_minor,
            "submission": self.submission,
            "score": self.score,
            "max_score": self.max_score,
            "grader_version": self.grader_version,
            "notes": self.notes,
            "flags": [dict(f) for f in self.flags],
            "sandbox": dict(self.sandbox),
            "steps": [s.to_dict() for s in self.steps],
            **({"settings": dict(self.settings)} if self.settings else {}),
        }
