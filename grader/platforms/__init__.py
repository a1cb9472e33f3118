"""Where courses and learners already are: pytest and IDE test explorers, GitHub Classroom, PrairieLearn.

Each module adapts the one grader (grader.grading.engine, run in the sandboxed worker) to a platform's
format; none of them judges anything itself.
"""
