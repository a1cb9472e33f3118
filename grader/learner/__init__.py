"""The learner's commands: check, watch, hints, the notebook's check()."""
