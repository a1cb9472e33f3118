"""The class report's cost (grader/instructor/classreport): the page's build time and size, and the similarity's CPU,
for synthetic classes of N students.

    python benchmarks/bench_class_report.py [--sizes 300 1000]

Each synthetic student has a report for every step (random scores, failed checks and a diagnosis now and then) and
code: the book's (solutions/, as one module) with a few functions of their own, drawn at random from torch's
vocabulary; one student in twenty is a renamed, reordered copy of a classmate. Targets: the page for N = 1000 in at
most 5 s and 2 MB; the similarity for N = 300 in at most 30 s of CPU.
"""

from __future__ import annotations

import sys

assert sys.platform == "linux", "a benchmark of this Linux machine (benchmarks/RESULTS.md)"  # typed for Linux only

import argparse
import random
import re
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import submissions

from grader.instructor.classreport import build, render_html, similarity
from grader.instructor.classreport.build import default_boilerplate
from grader.registry import STEPS, catalogue

OPS = ["torch.softmax({x} * {n}, dim=-1)", "{x} @ {y}.T + {n}", "torch.matmul({x}, {y}) - {n}",
       "{x}.masked_fill({m} > {n}, -torch.inf)", "torch.tril(torch.ones({n}, {n}), diagonal={d})",
       "{x} / {y}.shape[-1] ** 0.{n}", "torch.einsum('ij,kj->ik', {x}, {y}) * {n}", "{x}.transpose({d}, {n})",
       "torch.dropout({x}, 0.{n}, True)", "{x}.view(-1, {n})", "{x}.sum(dim={d}) + {n}"]


def own_code(rng: random.Random, k: int) -> list[str]:
    out = []
    for f in range(k):
        args = [f"a{i}" for i in range(rng.randint(1, 3))]
        body = []
        for line in range(rng.randint(3, 7)):
            expr = rng.choice(OPS).format(x=rng.choice(args), y=rng.choice(args), m=rng.choice(args),
                                          n=rng.randint(2, 99), d=rng.randint(0, 2))
            body.append(f"    t{line} = {expr}")
        out.append(f"def helper_{rng.randint(0, 10**6)}_{f}({', '.join(args)}):\n" + "\n".join(body)
                   + f"\n    return t{len(body) - 1}\n")
    return out


def synthetic(n: int, seed: int = 0) -> tuple[list[dict[str, str]], dict[str, dict[str, Any]], dict[str, str]]:
    rng = random.Random(seed)
    cat = catalogue()
    book = submissions.module_source()
    rows, reports, sources = [], {}, {}
    own: dict[str, list[str]] = {}
    for i in range(n):
        name = f"student{i:04d}"
        if i % 50 == 49:  # not graded
            rows.append({"student": name, "submission": f"{name}.py", "status": "unreadable", "reason": "x"})
            continue
        steps, total, top = [], 0.0, 0.0
        for s in STEPS:
            checks = []
            for c in cat[s.id]["checks"]:
                ok = rng.random() < 0.8
                checks.append({"id": c["id"], "name": c["title"], "score": c["points"] if ok else 0.0,
                               "max_score": c["points"], "passed": ok,
                               "message": "" if ok else f"got {rng.randint(0, 3)}"})
            score = sum(c["score"] for c in checks)
            maxs = sum(c["max_score"] for c in checks)
            diag = [{"id": f"mistake{rng.randint(0, 6)}", "message": "a mistake"}] if rng.random() < 0.1 else []
            steps.append({"id": s.id, "title": s.title, "score": score, "max_score": maxs,
                          "status": "passed" if score == maxs else "partial", "checks": checks, "diagnoses": diag})
            total, top = total + score, top + maxs
        reports[name] = {"student": name, "submission": f"{name}.py", "score": total, "max_score": top,
                         "steps": steps, "flags": []}
        rows.append({"student": name, "submission": f"{name}.py", "status": "graded", "reason": ""})
        if i % 20 == 19 and f"student{i - 1:04d}" in own:  # a copy of the one before, renamed and reordered
            own[name] = list(reversed([re.sub(r"\ba(\d)\b", r"arg\1", f) for f in own[f"student{i - 1:04d}"]]))
        else:
            own[name] = own_code(rng, rng.randint(2, 5))
        sources[name] = book + "\n\n" + "\n\n".join(own[name])
    return rows, reports, sources


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 1000])
    args = ap.parse_args()
    common = similarity.boilerplate(default_boilerplate())
    for n in args.sizes:
        rows, reports, sources = synthetic(n)
        c0 = time.process_time()
        pairs = similarity.pairs(sources, common)
        sim_cpu = time.process_time() - c0
        planted = {(f"student{i - 1:04d}", f"student{i:04d}") for i in range(n) if i % 20 == 19
                   and f"student{i - 1:04d}" in sources and f"student{i:04d}" in sources}
        found = {(p.a, p.b) for p in pairs}
        print(f"N={n:5d}: planted copies found {len(planted & found)} of {len(planted)}; "
              f"pairs that are not planted {len(found - planted)}")
        w0, c0 = time.perf_counter(), time.process_time()
        data = build(rows, reports, sources, lang="en")
        page = render_html(data, reports, sources)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        size = len(page.encode())
        print(f"N={n:5d}: similarity CPU {sim_cpu:.2f} s ({len(pairs)} pairs); the whole report (class.json and "
              f"class.html, its similarity included) wall {wall:.2f} s, CPU {cpu:.2f} s, the page besides the "
              f"similarity {max(0.0, wall - sim_cpu):.2f} s; class.html {size / 1e6:.2f} MB")
        if n == 1000:
            print(f"  page N=1000: {wall - sim_cpu:.2f} s besides the similarity, {wall:.2f} s with it (goal <= 5 s): "
                  f"{'met' if wall - sim_cpu <= 5 else 'NOT met'}; "
                  f"{size / 1e6:.2f} MB (goal <= 2 MB): {'met' if size <= 2e6 else 'NOT met'}")
        if n == 300:
            print(f"  similarity N=300: {sim_cpu:.2f} s CPU (goal <= 30 s): {'met' if sim_cpu <= 30 else 'NOT met'}")


if __name__ == "__main__":
    main()
