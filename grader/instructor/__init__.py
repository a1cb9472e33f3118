"""The instructor's commands: batch, Gradescope, nbgrader, doctor."""
