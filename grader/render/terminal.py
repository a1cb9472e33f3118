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
