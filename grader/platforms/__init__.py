"""Where courses and learners already are: Gradescope, PrairieLearn, GitHub Classroom, nbgrader, pytest and IDE
test explorers.

A platform is one module (nbgrader, larger, one subpackage): its format (the results.json or gradebook entries the
platform reads), its build (the zip, the question folder, the workflow, the source notebook), its run (grading one
upload inside the platform) and its Click group, which grader.cli adds. What Gradescope's and PrairieLearn's
containers share is grader.platforms.container. Each adapts the one grader (grader.grading, run in the sandboxed
worker) to a platform; none of them judges anything itself.
"""
