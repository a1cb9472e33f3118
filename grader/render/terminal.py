"""Text a student controls (file names, messages, their prints), made safe for a terminal: control characters
and escape sequences shown as visible escapes, never interpreted; rich markup never parsed (use `text`)."""

from __future__ import annotations

import unicodedata

from rich.text import Text

# bidirectional overrides and isolates can reorder what a terminal shows (a Trojan Source trick)
BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")


def plain(value: object, *, newlines: bool = False) -> str:
    """`value` as text with every control character (ESC, CR, BEL, …) and bidi override written as an escape
    such as `\\x1b`; newlines and tabs are kept when `newlines`."""
    out = []
    for ch in str(value):
        if newlines and ch in "\n\t":
            out.append(ch)
        elif ch in BIDI or unicodedata.category(ch) in ("Cc", "Cs") or ch in "\u2028\u2029":
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    return "".join(out)


def text(value: object, style: str = "", *, newlines: bool = False) -> Text:
    """A rich Text (never parsed as markup) of `plain(value)`."""
    return Text(plain(value, newlines=newlines), style=style)


# a line may not start with these (closing punctuation), nor end with these (opening): kept with their neighbour
NO_BREAK_BEFORE = set("，。、：；！？）》」』】〕〉”’,.:;!?)]}…·%")
NO_BREAK_AFTER = set("（《「『【〔〈“‘([{")


def _wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


def _units(line: str) -> list[tuple[int, int]]:
    """(start, end) of the pieces a line may be broken between: a run of spaces, a word of narrow characters, or
    one wide (CJK) character, which may be broken before or after as Chinese is; punctuation stays with its
    neighbour (no line starts with '，' or ends with '（')."""
    units: list[tuple[int, int]] = []
    i = 0
    while i < len(line):
        j = i + 1
        if line[i] == " ":
            while j < len(line) and line[j] == " ":
                j += 1
        elif not _wide(line[i]):
            while j < len(line) and line[j] != " " and not _wide(line[j]):
                j += 1
        units.append((i, j))
        i = j
    merged: list[tuple[int, int]] = []
    for start, end in units:
        glue = merged and line[start] != " " and line[merged[-1][1] - 1] != " " and (
            line[start] in NO_BREAK_BEFORE or line[merged[-1][1] - 1] in NO_BREAK_AFTER)
        if glue:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def break_points(line: str, width: int, hang: int = 0) -> list[int]:
    """Offsets where `line` breaks so that each piece fits `width` terminal cells (wide characters count two),
    continuation lines starting `hang` cells in; a piece wider than a whole line is cut by cells (never dropped)."""
    from rich.cells import cell_len

    breaks: list[int] = []
    col = 0
    room = max(width - hang, 1)
    for start, end in _units(line):
        piece = line[start:end]
        if piece.startswith(" "):
            col += len(piece)
            continue
        w = cell_len(piece)
        if col + w <= width:
            col += w
            continue
        if w <= room:  # on the next line
            breaks.append(start)
            col = hang + w
            continue
        for k in range(start, end):  # wider than a whole line: cut by cells, from where this line is
            cw = cell_len(line[k])
            if col + cw > width:
                breaks.append(k)
                col = hang
            col += cw
    return [b for b in breaks if 0 < b < len(line)]


def fit(value: Text, width: int) -> Text:
    """`value` wrapped to `width` cells by display width, CJK included (rich breaks only at spaces and cuts an
    unbroken Chinese sentence with '…'): every line of it kept whole, continuation lines indented under the text
    (past a leading '✗ ', '○ ', '! ' or '⚑ ' mark)."""
    out = Text(style=value.style, end=value.end)
    lines = value.split("\n", allow_blank=True)
    for n, line in enumerate(lines):
        raw = line.plain
        lead = len(raw) - len(raw.lstrip(" "))
        hang = lead + (2 if raw[lead:lead + 2] in ("✗ ", "○ ", "! ", "⚑ ") else 0)
        hang = hang if hang < width // 2 else 0
        pieces = line.divide(break_points(raw, width, hang))
        for k, piece in enumerate(pieces):
            piece.rstrip()
            if k:
                out.append("\n" + " " * hang)
                start = len(piece.plain) - len(piece.plain.lstrip(" "))
                piece = piece[start:]
            out.append_text(piece)
        if n + 1 < len(lines):
            out.append("\n")
    return out


def widest_word(value: str) -> int:
    """The cells the widest piece of `value` that `fit` never breaks takes: a word, or a wide character with the
    punctuation kept beside it."""
    from rich.cells import cell_len

    return max([0, *(cell_len(line[a:b]) for line in value.split("\n") for a, b in _units(line)
                     if not line[a:b].startswith(" "))])


def widest_line(value: str) -> int:
    from rich.cells import cell_len

    return max([0, *(cell_len(line) for line in value.split("\n"))])


def column_widths(columns: list[list[str]], room: int, whole: tuple[int, ...] = ()) -> list[int] | None:
    """Widths for a table's columns (each given as its cells' plain text, the header among them) within `room`
    cells in all: each as wide as its widest line where they all fit, else the widest columns narrowed first, one
    cell at a time, never below the widest word of any of its cells (so `fit` breaks no name mid-word) nor, for the
    columns in `whole`, below their widest line. None where even that does not fit."""
    low = [widest_line(c) if i in whole else widest_word(c) for i, cells in enumerate(columns) for c in
           ["\n".join(cells)]]
    widths = [widest_line("\n".join(cells)) for cells in columns]
    excess = sum(widths) - room
    while excess > 0:
        narrowable = [i for i, w in enumerate(widths) if w > low[i]]
        if not narrowable:
            return None
        widest = max(narrowable, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths
