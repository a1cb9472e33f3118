"""For the kata's developers: the docs' generated blocks, written from the code (`python -m grader.dev docs`).

Three blocks of the docs are generated, each between an HTML comment pair that a reader's Markdown hides, and one
file:
- README.md `<!-- steps:start -->` … `<!-- steps:end -->`: the step table, from grader/registry.py and the
  signatures of the public names in solutions/;
- docs/instructors.md `<!-- limits:start -->` … `<!-- limits:end -->`: every bound of grader/limits.py;
- docs/design.md `<!-- policy:start -->` … `<!-- policy:end -->`: the sandbox policy table, per context, from
  grader/sandbox/policy.py (what grading with a secret needs, which the gate and doctor read too);
- grader/checks/catalogue.json: what each step module declares (hints, checks with their ids, titles and points,
  pictures, mistakes), which `attn-kata hint` and the pytest plugin read without importing torch
  (grader.registry.catalogue).

    python -m grader.dev docs            # rewrite all four in place
    python -m grader.dev docs --check    # exit 1 if any is stale (tests/test_docs.py does the same)
    python -m grader.dev readme-steps    # print the step table
    python -m grader.dev limits-table    # print the limits table
    python -m grader.dev policy-table    # print the sandbox policy table
    python -m grader.dev catalogue       # print the catalogue

The tables import no torch (they read the registry, the limits and the solutions' source text); the catalogue is
written from the step modules themselves, imported (torch): what they register is what it says.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from grader.limits import LIMITS
from grader.registry import CATALOGUE, CHECKS_FOLDER, STEPS, Step
from grader.sandbox import policy
from grader.settings import IMPORT_ROOT, KATA_ROOT

README = IMPORT_ROOT / "README.md"
INSTRUCTORS = IMPORT_ROOT / "docs" / "instructors.md"
DESIGN = IMPORT_ROOT / "docs" / "design.md"
POLICY_MARKERS = ("<!-- policy:start -->", "<!-- policy:end -->")
STEPS_MARKERS = ("<!-- steps:start -->", "<!-- steps:end -->")
LIMITS_MARKERS = ("<!-- limits:start -->", "<!-- limits:end -->")


def signatures(step: Step, solutions: Path = KATA_ROOT / "solutions") -> list[str]:
    """Each public name of `step` as the learner calls it: `f(a, b=1)`, a class by its constructor."""
    tree = ast.parse((solutions / step.file).read_text(encoding="utf-8"))
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    out = []
    for name in step.names:
        node = defs[name]
        if isinstance(node, ast.ClassDef):
            init = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
            args = init.args
            args = ast.arguments(posonlyargs=[], args=args.args[1:], vararg=args.vararg, kwonlyargs=args.kwonlyargs,
                                 kw_defaults=args.kw_defaults, kwarg=args.kwarg, defaults=args.defaults)
        else:
            args = node.args
        bare = ast.arguments(
            posonlyargs=[ast.arg(a.arg) for a in args.posonlyargs], args=[ast.arg(a.arg) for a in args.args],
            vararg=args.vararg and ast.arg(args.vararg.arg), kwonlyargs=[ast.arg(a.arg) for a in args.kwonlyargs],
            kw_defaults=args.kw_defaults, kwarg=args.kwarg and ast.arg(args.kwarg.arg), defaults=args.defaults)
        out.append(f"{name}({ast.unparse(bare)})")
    return out


def readme_steps() -> str:
    """The README's step table, one row per registry step (tests/test_steps.py reads it back)."""
    rows = ["| # | step id | file | what you write | book § |", "|---|---|---|---|---|"]
    for step in STEPS:
        names = ", ".join(f"`{sig}`" for sig in signatures(step))
        rows.append(f"| {step.number} | `{step.id}` | `{step.file}` | {names} | {step.section} |")
    return "\n".join(rows)


def limits_table() -> str:
    """Every bound of grader/limits.py, grouped by area: name, value, why, where it is enforced."""
    out: list[str] = []
    for area in dict.fromkeys(limit.area for limit in LIMITS):
        out += [f"**{area}**", "", "| bound | value | why | enforced in |", "|---|---|---|---|"]
        for limit in (x for x in LIMITS if x.area == area):
            where = ", ".join(f"`{m}`" for m in limit.where)
            out.append(f"| `{limit.name}` | {limit.shown()} | {limit.why.replace('|', '/')} | {where} |")
        out.append("")
    return "\n".join(out).rstrip("\n")


def catalogue() -> str:
    """grader/checks/catalogue.json's text: each step's declarations as its imported module registers them
    (grader.checks.registration), in the registry's order. Titles, hints and mistakes are English msgids."""
    import json

    from grader import checks
    from grader.checks import registration

    checks.load_all()
    steps = {s.id: {"hints": list(registration.HINTS.get(s.id, ())),
                    "checks": [{"id": c.id, "title": c.name, "points": c.points} for c in checks.CHECKS.get(s.id, [])],
                    "pictures": dict(registration.PICTURES.get(s.id, {})),
                    "mistakes": {m: registration.MISTAKES[m] for m in registration.STEP_MISTAKES.get(s.id, [])}}
             for s in STEPS}
    about = ("Generated by `python -m grader.dev docs` from the step modules grader/checks/<step>.py: do not edit "
             "(tests/test_docs.py fails when it is stale). What each step declares, read without importing torch "
             "(grader.registry.catalogue): its hints, its checks (stable id, title, points), the cases drawn as "
             "attention weights and the mistakes its diagnosis names. Texts are English msgids.")
    return json.dumps({"about": about, "steps": steps}, ensure_ascii=False, indent=1) + "\n"


def with_block(text: str, markers: tuple[str, str], block: str) -> str:
    """`text` with what lies between the two markers replaced by `block` (the markers kept)."""
    start, end = markers
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ValueError(f"expected one {start} … {end} pair")
    head, rest = text.split(start)
    _, tail = rest.split(end)
    return f"{head}{start}\n{block}\n{end}{tail}"


def generated() -> dict[Path, str]:
    """Each generated file's text as it should be now."""
    out = {}
    for path, markers, block in ((README, STEPS_MARKERS, readme_steps()),
                                 (INSTRUCTORS, LIMITS_MARKERS, limits_table()),
                                 (DESIGN, POLICY_MARKERS, policy.table_markdown())):
        out[path] = with_block(path.read_text(encoding="utf-8"), markers, block)
    out[CHECKS_FOLDER / CATALOGUE] = catalogue()
    return out


def main(argv: list[str]) -> int:
    match argv:
        case ["readme-steps"]:
            print(readme_steps())
        case ["limits-table"]:
            print(limits_table())
        case ["policy-table"]:
            print(policy.table_markdown())
        case ["catalogue"]:
            print(catalogue(), end="")
        case ["docs", *rest] if rest in ([], ["--check"]):
            stale = []
            for path, text in generated().items():
                if not path.is_file() or path.read_text(encoding="utf-8") != text:
                    stale.append(path)
                    if not rest:
                        path.write_text(text, encoding="utf-8")
            for path in stale:
                print(f"{'stale' if rest else 'rewrote'}: {path.relative_to(IMPORT_ROOT)}")
            return 1 if stale and rest else 0
        case _:
            print(__doc__.split("\n\n")[2].strip("\n"), file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
