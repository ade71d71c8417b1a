"""Outputs that do not fit the outbox travel as one flat file the judge parses without trusting it.

The candidate's process writes a judged output that the outbox cannot hold (`WB_OUTBOX=off`, an output
that is not one dense tensor per slot) as a JSON header and raw bytes, never a pickle or a zip: the root
judge reads it through `safeio` with a bound from the reference's own outputs, and `parse` checks every
field (magic, header size, dtype from an allow-list, shape against byte count, offsets inside the data)
before it makes a tensor by copying bytes. Nothing is decompressed, no code runs, and anything malformed
is `OutputFileError`: the candidate's failure.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

MAGIC = b"WBOUT1\n"
MAX_HEADER = 1 << 20
MAX_ITEMS = 4096
# dtypes an output may have (names as `str(torch.float32).removeprefix("torch.")` writes them)
_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool,
    torch.float8_e4m3fn, torch.float8_e5m2)}


class OutputFileError(ValueError):
    """The file is not an output file the judge reads: the candidate's failure."""


def write(path: Path, outs: list[Any]) -> None:
    """`outs` (flattened outputs: tensors and JSON scalars) as a flat file (the candidate's side)."""
    header: list[dict[str, Any]] = []
    blobs: list[torch.Tensor] = []
    offset = 0
    for x in outs:
        if isinstance(x, torch.Tensor):
            t = x.detach().to("cpu").contiguous()
            name = str(t.dtype).removeprefix("torch.")
            if name not in _DTYPES:
                header.append({"value": f"<tensor of dtype {name}>"})
                continue
            n = t.numel() * t.element_size()
            header.append({"dtype": name, "shape": list(t.shape), "offset": offset, "nbytes": n})
            blobs.append(t)
            offset += n
        elif x is None or isinstance(x, (bool, int, float, str)):
            header.append({"value": x})
        else:
            header.append({"value": f"<{type(x).__name__}>"})
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(MAGIC + len(head).to_bytes(8, "little") + head)
        for t in blobs:
            if t.numel():
                f.write(memoryview(t.view(-1).view(torch.uint8).numpy()))


def parse(data: bytes) -> list[Any]:
    """The outputs in `data` (read bounded by the caller), or `OutputFileError`."""
    try:
        return _parse(data)
    except OutputFileError:
        raise
    except (ValueError, TypeError, KeyError, OverflowError, RecursionError, MemoryError, RuntimeError) as exc:
        raise OutputFileError(f"malformed output file ({type(exc).__name__})") from exc


def _parse(data: bytes) -> list[Any]:
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 8:
        raise OutputFileError("not an output file")
    n = int.from_bytes(data[len(MAGIC):len(MAGIC) + 8], "little")
    start = len(MAGIC) + 8 + n
    if n > MAX_HEADER or start > len(data):
        raise OutputFileError("header size out of bounds")
    header = json.loads(data[len(MAGIC) + 8:start])
    if type(header) is not list or len(header) > MAX_ITEMS:
        raise OutputFileError("header is not a bounded list")
    payload = memoryview(data)[start:]
    outs: list[Any] = []
    for d in header:
        if type(d) is not dict:
            raise OutputFileError("header entry is not an object")
        if set(d) == {"value"}:
            v = d["value"]
            if not (v is None or type(v) in (bool, int, float, str)):
                raise OutputFileError("a value that is not a JSON scalar")
            outs.append(v)
            continue
        if set(d) != {"dtype", "shape", "offset", "nbytes"}:
            raise OutputFileError("header entry with unknown fields")
        dtype = _DTYPES.get(d["dtype"]) if type(d["dtype"]) is str else None
        shape, offset, nbytes = d["shape"], d["offset"], d["nbytes"]
        if dtype is None:
            raise OutputFileError("unknown dtype")
        if type(shape) is not list or len(shape) > 16 or any(type(s) is not int or s < 0 for s in shape):
            raise OutputFileError("bad shape")
        if type(offset) is not int or type(nbytes) is not int or offset < 0 or nbytes < 0:
            raise OutputFileError("bad offsets")
        itemsize = torch.empty((), dtype=dtype).element_size()
        if math.prod(shape) * itemsize != nbytes or offset + nbytes > len(payload):
            raise OutputFileError("shape, size and data disagree")
        raw = bytearray(payload[offset:offset + nbytes])  # a copy: the tensor owns its bytes
        t = torch.frombuffer(raw, dtype=dtype) if nbytes else torch.empty(0, dtype=dtype)
        outs.append(t.reshape(shape))
    return outs


__all__ = ["OutputFileError", "parse", "write"]
