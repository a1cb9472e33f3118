"""Fail on any skipped test that the allow-list below does not name: a skip is a test that did not run.

    python -m pytest -q -rs -n 2 --dist loadfile --junitxml=.pytest_cache/junit.xml tests && python tests/check_skips.py

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
    # .ci/setups.sh's non-root set-up: a grader that is not root makes no cgroup, so the tree's memory cap does not
    # exist there (doctor: "memory capped for the whole process tree" not active; every process keeps RLIMIT_AS);
    # the root set-ups prove it
    ("tests.test_redteam", "test_memory_limit_holds_for_the_workers_process_tree", "grader that is not root"),
    # the same set-up: no tmpfs, so the disk filler is not run (it would write 16 GB to the shared disk)
    ("tests.test_hostile", "test_hostile_submission[disk_filler]", "grader that is not root lacks by design"),
    # the same set-up: choosing the next pid (ns_last_pid) needs root; the pidfd kill it checks is the same code for
    # every uid, proven in the root set-ups
    ("tests.test_hostile", "test_killing_a_finished_worker_never_hits_the_process_that_reused_its_pid",
     "needs root"),
    # a developer's run as a plain user: the daemon's refusal of another uid needs a process that becomes another
    # uid (nobody); CI's main suite runs as root and proves it
    ("tests.test_daemon", "test_another_user_cannot_connect", "needs root"),
    # the same: a workspace made read-only for every user (a bind mount in a mount namespace) needs root to make
    ("tests.test_init", "test_read_only_workspace_keeps_progress_in_the_user_state_dir", "needs root"),
    # the same: a worker is not dumpable, so only root reads its memory (the secret's absence from it); CI's main
    # suite runs as root and proves it
    ("tests.test_forked", "test_a_cold_grades_worker_is_forked_before_the_secret_exists_in_its_parent",
     "needs root"),
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
    base = name.split("[", 1)[0]  # every parametrization of an allowed test, or the one the entry names
    return any(module == m and n in (base, name) and piece in reason for m, n, piece in ALLOWED)


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
