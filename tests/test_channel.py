"""The worker→grader channel: what the worker writes round-trips; anything malformed is refused."""

from __future__ import annotations

import json
import struct

import pytest
import torch

from grader.sandbox import channel


def test_round_trip_keeps_dtype_shape_values_and_doc() -> None:
    tensors = {"f32": torch.randn(3, 4), "t": torch.randn(2, 3).t(), "b": torch.tensor([True, False]),
               "i": torch.arange(5), "scalar": torch.tensor(3.5), "empty": torch.zeros(0, 3),
               "bf16": torch.randn(4, dtype=torch.bfloat16), "f64": torch.randn(2, dtype=torch.float64)}
    out, doc = channel.decode(channel.encode(tensors, {"cases": {"a": [1, 2]}}))
    assert doc == {"cases": {"a": [1, 2]}}
    assert set(out) == set(tensors)
    for k, v in tensors.items():
        assert type(out[k]) is torch.Tensor
        assert out[k].dtype == v.dtype
        assert out[k].shape == v.shape
        assert torch.equal(out[k], v), k


def test_a_tensor_subclass_crosses_as_a_plain_tensor() -> None:
    class Liar(torch.Tensor):
        def __eq__(self, other: object) -> bool:  # type: ignore[override]
            return True

    out, _ = channel.decode(channel.encode({"x": torch.zeros(3).as_subclass(Liar)}, {}))
    assert type(out["x"]) is torch.Tensor
    assert not torch.equal(out["x"], torch.ones(3))


def _forged(header: dict, body: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + body


@pytest.mark.parametrize("data", [
    b"", b"short", struct.pack("<Q", 10**12) + b"{}", b"\xff" * 64,
    _forged({"__metadata__": {"kata": "not json"}}),
    _forged({"__metadata__": {"other": "{}"}}),
    _forged({"__metadata__": {"kata": "{}"}, "x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8),
    _forged({"__metadata__": {"kata": "{}"}, "x": {"dtype": "EVIL", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4),
])
def test_malformed_messages_are_refused(data: bytes) -> None:
    with pytest.raises(channel.ChannelError):
        channel.decode(data)


def test_size_cap() -> None:
    big = channel.encode({"x": torch.zeros(1000)}, {})
    with pytest.raises(channel.ChannelError, match="cap"):
        channel.decode(big, max_bytes=100)
