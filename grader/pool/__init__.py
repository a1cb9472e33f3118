"""The zygote that forks workers (and a batch's grading processes), and the grader's handle on a worker."""
