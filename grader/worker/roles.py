"""Match the grader's weights to a learner's module by role, not by name.

The grader sends weights named like the reference's parameters (`W_query.weight`, `heads.1.W_key.weight`,
`out_proj.bias`, v1's raw `W_query` of shape (d_in, d_out)). A faithful learner module may keep the same
maps otherwise: a raw nn.Parameter in either orientation, one combined q|k|v projection, per-head modules
inside a multi-head module, `in_proj_weight`/`out_proj` as nn.MultiheadAttention does, or other names.

Every 2-D tensor is seen in nn.Linear's orientation (out, in). For each role (query, key, value, out) and
part (weight, bias), the reference's tensors are stacked along `out` (heads in order) and so are the
learner's (heads in order, the q|k|v chunks of a combined projection), and rows are matched one to one.
The rules, in order:
  1. the same names and shapes as the reference: taken as they are;
  2. names that say the role (query/queries/q/W_q/Wq/to_q, key..., value..., out/proj/o; qkv or in_proj for a
     combined q|k|v projection), a number in the path for the head;
  3. where names are silent: a unique parameter of the right shape per remaining role.
Nothing here sees the reference: only the weights (the grader's inputs) and the learner's module.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn as nn

KINDS = ("q", "k", "v", "o")
_Q = {"q", "wq", "query", "queries", "qry", "toq", "qproj", "wquery"}
_K = {"k", "wk", "key", "keys", "tok", "kproj", "wkey"}
_V = {"v", "wv", "value", "values", "val", "vals", "tov", "vproj", "wvalue"}
_O = {"o", "wo", "out", "output", "proj", "projection", "outproj", "toout", "oproj", "wout"}
_QKV = {"qkv", "wqkv", "inproj", "toqkv", "qkvproj", "cattn"}
_TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


ROLE_ORDER = ("q", "k", "v", "o")  # the order the book defines its projections in


class NoMatch(Exception):
    """No unique mapping: `roles` are the grader's names left without a parameter of the learner's."""

    def __init__(self, roles: list[str], shape: tuple[str, tuple[int, ...], tuple[int, ...]] | None = None):
        super().__init__(roles)
        self.roles = roles
        self.shape = shape  # (learner name, its shape, the expected shape) when one named parameter has the wrong one


def tokens(name: str) -> list[str]:
    return [t.lower() for part in re.split(r"[._\-]", name) for t in _TOKEN.findall(part)]


def kinds_of(name: str) -> list[str] | None:
    """The roles a learner's parameter name says it plays: ["q"], ..., ["q", "k", "v"] (combined), or None."""
    toks = tokens(name)
    joined = {a + b for a, b in itertools.pairwise(toks)} | set(toks)
    if joined & _QKV or {"q", "k", "v"} <= set(toks):
        return ["q", "k", "v"]
    found = [k for k, words in (("q", _Q), ("k", _K), ("v", _V)) if joined & words or any(
        t.startswith(("quer", "valu")) and k == {"quer": "q", "valu": "v"}[t[:4]] for t in toks)]
    if len(found) == 1:
        return found
    if not found and joined & _O:
        return ["o"]
    return None


def _head(name: str) -> int | None:
    nums = [int(t) for t in re.split(r"[.]", name) if t.isdigit()]
    return nums[0] if nums else None


@dataclass
class Piece:
    """Rows `rows` of a reference tensor (in (out, in) orientation) are rows `prows` of a learner's parameter."""

    ref: str
    rows: slice
    pname: str
    param: nn.Parameter
    prows: slice
    transposed: bool  # the learner keeps (in, out)
    owner: str  # the type of the module that owns the parameter

    def view(self, t: torch.Tensor) -> torch.Tensor:
        return (t.t() if self.transposed and t.dim() == 2 else t)[self.prows]


def ref_linear(name: str, w: torch.Tensor) -> torch.Tensor:
    """A reference tensor in (out, in): `...weight` is nn.Linear's; v1's raw `W_query` is (d_in, d_out)."""
    return w if w.dim() != 2 or name.endswith("weight") else w.t()


