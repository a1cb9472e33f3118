"""The data-only channel between the grader and a worker: safetensors bytes, never pickles.

A message is a dict of plain tensors plus a small JSON document carried in the safetensors
metadata. The decoder trusts nothing: it caps the size, checks the header by hand, rebuilds
every tensor as an exact `torch.Tensor`, and returns the JSON only as plain containers.
"""

from __future__ import annotations

import json
import re
import struct
from typing import Any

import torch
from safetensors.torch import load as _st_load
from safetensors.torch import save as _st_save

from grader import limits
from grader.sandbox.framing import MAX_MESSAGE_BYTES, ChannelError, recv_msg, send_msg  # noqa: F401 - this module's API too

MAX_TENSORS = limits.CHANNEL_TENSORS
META_KEY = "kata"
MAX_JSON_DEPTH = limits.CHANNEL_JSON_DEPTH  # nesting of the header and of the document
MAX_JSON_NODES = limits.CHANNEL_JSON_NODES  # values in the document (containers, keys, scalars)
MAX_STRING = limits.CHANNEL_STRING_CHARS  # characters in one string
# a JSON string (quotes, escapes and all): blanked before brackets are counted. One left open runs to the end of the
# text (a backslash there included): a pattern that needs the closing quote fails at every quote after an open one,
# each failure scanning to the end, so `"` + `\\"` * n cost quadratic time (128 kB: 52 s of a trusted process, red
# team 15); json.loads refuses an open string anyway, and never reads the brackets after it
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_SQUARE = bytes.maketrans(b"{}", b"[]")


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


def json_depth(text: bytes | str, limit: int = MAX_JSON_DEPTH) -> int:
    """The bracket nesting of a JSON text, counted without parsing it (so without recursion): strings
    blanked, every bracket made square, innermost pairs removed once per level. Returns limit + 1 as soon
    as the nesting exceeds `limit`; unbalanced brackets count as deep (json.loads would refuse them)."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    brackets = _JSON_STRING.sub(b"", raw).translate(_SQUARE, _NOT_BRACKET)
    depth = 0
    while brackets:
        if depth == limit:
            return limit + 1
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):
            return limit + 1  # no innermost pair left: unbalanced
        brackets, depth = shorter, depth + 1
    return depth


def _loads(text: bytes | str, what: str) -> Any:
    """json.loads of a worker's text, its nesting bounded first; every failure a ChannelError."""
    if json_depth(text) > MAX_JSON_DEPTH:
        raise ChannelError(f"{what} nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError, MemoryError) as exc:
        raise ChannelError(f"unreadable {what}: {type(exc).__name__}") from None


def _check_sizes(doc: Any) -> None:
    """At most MAX_JSON_NODES values and strings of at most MAX_STRING characters (walked without
    recursion; the depth is already bounded)."""
    stack, seen = [doc], 0
    while stack:
        v = stack.pop()
        seen += 1
        if seen > MAX_JSON_NODES:
            raise ChannelError(f"result document has more than {MAX_JSON_NODES} values")
        if isinstance(v, str):
            if len(v) > MAX_STRING:
                raise ChannelError(f"a string of {len(v)} characters in the result document")
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


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
    header = _loads(bytes(data[8 : 8 + header_len]), "result header")
    try:
        meta = header.get("__metadata__", {})[META_KEY]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ChannelError(f"unreadable result header: {type(exc).__name__}") from None
    if not isinstance(meta, str):
        raise ChannelError("unreadable result header: the document is not a string")
    doc = _loads(meta, "result document")
    if len(meta) > min(MAX_JSON_NODES, MAX_STRING):  # a JSON text of n characters holds at most n values, none
        _check_sizes(doc)  # longer than n characters: an honest document (a few kB) needs no walk
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


def decode_request(data: bytes) -> tuple[dict[str, torch.Tensor], Any]:
    """A message from the grader, read in a worker: the grader is trusted, so none of `decode`'s defences (the
    nesting count, the size walk, the header checks) are needed there, and each would cost every step's
    request. Never used on anything a worker sent."""
    (header_len,) = struct.unpack("<Q", data[:8])
    doc = json.loads(json.loads(bytes(data[8:8 + header_len]))["__metadata__"][META_KEY])
    return dict(_st_load(bytes(data))), doc
