"""The docs tested against the code (as sqlite-utils does): every command has help and appears in the docs, every
bound of grader/limits.py is in the rendered table and read by the modules it names, the generated blocks are
fresh, and every relative link in the README, CONTRIBUTING.md and docs/ leads to a file (and heading) that
exists. No torch is imported."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from grader import dev, limits
from grader.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250  # issue 27: a README of about 200 lines; the rest lives in docs/


def commands(cmd: click.Command = main, path: tuple[str, ...] = ("attn-kata",)):
    """(path, command) for the CLI and every command and subcommand under it, hidden ones left out."""
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            if not sub.hidden:
                yield from commands(sub, (*path, name))


def docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in DOCS)


@pytest.mark.parametrize(("path", "cmd"), list(commands()), ids=lambda x: " ".join(x) if isinstance(x, tuple) else "")
def test_every_command_has_help_and_appears_in_the_docs(path: tuple[str, ...], cmd: click.Command) -> None:
    assert (cmd.help or cmd.short_help or "").strip(), f"{' '.join(path)} has no help text"
    text = re.sub(r"\s+", " ", docs_text())
    assert " ".join(path) in text, f"`{' '.join(path)}` appears in no doc (README.md, CONTRIBUTING.md, docs/*.md)"


def test_the_generated_blocks_are_fresh() -> None:
    """The README's step table (the registry) and docs/instructors.md's limits (grader/limits.py)."""
    stale = [str(path.relative_to(ROOT)) for path, text in dev.generated().items()
             if path.read_text(encoding="utf-8") != text]
    assert stale == [], f"run `python -m grader.dev docs`: {stale}"


def test_a_stale_block_is_found(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    planted = text.replace("| `dot_scores` |", "| `dot_scores_old` |")
    assert planted != text
    assert dev.with_block(planted, dev.STEPS_MARKERS, dev.readme_steps()) == text
    with pytest.raises(ValueError, match="steps:start"):
        dev.with_block(text.replace(dev.STEPS_MARKERS[1], ""), dev.STEPS_MARKERS, dev.readme_steps())


def rendered_limits() -> dict[str, str]:
    """The limits table of docs/instructors.md, read back: name -> value as shown."""
    text = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    block = text.split(dev.LIMITS_MARKERS[0])[1].split(dev.LIMITS_MARKERS[1])[0]
    return {m[1]: m[2] for m in re.finditer(r"^\| `([A-Z0-9_]+)` \| ([^|]+?) \|", block, flags=re.M)}


def test_every_limit_is_in_the_rendered_table() -> None:
    table = rendered_limits()
    assert {x.name: x.shown() for x in limits.LIMITS} == table


def test_each_limit_is_a_constant_of_its_own_name() -> None:
    names = [x.name for x in limits.LIMITS]
    assert len(names) == len(set(names))
    assert {n: getattr(limits, n) for n in names} == {x.name: x.value for x in limits.LIMITS}
    assert all(x.why.strip() and x.where for x in limits.LIMITS)


def reads(source: str) -> set[str]:
    """The names of grader.limits a module's source reads: `from grader import limits [as x]` then `x.NAME`, or
    `from grader.limits import NAME`."""
    tree = ast.parse(source)
    aliases, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "grader":
            aliases |= {a.asname or a.name for a in node.names if a.name == "limits"}
        elif isinstance(node, ast.ImportFrom) and node.module == "grader.limits":
            names |= {a.name for a in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            names.add(node.attr)
    return names


def module_source(dotted: str) -> str:
    path = ROOT / Path(*dotted.split("."))
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text(encoding="utf-8")


@pytest.mark.parametrize("limit", limits.LIMITS, ids=lambda x: x.name)
def test_every_limit_is_read_by_the_modules_it_names(limit: limits.Limit) -> None:
    for module in limit.where:
        assert limit.name in reads(module_source(module)), f"{module} does not read grader.limits.{limit.name}"


def test_reading_a_limit_is_recognised_and_a_literal_is_not() -> None:
    assert reads("from grader import limits as b\nX = b.STEP_TIMEOUT\n") == {"STEP_TIMEOUT"}
    assert reads("from grader.limits import CODE_CELLS\n") == {"CODE_CELLS"}
    assert reads("import grader\nSTEP_TIMEOUT = 10.0\n") == set()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(path: Path) -> list[str]:
    """The relative links of a Markdown file whose file, or heading, does not exist."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)  # no links in code blocks
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            out.append(target)
        elif anchor and dest.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", dest.read_text(encoding="utf-8"), flags=re.M)
            if anchor not in {slug(h) for h in headings}:
                out.append(target)
    return out


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading (here)\n")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](there.md) [ok](there.md#a-heading-here) [web](https://x.y/z) [gone](nowhere.md) "
                   "[bad anchor](there.md#elsewhere)\n```\n[in code](nowhere-either.md)\n```\n")
    assert broken_links(doc) == ["nowhere.md", "there.md#elsewhere"]


def test_the_readme_is_short_and_keeps_its_marked_blocks() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    for marker in (*dev.STEPS_MARKERS, "<!-- figures:start -->", "<!-- figures:end -->"):
        assert text.count(marker) == 1, marker
