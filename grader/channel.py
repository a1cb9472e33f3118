"""The data-only channel between the grader and a worker: safetensors bytes, never pickles.

A message is a dict of plain tensors plus a small JSON document carried in the safetensors
metadata. The decoder trusts nothing: it caps the size, checks the header by hand, rebuilds
every tensor as an exact `torch.Tensor`, and returns the JSON only as plain containers.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import torch
from safetensors.torch import load as _st_load
from safetensors.torch import save as _st_save

from .framing import MAX_MESSAGE_BYTES, ChannelError, recv_msg, send_msg  # noqa: F401 - this module's API too

MAX_TENSORS = 4096
META_KEY = "kata"


_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
           torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
           torch.bool: "BOOL"}


def encode(tensors: dict[str, torch.Tensor], doc: Any) -> bytes:
    """The safetensors format written directly (the library's save goes through numpy, ~10× slower
    for many small tensors); `decode` reads it back with the library itself."""
    meta = json.dumps(doc, allow_nan=False)
    header: dict[str, Any] = {"__metadata__": {META_KEY: meta}}
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach()
        if t.dtype not in _DTYPES:
            return _st_save({k: v.detach().to("cpu").clone().contiguous() for k, v in tensors.items()},
                            metadata={META_KEY: meta})
        raw = t.to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # the format aligns the data to 8 bytes
    return struct.pack("<Q", len(head)) + head + b"".join(chunks)


def decode(data: bytes, *, max_bytes: int = MAX_MESSAGE_BYTES) -> tuple[dict[str, torch.Tensor], Any]:
    if not isinstance(data, (bytes, bytearray)):
        raise ChannelError("not bytes")
    if len(data) > max_bytes:
        raise ChannelError(f"result of {len(data)} bytes exceeds the {max_bytes}-byte cap")
    if len(data) < 8:
        raise ChannelError("truncated result")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > len(data) - 8 or header_len > 16 * 1024 * 1024:
        raise ChannelError("bad result header")
    try:
        header = json.loads(bytes(data[8 : 8 + header_len]))
        doc = json.loads(header.get("__metadata__", {})[META_KEY])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ChannelError(f"unreadable result header: {type(exc).__name__}") from None
    if len(header) > MAX_TENSORS + 1:
        raise ChannelError("too many tensors in result")
    try:
        raw = _st_load(bytes(data))
    except Exception as exc:  # safetensors raises its own error types
        raise ChannelError(f"unreadable tensors: {exc}") from None
    # exact torch.Tensor, owning its memory (safetensors copies each tensor's bytes out of `data`): no
    # subclass can ride along
    tensors = {str(k): v if type(v) is torch.Tensor else torch.Tensor(v.clone()) for k, v in raw.items()}
    return tensors, doc
