"""Pairs of submissions unusually alike: winnowing fingerprints (Schleimer, Wilkerson, Aiken 2003, the method of
MOSS and copydetect) over normalised tokens, the course's own code subtracted as boilerplate.

Each submission is tokenised (one regular expression, as Python's tokenizer splits code); comments, blank lines
and layout go, every string becomes one token, and every identifier one placeholder (a renamed variable changes
nothing), attribute names after a dot excepted where the object is not `self` (`torch.softmax` stays, `self.W_query`
is a placeholder). Hashes of every
K tokens are winnowed (the smallest of each W in a row): a set of fingerprints, so reordering the functions changes
nothing either. The fingerprints of the book's code (solutions/), the stubs (exercises/) and any other boilerplate
are removed, and so are those that many classmates share (code the whole class typed from the book); what is left
is each student's own. Two students whose own fingerprints overlap much are a pair, with the lines that carry the
shared fingerprints (the side-by-side view). A lead for a person: nothing here touches a score.

Why not copydetect itself: it installs (0.5.0) but pulls in matplotlib and pillow for its own HTML, compares file
pairs read from disk one by one, and has no notion of "code most of the class shares"; the same winnowing over the
same kind of normalised tokens is a few dozen lines here, indexes fingerprints once (only pairs that share one are
ever compared) and runs in the trusted instructor process on text it already holds.
"""

from __future__ import annotations

import keyword
import re
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

K = 10  # tokens per k-gram: long enough that a shared k-gram is rarely chance
W = 6  # winnowing window: any match of W + K - 1 tokens shares at least one fingerprint
MIN_OWN = 12  # a submission with fewer fingerprints of its own (after boilerplate) is never in a pair
MIN_SHARED = 10  # nor a pair that shares fewer
THRESHOLD = 0.5  # share of the smaller side's own fingerprints that the other side has too
COMMON_SHARE = 0.2  # a fingerprint in more than this share of the class (and at least 4) is the class's, not a pair's

# one pass of one regular expression (Python's tokenize module is ~5x slower, and a student's file that does not
# tokenise to its end would lose its tail): strings, comments, names, numbers, operators, line breaks
_TOKEN = re.compile(r"""(?P<s>[rRbBuUfF]{0,2}(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''"""
                    r"""|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))"""
                    r"|(?P<c>#[^\n]*)|(?P<n>[^\W\d]\w*)|(?P<d>\d[\w.]*)"
                    r"|(?P<o>\*\*=?|//=?|->|:=|<<=?|>>=?|[-+*/%@&|^<>=!]=|[^\s\w])|(?P<nl>\n)")
_MOD = (1 << 61) - 1
_BASE = 1_000_003


def tokens(source: str) -> list[tuple[str, int]]:
    """(normalised token, line) for each token of `source`: comments and layout dropped, each string "S", each
    identifier "V" but a keyword, or an attribute named after a dot on anything but `self`."""
    out: list[tuple[str, int]] = []
    line, prev, before = 1, "", ""
    for m in _TOKEN.finditer(source):
        kind, text = m.lastgroup, m.group()
        if kind == "nl":
            line += 1
            continue
        if kind == "c":
            continue
        if kind == "s":
            out.append(("S", line))
            line += text.count("\n")
            prev = before = ""
            continue
        shown = text
        if kind == "n" and not keyword.iskeyword(text):
            shown = text if prev == "." and before != "self" else "V"
        before, prev = prev, text
        out.append((shown, line))
    return out


def fingerprints(source: str) -> dict[int, list[int]]:
    """Winnowed fingerprints of `source`: hash -> the lines of the k-grams it came from (each k-gram spans K
    tokens: the lines from its first token's to its last's). A rolling hash over each token's CRC-32: the same
    source gives the same fingerprints in every process (Python's own hash() is salted per process)."""
    toks = tokens(source)
    if len(toks) < K:
        return {}
    ids = [zlib.crc32(t.encode()) for t, _ in toks]
    top = pow(_BASE, K - 1, _MOD)
    h = 0
    for v in ids[:K]:
        h = (h * _BASE + v) % _MOD
    hashes = [h]
    for i in range(K, len(ids)):
        h = ((h - ids[i - K] * top) * _BASE + ids[i]) % _MOD
        hashes.append(h)
    out: dict[int, list[int]] = {}
    last = -1
    for start in range(max(1, len(hashes) - W + 1)):
        window = hashes[start:start + W]
        low = min(window)
        at = start + len(window) - 1 - window[::-1].index(low)  # the rightmost minimum (the paper's rule)
        if at != last:
            last = at
            out.setdefault(hashes[at], []).extend(range(toks[at][1], toks[min(at + K, len(toks)) - 1][1] + 1))
    return out


@dataclass
class Pair:
    a: str
    b: str
    similarity: float  # shared own fingerprints / the smaller side's own fingerprints
    shared: int  # own fingerprints the two share
    lines_a: list[int] = field(default_factory=list)  # lines of a that carry a shared fingerprint
    lines_b: list[int] = field(default_factory=list)


def boilerplate(sources: Iterable[str]) -> set[int]:
    """The fingerprints of the course's own code (the book's, the stubs, the reference)."""
    out: set[int] = set()
    for s in sources:
        out |= fingerprints(s).keys()
    return out


def pairs(sources: Mapping[str, str], common: set[int] = frozenset(),  # type: ignore[assignment]
          threshold: float = THRESHOLD) -> list[Pair]:
    """The pairs whose own fingerprints overlap by at least `threshold`, most alike first (ties by name)."""
    prints = {name: fingerprints(src) for name, src in sources.items()}
    holders: dict[int, list[str]] = defaultdict(list)
    for name, fp in prints.items():
        for h in fp.keys() - common:
            holders[h].append(name)
    crowd = max(4, int(COMMON_SHARE * len(prints)))
    own = {name: {h for h in fp if h not in common and len(holders[h]) <= crowd} for name, fp in prints.items()}
    shared: dict[tuple[str, str], int] = defaultdict(int)
    for names in holders.values():
        if 2 <= len(names) <= crowd:
            names = sorted(names)
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    shared[a, b] += 1
    out = []
    for (a, b), n in shared.items():
        smaller = min(len(own[a]), len(own[b]))
        if smaller < MIN_OWN or n < MIN_SHARED or n / smaller < threshold:
            continue
        both = own[a] & own[b]
        out.append(Pair(a, b, round(n / smaller, 4), n,
                        sorted({ln for h in both for ln in prints[a][h]}),
                        sorted({ln for h in both for ln in prints[b][h]})))
    out.sort(key=lambda p: (-p.similarity, -p.shared, p.a, p.b))
    return out
