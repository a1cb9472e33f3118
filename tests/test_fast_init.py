"""Step 14's GPT-2-size builds without fresh-memory churn (issue 28): a 768 x 768 weight drawn under fast_uniform()
is a view of the table scaled to nn.Linear's bound (grader/worker/fast_init.py) and a stand-in's causal mask a view
of one table per size (grader/worker/standins.py), with the very values the copies had."""

from __future__ import annotations

import torch
import torch.nn as nn

from grader.worker import fast_init
from grader.worker.standins import STANDINS


def _build(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    with fast_init.fast_uniform():
        return STANDINS["MultiHeadAttention"](768, 768, 1024, 0.0, 12)


def test_a_gpt2_size_weight_is_a_view_of_the_scaled_table_with_the_copied_values() -> None:
    fast_init.signed()
    table = fast_init.SCALED[fast_init.GPT2_BOUND]
    viewed = _build(7)
    saved = dict(fast_init.SCALED)
    fast_init.SCALED.clear()  # no scaled table: uniform_ copies the window, as before views
    try:
        copied = _build(7)
    finally:
        fast_init.SCALED.update(saved)
    for (name, p), (_name, q) in zip(viewed.named_parameters(), copied.named_parameters(), strict=True):
        assert torch.equal(p, q), name  # bit for bit
        assert isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf
        shares = p.untyped_storage().data_ptr() == table.untyped_storage().data_ptr()
        assert shares is (p.numel() >= fast_init.VIEW_MIN), name  # the weights; the 768 biases are copied
    x = torch.randn(1, 5, 768)
    assert torch.equal(viewed(x), copied(x))


def test_another_bound_or_seed_still_draws_other_values() -> None:
    fast_init.signed()
    a, b = _build(1), _build(2)
    assert not torch.equal(a.W_query.weight, b.W_query.weight)
    torch.manual_seed(1)
    with fast_init.fast_uniform():
        wide = nn.Linear(1024, 768)  # another fan-in, another bound: copied, not a view of this table
    assert wide.weight.untyped_storage().data_ptr() != fast_init.SCALED[fast_init.GPT2_BOUND].untyped_storage(
    ).data_ptr()
    assert float(wide.weight.detach().abs().max()) <= 1024 ** -0.5


def test_stand_in_masks_are_views_of_one_table_each_listed_apart() -> None:
    one, two = _build(3), _build(4)
    assert one.mask is not two.mask and one.mask.dtype == torch.bool
    assert one.mask.untyped_storage().data_ptr() == two.mask.untyped_storage().data_ptr()  # no fresh memory
    assert torch.equal(one.mask, torch.ones(1024, 1024, dtype=torch.bool).triu(1))
    wrapper = STANDINS["MultiHeadAttentionWrapper"](4, 2, 6, 0.0, 3)  # heads of one size share a table
    assert [n for n, _b in wrapper.named_buffers()] == ["heads.0.mask", "heads.1.mask", "heads.2.mask"]


def test_asymmetric_bounds_copy_a_window_of_the_unit_table_made_when_first_asked() -> None:
    """The [0, 1) table is not made in the zygote (4 MB less in every process); asymmetric bounds make it where
    they are first met, the same values in every process (seed 0, a generator of its own)."""
    torch.manual_seed(5)
    start = int(torch.randint(fast_init.POOL_SIZE - 12 + 1, ()))
    torch.manual_seed(5)
    with fast_init.fast_uniform():
        got = torch.empty(3, 4).uniform_(0.5, 2.0)
    unit = torch.rand(fast_init.POOL_SIZE, generator=torch.Generator().manual_seed(0))
    assert torch.equal(got, unit[start:start + 12].view(3, 4) * 1.5 + 0.5)
    assert fast_init.pool() is fast_init.pool() and torch.equal(fast_init.pool(), unit)
