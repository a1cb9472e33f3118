"""class.json (what the class report says, versioned) and class.html (the same, for a person: offline, no script)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from grader import i18n
from grader.i18n import N_
from grader.instructor.classreport import similarity
from grader.registry import STEPS, catalogue

SCHEMA = "attn-kata/class-report"
SCHEMA_VERSION = 1
BINS = 5  # score bins per step: 0-20 %, ..., 80-100 % of the step's points
RARE = 0.05  # a diagnosis at most this share of the graded (and at most 2 students, or more) share is rare
SHOWN_NAMES = 12  # students listed by name under a diagnosis; the rest counted
SHOWN_PAIRS = 25  # pairs shown side by side (every pair is in the table and in class.json)
CONTEXT = 2  # lines shown around the shared ones in a side-by-side view

ROOT = Path(__file__).resolve().parents[3]

WORDS = {
    "title": N_("Class report"),
    "graded_of": N_("{graded} of {total} submissions graded"),
    "mean_of": N_("mean of the {n} graded: {mean:g} out of {max:g}"),
    "distribution": N_("Score distribution per step"),
    "distribution_of": N_("Scores of the {n} graded in {step}, out of {max:g} points"),
    "bin": N_("{count} of {n} scored {low} to {high} percent of the points"),
    "grid": N_("Every student, every step"),
    "grid_note": N_("Share of each step's points; a blank row was not graded."),
    "student": N_("student"),
    "total": N_("total"),
    "status": N_("status"),
    "checks": N_("Failure rate of every check"),
    "checks_note": N_("Failed among the {n} graded (a step not started counts as failed)."),
    "check_id": N_("check id"),
    "check_title": N_("check"),
    "failed": N_("failed"),
    "rate": N_("rate"),
    "diagnoses": N_("Most common diagnoses"),
    "diagnosis": N_("diagnosis"),
    "count": N_("students"),
    "who": N_("names"),
    "more": N_("and {n} more"),
    "look": N_("Who needs a look"),
    "not_graded": N_("Not graded"),
    "reason": N_("reason"),
    "flagged": N_("Flagged: code that studies the grader"),
    "timeouts": N_("Ran out of time"),
    "none": N_("nobody"),
    "similar": N_("Pairs unusually alike"),
    "similar_note": N_("A lead for a person to look at, never a verdict: no score changes. The book's code, the "
                       "stubs and the reference are subtracted first, and so is code many classmates share."),
    "pair": N_("pair"),
    "similarity": N_("own code shared"),
    "evidence": N_("evidence"),
    "side_by_side": N_("side by side (shared lines marked)"),
    "no_pairs": N_("No pair is unusually alike."),
    "ev_code": N_("{share} of the smaller side's own code fingerprints ({shared} shared)"),
    "ev_failed": N_("the same {n} failed checks"),
    "ev_outputs": N_("identical wrong outputs in {n} checks"),
    "ev_diagnosis": N_("the same rare diagnosis: {diagnosis}"),
    "step": N_("step"),
}


def _w(lang: str, key: str) -> str:
    return i18n.translate(lang, WORDS[key])


def _steps(reports: dict[str, dict[str, Any]]) -> list[Any]:
    seen = {s["id"] for r in reports.values() for s in r.get("steps", [])}
    return [s for s in STEPS if s.id in seen] or list(STEPS)


def default_boilerplate() -> list[str]:
    """The course's own code: the reference (solutions/), the stubs (exercises/), where this checkout has them."""
    out = []
    for folder in ("solutions", "exercises"):
        files = [p.read_text(encoding="utf-8") for p in sorted((ROOT / folder).glob("*.py"))]
        # and as one module: a student's single file (or a folder's units joined) runs across the files' seams,
        # with or without the imports of one step's file from another
        joined = "\n\n".join(files)
        out += [*files, joined, re.sub(r"^from (?:step\d\d_)?\w+ import .*$", "", joined, flags=re.M)]
    return out