def match(module: nn.Module, weights: Mapping[str, torch.Tensor]) -> list[Piece]:
    params = dict(module.named_parameters())
    owners = {n: module.get_submodule(n.rpartition(".")[0]) for n in params}

    def owner_type(n: str) -> str:
        return type(owners[n]).__name__

    def is_linear(n: str) -> bool:
        return isinstance(owners[n], nn.Linear) and n.rpartition(".")[2] in ("weight", "bias")

    # 1. the reference's own names and shapes
    if all(n in params and tuple(params[n].shape) == tuple(w.shape) for n, w in weights.items()):
        return [Piece(n, slice(None), n, params[n], slice(None), w.dim() == 2 and not n.endswith("weight"),
                      owner_type(n)) for n, w in weights.items()]

    # the reference's roles: (kind, part) -> [(name, rows, in_dim)], heads in order
    groups: dict[tuple[str, str], list[tuple[int, str, int, int]]] = {}
    for n, w in weights.items():
        its = kinds_of(n)
        assert its is not None and len(its) == 1, n  # the grader's own names always say their role
        lw = ref_linear(n, w)
        part = "bias" if w.dim() == 1 else "weight"
        groups.setdefault((its[0], part), []).append((_head(n) or 0, n, lw.shape[0],
                                                      lw.shape[1] if lw.dim() == 2 else 0))
    for rows_of_role in groups.values():
        rows_of_role.sort()
    in_dims = {k: rows[0][3] for (k, part), rows in groups.items() if part == "weight"}

    # orientation of raw 2-D parameters: by shape where it tells, else as the module's other raw ones
    def fits(n: str, p: torch.Tensor, in_dim: int) -> bool | None:
        """None: does not fit; else whether the learner keeps it transposed."""
        if is_linear(n):
            return False if p.shape[1] == in_dim else None
        a, b = p.shape[1] == in_dim, p.shape[0] == in_dim
        if a and not b:
            return False
        if b and not a:
            return True
        if a and b:
            return None if raw_t is None else raw_t
        return None

    named: dict[str, list[str]] = {}
    silent: list[str] = []
    for n, p in params.items():
        if p.dim() not in (1, 2):
            continue
        ks = kinds_of(n)
        if ks is None:
            silent.append(n)
        else:
            named[n] = ks
    votes = set()
    for n, ks in named.items():
        p = params[n]
        if p.dim() == 2 and not is_linear(n) and ks[0] in in_dims:
            a, b = p.shape[1] == in_dims[ks[0]], p.shape[0] == in_dims[ks[0]]
            if a != b:
                votes.add(b)
    raw_t: bool | None = votes.pop() if len(votes) == 1 else None
    if raw_t is None:
        raw_t = True  # x @ W, as the book's SelfAttention_v1

    pieces: list[Piece] = []
    unmatched: list[str] = []
    bad_shape = None
    def fit(kind: str, part: str, refs: list[tuple[int, str, int, int]], cands: list[str]) -> list[Piece] | None:
        """The learner's `cands` (heads in order, q|k|v chunks) row for row against the reference's `refs`."""
        nonlocal bad_shape
        total, in_dim = sum(r[2] for r in refs), refs[0][3]
        heads = [_head(n) for n in cands]
        if len(cands) > 1 and (None in heads or len(set(heads)) != len(heads)):
            return None
        cands = [n for _h, n in sorted(zip(heads, cands, strict=True), key=lambda t: t[0] or 0)]
        chunks: list[tuple[str, slice, bool]] = []
        for n in cands:
            p = params[n]
            t = fits(n, p, in_dim) if part == "weight" else False
            rows = (p.shape[1] if t else p.shape[0]) if p.dim() == 2 else p.shape[0]
            if t is None or rows % len(named[n]):
                chunks = []
                break
            size = rows // len(named[n])
            i = named[n].index(kind)
            chunks.append((n, slice(i * size, (i + 1) * size), t))
        if not chunks or sum(c[1].stop - c[1].start for c in chunks) != total:
            if len(cands) == 1 and len(refs) == 1:
                bad_shape = (cands[0], tuple(params[cands[0]].shape), tuple(weights[refs[0][1]].shape))
            return None
        return _pair(refs, chunks, params, owner_type)

    for (kind, part), refs in groups.items():
        cands = [n for n, ks in named.items() if kind in ks and (params[n].dim() == 1) == (part == "bias")]
        if not cands:
            unmatched.append(f"{kind}/{part}")
            continue
        ref_heads = [_head(r[1]) for r in refs]
        if len(refs) > 1 and None not in ref_heads and all(_head(n) is not None for n in cands):
            # one head of the reference's (the wrapper's heads.h) per head of the learner's
            for r, h in zip(refs, ref_heads, strict=True):
                got = fit(kind, part, [r], [n for n in cands if _head(n) == h])
                if got is None:
                    unmatched.append(r[1])
                else:
                    pieces += got
            continue
        got = fit(kind, part, refs, cands)
        if got is None:
            unmatched += [r[1] for r in refs]
        else:
            pieces += got

    # 3. silent names: a unique parameter of the right shape for each role still open
    open_groups = [g for g in unmatched if "/" in g]
    unmatched = [g for g in unmatched if "/" not in g]
    claims: dict[str, list[str]] = {}
    for g in open_groups:
        kind, part = g.split("/")
        refs = groups[(kind, part)]
        total = sum(r[2] for r in refs)
        claims[g] = [n for n in silent if (params[n].dim() == 1) == (part == "bias") and (
            (params[n].shape[0] == total) if part == "bias" else
            (fits(n, params[n], refs[0][3]) is not None
             and params[n].shape[1 if fits(n, params[n], refs[0][3]) else 0] == total))]
    used = [n for c in claims.values() for n in c]
    # silent names of one shape, exactly as many as the roles they could fill and claimed by no other: taken in
    # the order the module defines them, the book's (query, key, value; the output projection has its own
    # shape). Their values must still match the reference's under that order, so a guess earns nothing
    ties: dict[tuple[str, ...], list[str]] = {}
    for g, cands in claims.items():
        if len(cands) > 1:
            ties.setdefault(tuple(cands), []).append(g)
    for tied_cands, tied in ties.items():
        if len(tied) == len(tied_cands) and all(used.count(n) == len(tied) for n in tied_cands):
            tied.sort(key=lambda g: ROLE_ORDER.index(g.split("/")[0]) if g.split("/")[0] in ROLE_ORDER else 9)
            for g, n in zip(tied, tied_cands, strict=True):
                claims[g] = [n]
    used = [n for c in claims.values() for n in c]
    for g, cands in claims.items():
        kind, part = g.split("/")
        refs = groups[(kind, part)]
        if len(cands) != 1 or used.count(cands[0]) != 1:
            unmatched += [r[1] for r in refs]
            continue
        n = cands[0]
        t = fits(n, params[n], refs[0][3]) if part == "weight" else False
        pieces += _pair(refs, [(n, slice(0, sum(r[2] for r in refs)), bool(t))], params, owner_type)
    if unmatched:
        raise NoMatch(sorted(unmatched), bad_shape)
    return pieces


