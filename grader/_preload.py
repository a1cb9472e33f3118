"""Imported once in the zygote: torch, the worker code and the reference, before any learner code."""

import torch  # noqa: F401

from . import reference, worker  # noqa: F401

reference.namespace()