def build(rows: list[dict[str, str]], reports: dict[str, dict[str, Any]], sources: dict[str, str], *,
          lang: str = "en", boilerplate: list[str] | None = None) -> dict[str, Any]:
    """The class report's record. Deterministic: no time, no path, the same files give the same record."""
    lang = i18n.normalise(lang)
    cat = catalogue()
    steps = _steps(reports)
    graded = [r for r in rows if r["student"] in reports]
    n = len(graded)
    reps = [reports[r["student"]] for r in graded]
    max_total = reps[0]["max_score"] if reps else None
    mean = round(sum(r["score"] for r in reps) / n, 4) if n else None

    step_rows = []
    for s in steps:
        scores = [st for r in reps for st in r["steps"] if st["id"] == s.id]
        top = scores[0]["max_score"] if scores else 0
        hist = [0] * BINS
        for st in scores:
            frac = st["score"] / top if top else 0
            hist[min(BINS - 1, int(frac * BINS))] += 1
        step_rows.append({"id": s.id, "number": s.number, "title": i18n.step_title(s, lang), "max_score": top,
                          "graded": len(scores),
                          "mean": round(sum(st["score"] for st in scores) / len(scores), 4) if scores else None,
                          "histogram": hist})

    failed: Counter[str] = Counter()
    for r in reps:
        for st in r["steps"]:
            for c in st["checks"]:
                if not c["passed"]:
                    failed[c.get("id") or f"{st['id']}.{c['name']}"] += 1
    checks = []
    for s in steps:
        for c in cat.get(s.id, {}).get("checks", []):
            k = failed.get(c["id"], 0)
            checks.append({"id": c["id"], "step": s.id, "title": i18n.translate(lang, c["title"]), "failed": k,
                           "graded": n, "rate": round(k / n, 4) if n else None})

    diag_students: dict[tuple[str, str], set[str]] = defaultdict(set)
    diag_message: dict[tuple[str, str], str] = {}
    for r in reps:
        for st in r["steps"]:
            for d in st.get("diagnoses", []):
                key = (st["id"], str(d.get("id") or d.get("message")))
                diag_students[key].add(r["student"])
                diag_message.setdefault(key, str(d.get("message", "")))
    diagnoses = [{"step": k[0], "id": k[1], "message": diag_message[k], "count": len(v), "students": sorted(v)}
                 for k, v in sorted(diag_students.items(), key=lambda kv: (-len(kv[1]), kv[0]))]

    look = {
        "not_graded": [{"student": r["student"], "status": r["status"], "reason": r["reason"]}
                       for r in rows if r["student"] not in reports],
        "flagged": [{"student": r["student"], "flags": reports[r["student"]].get("flags")}
                    for r in graded if reports[r["student"]].get("flags")],
        "timeouts": [{"student": r["student"], "status": r["status"],
                      "steps": [st["id"] for st in reports[r["student"]]["steps"] if st.get("detail") == "timeout"]}
                     for r in graded if r["status"] == "over_budget"
                     or any(st.get("detail") == "timeout" for st in reports[r["student"]]["steps"])],
    }

    students = []
    for r in rows:
        rep = reports.get(r["student"])
        by = {st["id"]: st["score"] for st in rep["steps"]} if rep else {}
        students.append({"student": r["student"], "status": r["status"], "score": rep["score"] if rep else None,
                         "steps": [by.get(s.id) for s in steps]})

    pairs = similar_pairs(reps, {r["student"]: sources[r["student"]] for r in graded if r["student"] in sources},
                          diag_students, lang, default_boilerplate() if boilerplate is None else boilerplate)
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "lang": lang,
            "submissions": len(rows), "graded": n, "max_score": max_total,
            "mean": {"value": mean, "of": n, "says": _w(lang, "mean_of").format(n=n, mean=mean or 0,
                                                                              max=max_total or 0)},
            "steps": step_rows, "students": students, "checks": checks, "diagnoses": diagnoses,
            "needs_a_look": look,
            "similarity": {"method": "winnowing over normalised tokens", "k": similarity.K, "window": similarity.W,
                           "threshold": similarity.THRESHOLD, "lead_only": True, "pairs": pairs}}