def _pair(refs: list[tuple[int, str, int, int]], chunks: list[tuple[str, slice, bool]],
          params: Mapping[str, nn.Parameter], owner_type) -> list[Piece]:
    """Walk the reference's rows and the learner's rows side by side."""
    out: list[Piece] = []
    ci, coff = 0, 0
    for _h, rname, rrows, _in in refs:
        roff = 0
        while roff < rrows:
            n, sl, t = chunks[ci]
            take = min(rrows - roff, sl.stop - sl.start - coff)
            out.append(Piece(rname, slice(roff, roff + take), n, params[n],
                             slice(sl.start + coff, sl.start + coff + take), t, owner_type(n)))
            roff += take
            coff += take
            if coff == sl.stop - sl.start:
                ci, coff = ci + 1, 0
    return out


def load(pieces: list[Piece], weights: Mapping[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for pc in pieces:
            pc.view(pc.param.data).copy_(ref_linear(pc.ref, weights[pc.ref])[pc.rows])


def grads(pieces: list[Piece], weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor | None]:
    """Each reference tensor's gradient, gathered from the learner's parameters (None where one has none)."""
    out: dict[str, torch.Tensor | None] = {}
    for name, w in weights.items():
        g = torch.zeros_like(ref_linear(name, w))
        missing = False
        for pc in pieces:
            if pc.ref != name:
                continue
            if pc.param.grad is None:
                missing = True
                break
            g[pc.rows] = pc.view(pc.param.grad).to(g.dtype)
        out[name] = None if missing else (g if w.dim() != 2 or name.endswith("weight") else g.t())
    return out
