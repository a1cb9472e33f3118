"""The grader's weights load by role (grader.worker.roles): each faithful parametrisation gets exactly the
reference's linear maps, gradients come back in the grader's names, and what cannot be matched says why."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn as nn

from grader.checks import structure
from grader.grading.engine import grade
from grader.i18n import translate
from grader.worker import probes, roles

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "buggy"

D_IN, D_OUT, HEADS = 3, 8, 2


def _weights(*, out_proj: bool = True, heads: int | None = None) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    names = [f"heads.{h}.W_{m}.weight" for h in range(heads) for m in ("query", "key", "value")] if heads else \
        [f"W_{m}.weight" for m in ("query", "key", "value")]
    w = {n: torch.randn(D_OUT, D_IN, generator=g) for n in names}
    if out_proj:
        w |= {"out_proj.weight": torch.randn(D_OUT, D_OUT, generator=g),
              "out_proj.bias": torch.randn(D_OUT, generator=g)}
    return w


def _maps(w: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The reference's maps stacked per role, in (out, in)."""
    return {k: torch.cat([w[n] for n in sorted(w) if f"W_{k}." in n]) for k in ("query", "key", "value")}


class Book(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.W_query, self.W_key, self.W_value = (nn.Linear(D_IN, D_OUT, bias=False) for _ in range(3))
        self.out_proj = nn.Linear(D_OUT, D_OUT)


class Einsum(nn.Module):  # raw (d_in, d_out) Parameters, another name for the output projection
    def __init__(self) -> None:
        super().__init__()
        self.Wq, self.Wk, self.Wv = (nn.Parameter(torch.empty(D_IN, D_OUT)) for _ in range(3))
        self.proj = nn.Linear(D_OUT, D_OUT)


class Combined(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(D_IN, 3 * D_OUT, bias=False)
        self.OutProj = nn.Linear(D_OUT, D_OUT)


class InProj(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.in_proj_weight = nn.Parameter(torch.empty(3 * D_OUT, D_IN))
        self.out_proj = nn.Linear(D_OUT, D_OUT)


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.queries, self.keys, self.values = (nn.Linear(D_IN, D_OUT // HEADS, bias=False) for _ in range(3))


class PerHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleList(Head() for _ in range(HEADS))
        self.out = nn.Linear(D_OUT, D_OUT)


def _learner_maps(m: nn.Module) -> dict[str, torch.Tensor]:
    """What the learner's module computes for query, key and value, as (out, in) matrices."""
    if isinstance(m, Book):
        return {k: getattr(m, f"W_{k}").weight for k in ("query", "key", "value")}
    if isinstance(m, Einsum):
        return {"query": m.Wq.T, "key": m.Wk.T, "value": m.Wv.T}
    if isinstance(m, Combined | InProj):
        w = m.qkv.weight if isinstance(m, Combined) else m.in_proj_weight
        return dict(zip(("query", "key", "value"), w.chunk(3), strict=True))
    assert isinstance(m, PerHead)
    return {k: torch.cat([getattr(h, f"{k}s" if k != "query" else "queries").weight for h in m.heads])
            for k in ("query", "key", "value")}


@pytest.mark.parametrize("cls", [Book, Einsum, Combined, InProj, PerHead])
def test_every_parametrisation_gets_the_references_maps(cls: type[nn.Module]) -> None:
    m, w = cls(), _weights()
    pieces = probes._load_weights(m, w)
    for k, want in _maps(w).items():
        assert torch.equal(_learner_maps(m)[k].detach(), want), (cls.__name__, k)
    out = [p for n, p in m.named_parameters() if n.split(".")[0] in ("out_proj", "proj", "OutProj", "out")]
    assert torch.equal(out[0].detach(), w["out_proj.weight"])
    # gradients in the grader's names: d(sum of a parameter's entries) is ones where it plays the role
    for p in m.parameters():
        p.grad = torch.ones_like(p)
    grads = roles.grads(pieces, w)
    assert set(grads) == set(w)
    assert all(g is not None and g.shape == w[n].shape and bool((g == 1).all()) for n, g in grads.items())


def test_a_batched_wrapper_takes_each_heads_rows() -> None:
    class Batched(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.query, self.key, self.value = (nn.Linear(D_IN, 2 * D_OUT, bias=False) for _ in range(3))

    m, w = Batched(), _weights(out_proj=False, heads=2)
    probes._load_weights(m, w)
    assert torch.equal(m.key.weight.detach(), torch.cat([w["heads.0.W_key.weight"], w["heads.1.W_key.weight"]]))


def test_silent_names_match_by_shape_then_by_the_order_they_are_defined() -> None:
    """Names that say nothing: a unique shape decides; as many same-shape layers as roles are taken in the
    book's order of definition (query, key, value); one more of that shape leaves the roles ambiguous."""
    class Silent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = (nn.Linear(D_IN, D_OUT, bias=False) for _ in range(3))

    m, w = Silent(), _weights(out_proj=False)
    probes._load_weights(m, w)
    for layer, ref in ((m.a, "W_query"), (m.b, "W_key"), (m.c, "W_value")):
        assert torch.equal(layer.weight.detach(), w[f"{ref}.weight"]), ref

    class OneTooMany(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c, self.e = (nn.Linear(D_IN, D_OUT, bias=False) for _ in range(4))

    with pytest.raises(probes.WrongType) as e:
        probes._load_weights(OneTooMany(), _weights(out_proj=False))
    assert e.value.msgid == probes.NO_ROLE
    assert "W_query.weight" in e.value.params["roles"] and "a.weight" in e.value.params["have"]

    class OneSilent(nn.Module):  # q, k, v named; the output projection the only (d_out, d_out) layer
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v = (nn.Linear(D_IN, D_OUT, bias=False) for _ in range(3))
            self.final = nn.Linear(D_OUT, D_OUT)

    m, w = OneSilent(), _weights()
    probes._load_weights(m, w)
    assert torch.equal(m.final.bias.detach(), w["out_proj.bias"])


def test_a_plain_list_of_heads_gets_its_one_cause() -> None:
    class Wrapper(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.heads = [Book() for _ in range(2)]

    with pytest.raises(probes.WrongType) as e:
        probes._load_weights(Wrapper(), _weights(out_proj=False, heads=2))
    assert e.value.msgid == probes.PLAIN_LIST and e.value.params["attr"] == "heads"
    assert e.value.msgid in probes.MESSAGES


@pytest.mark.parametrize(("name", "kinds"), [
    ("W_query.weight", ["q"]), ("queries.weight", ["q"]), ("to_q.weight", ["q"]), ("Wq", ["q"]),
    ("heads.1.keys.bias", ["k"]), ("W_v", ["v"]), ("values", ["v"]), ("qkv.weight", ["q", "k", "v"]),
    ("in_proj_weight", ["q", "k", "v"]), ("attn.out_proj.weight", ["o"]), ("OutProj.weight", ["o"]),
    ("proj.bias", ["o"]), ("c_proj.weight", ["o"]), ("layer.weight", None), ("a", None),
])
def test_names_say_their_role(name: str, kinds: list[str] | None) -> None:
    assert roles.kinds_of(name) == kinds


# ---------------------------------------------------------------- one cause, said once (graded end to end)

SILENT_MHA = '''
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):  # right, but a, b, c, e say nothing of query, key and value, and are four
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.a, self.b, self.c = (nn.Linear(d_in, d_out, bias=qkv_bias) for _ in range(3))
        self.d = nn.Linear(d_out, d_out)
        self.e = nn.Linear(d_in, d_out, bias=qkv_bias)  # a spare, after the book's four: its seeded example holds
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (m(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2) for m in (self.a, self.b, self.c))
        s = (q @ k.transpose(2, 3)).masked_fill(self.mask.bool()[:n, :n], -torch.inf)
        w = self.dropout(torch.softmax(s / self.head_dim ** 0.5, dim=-1))
        return self.d((w @ v).transpose(1, 2).contiguous().view(b, n, self.d_out))
'''


def _said_once(path: Path, step: str, cause: str, lang: str = "en") -> None:
    """Exactly one check of `step` says `cause`; every other check that fails points to it, in `lang`."""
    result = next(s for s in grade(path, steps=[step]).worded(lang).steps if s.id == step)
    failed = [c for c in result.checks if not c.passed]
    home = [c for c in failed if cause in c.message]
    assert len(home) == 1, [c.message for c in failed]
    pointer = translate(lang, structure.SKIPPED).format(check=home[0].name)
    assert all(c.message == pointer for c in failed if c is not home[0]), [c.message for c in failed]
    assert len(failed) >= 4 and result.score == 0


def test_parameters_that_match_no_role_are_named_once(tmp_path: Path) -> None:
    (tmp_path / "silent.py").write_text(SILENT_MHA, encoding="utf-8")
    _said_once(tmp_path / "silent.py", "multihead_attention", "no parameter of yours could be matched to")
    _said_once(tmp_path / "silent.py", "multihead_attention", "a.weight", lang="zh")


def test_a_plain_list_of_heads_is_said_once() -> None:
    _said_once(FIXTURES / "wrap_plain_list.py", "multihead_wrapper", "plain Python list")