def similar_pairs(reps: list[dict[str, Any]], sources: dict[str, str],
                  diag_students: dict[tuple[str, str], set[str]], lang: str,
                  boilerplate: list[str]) -> list[dict[str, Any]]:
    """The code pairs, each with its evidence: the code's, and the behaviour's the reports already hold."""
    by = {r["student"]: r for r in reps}
    common = similarity.boilerplate(boilerplate)
    n = max(1, len(reps))
    rare = {k for k, v in diag_students.items() if len(v) <= max(2, int(RARE * n))}
    out: list[dict[str, Any]] = []
    for p in similarity.pairs(sources, common):
        ev = [_w(lang, "ev_code").format(share=f"{p.similarity:.0%}", shared=p.shared)]
        fa, fb = _failures(by[p.a]), _failures(by[p.b])
        bonus = 0.0
        if fa and fa.keys() == fb.keys():
            ev.append(_w(lang, "ev_failed").format(n=len(fa)))
            bonus += 0.1
        same_out = sum(1 for k in fa.keys() & fb.keys() if fa[k] and fa[k] == fb[k])
        if same_out:
            ev.append(_w(lang, "ev_outputs").format(n=same_out))
            bonus += 0.1
        for k in sorted(rare):
            if {p.a, p.b} <= diag_students[k]:
                ev.append(_w(lang, "ev_diagnosis").format(diagnosis=k[1]))
                bonus += 0.2
        out.append({"a": p.a, "b": p.b, "similarity": p.similarity, "shared": p.shared,
                    "score": round(p.similarity + bonus, 4), "evidence": ev,
                    "lines_a": p.lines_a, "lines_b": p.lines_b})
    out.sort(key=lambda q: (-q["score"], q["a"], q["b"]))
    return out


def _failures(rep: dict[str, Any]) -> dict[str, str]:
    """check id -> its message, for each failed check of a step that ran (not started is no behaviour)."""
    return {str(c.get("id")): str(c.get("message") or "") for st in rep["steps"]
            if st["status"] in ("partial", "failed") for c in st["checks"] if not c["passed"]}


def _colour(frac: float | None) -> str:
    if frac is None:
        return "hn"
    return f"h{min(4, int(frac * 5))}"


def render_html(data: dict[str, Any], reports: dict[str, dict[str, Any]], sources: dict[str, str]) -> str:
    """The page: one file, inline CSS and SVG, no script."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("grader.instructor.classreport", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    lang = data["lang"]
    words = {k: _w(lang, k) for k in WORDS}
    maxes = [s["max_score"] for s in data["steps"]]
    grid = [{"student": s["student"], "status": s["status"], "score": s["score"],
             "cells": [None if v is None else (v, _colour(v / m if m else 0))
                       for v, m in zip(s["steps"], maxes, strict=True)]} for s in data["students"]]
    side = []
    for p in data["similarity"]["pairs"][:SHOWN_PAIRS]:
        side.append({"pair": p, "a": _marked(sources.get(p["a"], ""), set(p["lines_a"])),
                     "b": _marked(sources.get(p["b"], ""), set(p["lines_b"]))})
    return env.get_template("class.html.j2").render(d=data, w=words, grid=grid, side=side, bins=BINS)


def _marked(source: str, lines: set[int]) -> list[tuple[int, str, bool]]:
    """The shared lines, marked, with CONTEXT lines around each run; (0, "", False) where lines are left out."""
    text = source.splitlines()
    keep = {j for i in lines for j in range(i - CONTEXT, i + CONTEXT + 1) if 1 <= j <= len(text)}
    out: list[tuple[int, str, bool]] = []
    for i in sorted(keep):
        if out and out[-1][0] != i - 1:
            out.append((0, "", False))
        out.append((i, text[i - 1], i in lines))
    return out
