"""attention-kata: the grader for the attention chapter of *Build a Large Language Model (From Scratch)*."""
