"""The class report: OUT/class.json and OUT/class.html, built from what a batch left in OUT (gradebook.csv, the
reports, sources.json), never by grading. `attn-kata batch` writes it at its end; `attn-kata report OUT/` builds it
again (in another language, say) from the same files. Trusted instructor process only: it reads the course's
solutions as boilerplate for the similarity leads (grader.instructor.classreport.similarity)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from grader.files import write_atomic
from grader.instructor.classreport.build import SCHEMA, SCHEMA_VERSION, build, render_html

__all__ = ["SCHEMA", "SCHEMA_VERSION", "SOURCES", "build", "read_out", "render_html", "save_sources", "write"]

SOURCES = "sources.json"  # OUT/sources.json: each graded student's code as submitted (the similarity's input)


def save_sources(out: Path, sources: dict[str, str]) -> None:
    """Keep each graded student's code in OUT, so `attn-kata report` finds the same pairs without the uploads."""
    write_atomic(Path(out) / SOURCES, json.dumps(dict(sorted(sources.items())), ensure_ascii=False))


def read_sources(entries: list[Any], reports: dict[str, Any]) -> dict[str, str]:
    """Each graded entry's code (every unit of a folder or notebook, in order), read as grading read it."""
    from grader.grading import ingest

    out: dict[str, str] = {}
    for e in entries:
        if reports.get(e.slug) is None or e.path is None:
            continue
        try:
            sub = ingest.read_submission(e.path)
        except Exception:  # nothing to compare: it was graded, so this is rare (a file gone since)
            continue
        out[e.student] = "\n\n".join(u.source for u in sub.units)
    return out


def read_out(out: Path) -> tuple[list[dict[str, str]], dict[str, dict[str, Any]], dict[str, str]]:
    """(gradebook rows, reports by student, sources by student) as a batch left them in `out`."""
    out = Path(out)
    rows = list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text(encoding="utf-8"))))
    reports: dict[str, dict[str, Any]] = {}
    for path in sorted((out / "reports").glob("*.json")):
        rep = json.loads(path.read_text(encoding="utf-8"))
        reports[str(rep.get("student", path.stem))] = rep
    src = out / SOURCES
    sources = json.loads(src.read_text(encoding="utf-8")) if src.exists() else {}
    return rows, reports, sources


def write(out: Path, lang: str = "en", boilerplate: list[str] | None = None) -> dict[str, Any]:
    """Build OUT/class.json and OUT/class.html from OUT (each written atomically); the class.json record."""
    out = Path(out)
    rows, reports, sources = read_out(out)
    data = build(rows, reports, sources, lang=lang, boilerplate=boilerplate)
    write_atomic(out / "class.json", json.dumps(data, ensure_ascii=False, indent=1) + "\n")
    write_atomic(out / "class.html", render_html(data, reports, sources))
    return data
