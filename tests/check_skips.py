"""Fail on any skipped test that the allow-list below does not name: a skip is a test that did not run.

    python -m pytest -q -rs --junitxml=.pytest_cache/junit.xml tests && python tests/check_skips.py

reads the JUnit XML pytest wrote (default .pytest_cache/junit.xml), prints every skip with its reason and
exits 1 if one is not allowed (2 if the file is missing or holds no test). It reads pytest's own report, so
no plugin of ours decides what counts as run (tests/conftest.py only turns the warm daemon off).
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

DEFAULT = Path(".pytest_cache") / "junit.xml"

# (test module, test name, a piece of the skip's reason): each one a skip that says nothing about the kata
ALLOWED: list[tuple[str, str, str]] = [
    # Landlock is a property of the kernel CI runs on, not something a package install provides; the test
    # proves the layer where it exists, and `attn-kata doctor` reports its absence
    ("tests.test_batch", "test_a_worker_cannot_read_the_secret_from_a_grading_process", "needs Landlock"),
]


def skips(xml: Path) -> tuple[int, list[tuple[str, str, str]]]:
    """(number of test cases, [(module, test name, reason)] for each skipped one)."""
    root = ET.parse(xml).getroot()
    cases = list(root.iter("testcase"))
    found = []
    for case in cases:
        for skipped in case.findall("skipped"):
            reason = skipped.get("message") or skipped.text or ""
            found.append((case.get("classname", ""), case.get("name", ""), reason))
    return len(cases), found


def allowed(module: str, name: str, reason: str) -> bool:
    base = name.split("[", 1)[0]  # every parametrization of an allowed test
    return any(module == m and base == n and piece in reason for m, n, piece in ALLOWED)


def main(argv: list[str]) -> int:
    xml = Path(argv[1]) if len(argv) > 1 else DEFAULT
    if not xml.is_file():
        print(f"check_skips: no {xml}: run pytest with --junitxml={xml} first", file=sys.stderr)
        return 2
    n, found = skips(xml)
    if n == 0:
        print(f"check_skips: {xml} holds no test", file=sys.stderr)
        return 2
    bad = [s for s in found if not allowed(*s)]
    for module, name, reason in found:
        print(f"{'allowed' if (module, name, reason) not in bad else 'NOT ALLOWED'} skip: {module}::{name}: {reason}")
    if bad:
        print(f"check_skips: {len(bad)} skipped test(s) outside the allow-list in {__file__}: install what they "
              "need, or fix them", file=sys.stderr)
        return 1
    print(f"check_skips: {n} tests, {len(found)} skipped, all allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
