"""Staged hints per step: (English, 中文), from a nudge to the shape-by-shape recipe."""

HINTS: dict[str, list[tuple[str, str]]] = {}
