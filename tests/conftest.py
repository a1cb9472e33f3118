"""The suite grades in-process, as it always has: the warm background grader (grader/daemon) is off for every
test by default, so no test leaves a daemon running for 10 minutes after the session, nor shares one with
another test or with the developer. tests/test_daemon.py turns it on for its own commands, each test with a
runtime folder (and so a daemon) of its own, stopped at the test's end."""

from __future__ import annotations

import os

os.environ["ATTN_KATA_NO_DAEMON"] = "1"  # inherited by every `attn-kata` a test runs with the default environment
