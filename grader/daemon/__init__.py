"""The warm background grader ("daemon") of a learner's kata: `check`, `list` and `grade` without a secret
answer in a fraction of a torch import.

A trusted process of the learner's own user (like the `attn-kata` that starts it): it keeps its zygote (torch,
imported once) and a grading process forked from it (the reference's results, computed once) warm, never importing
torch itself on Linux (grader.grading.forked.keep_resident), and runs the very same CLI command a client sends, on
the client's own
stdin/stdout/stderr and working directory (passed as file descriptors), so output and exit code are those of
grading in-process. Its workers come from its zygote and are confined exactly as always (docs/design.md §3, §10).

- paths:       where the socket lives (a 0700 folder of this user's; the socket 0600)
- fingerprint: the grader's code, the kata's solutions and the settings a warm process fixes at start
- protocol:    one JSON line each way, with file descriptors (SCM_RIGHTS)
- client:      light (no torch, no rich): connect, or start a daemon, and hand it the command
- server:      the daemon itself: one at a time, the lock, the socket, idle and out-of-date stops
- command:     one client's command, run on its stdio, working directory and environment, then put back
- commands:    `attn-kata daemon start|status|stop`

The daemon's process starts at its own entry point, grader.daemon_main, which hands the server the CLI to serve:
nothing here imports grader.cli (the CLI imports the client and the commands; the layers contract in pyproject.toml
keeps it one way).
"""
