"""The inputs' way into the candidate process: sets the trusted reference makes in memory it owns and shares.

Where inputs are made where they are used (`WB_DEVICE_INPUTS`: on by default on the GPU), the reference
process makes every input set the candidate's process runs on (each trial's, each round's) from seeds the
server draws, with the spec's `get_inputs()`, in its own process, and copies it into its **shelf**: one
block of memory it allocates after the baseline and shares with the candidate as the outbox is shared (on
the GPU the virtual-memory API's descriptor, `devmem.Shared`; on the CPU a sealed `memfd`), passed by the
server over the Unix socket before the candidate process drops its privileges. The candidate maps it once
and reads each set as views of it at the offsets of the shape's `SetLayout`; it never loads the spec, never
runs `get_inputs()` and never learns a seed, so nothing it replaced in torch or in the spec's module sees
an input before the server shows it.

The shelf holds the timed shape's sets of one round (`rounds.RoundPlan.r_max`, or a device round's slots) or
one trial set of any shape, whichever is larger: the candidate holds no copy of its own (a GB input is on
the device once), and the reference frees the shelf before it judges (the judge makes its inputs again from
their seeds). A set is written only between the candidate's rounds and trials, by the server's order: a
trial's set when the candidate asks for it (`inputs` in `messages.py`, in its phase), a round's sets before
the server sends `stage`. Every trial of a shape lies at the same offsets (the last refilling the previous
one's buffers: a candidate that memoizes on pointers gets stale answers), and a device round's fresh sets
lie where the captured graph's were.
"""
from __future__ import annotations

import fcntl
import math
import mmap
import os
from dataclasses import dataclass
from typing import Any

import torch

from workbench.harness import bound

ALIGN = 512          # each tensor's offset in a set, and a set's stride (the CUDA caching allocator's alignment)
MAX_ENTRIES = 256    # inputs of one set

_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128, torch.int8,
    torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2,
    torch.uint16, torch.uint32, torch.uint64)}
_SCALARS = (bool, int, float, str, type(None))

Entry = tuple  # ("t", dtype name, shape, offset) or ("v", a JSON scalar)


@dataclass(frozen=True)
class SetLayout:
    """One input set's layout: each input a tensor (dtype, shape, offset in the set) or a scalar value;
    `stride` bytes between consecutive sets."""

    entries: tuple[Entry, ...]
    stride: int

    def to_dict(self) -> dict[str, Any]:
        return {"entries": [list(e[:2]) + [list(e[2]), e[3]] if e[0] == "t" else list(e) for e in self.entries],
                "stride": self.stride}

    @classmethod
    def from_dict(cls, d: Any) -> SetLayout:
        """A layout as the server sent it, every field checked (the candidate's process decodes it before any
        candidate code exists); a `ValueError` otherwise."""
        if type(d) is not dict or set(d) != {"entries", "stride"} or type(d["entries"]) is not list \
                or len(d["entries"]) > MAX_ENTRIES or type(d["stride"]) is not int or d["stride"] < ALIGN:
            raise ValueError("not an input layout")
        entries: list[Entry] = []
        for e in d["entries"]:
            if type(e) is list and len(e) == 2 and e[0] == "v" and type(e[1]) in _SCALARS:
                entries.append(("v", e[1]))
                continue
            if type(e) is not list or len(e) != 4 or e[0] != "t" or e[1] not in _DTYPES or type(e[2]) is not list \
                    or not all(type(s) is int and s >= 0 for s in e[2]) or type(e[3]) is not int or e[3] < 0 \
                    or e[3] % ALIGN:
                raise ValueError(f"not an input layout entry: {str(e)[:80]}")
            shape = tuple(e[2])
            if e[3] + math.prod(shape) * _DTYPES[e[1]].itemsize > d["stride"]:
                raise ValueError("an input past its set's stride")
            entries.append(("t", e[1], shape, e[3]))
        return cls(tuple(entries), d["stride"])


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def describe(inputs: list[Any], device: str) -> SetLayout | None:
    """The layout of one set made by `get_inputs()`; None unless every input is a dense, contiguous tensor on
    `device` at its storage's start (none sharing memory with another, none asking for gradients) or a
    JSON scalar: a set the shelf cannot hold as it is (a strided view, an alias) is staged instead."""
    entries: list[Entry] = []
    off, seen = 0, set()
    for x in inputs:
        if isinstance(x, torch.Tensor):
            name = str(x.dtype).removeprefix("torch.")
            if type(x) is not torch.Tensor or x.layout != torch.strided or x.device.type != device \
                    or x.requires_grad or not x.is_contiguous() or x.storage_offset() != 0 or name not in _DTYPES:
                return None
            if x.numel():
                if x.untyped_storage().data_ptr() in seen:
                    return None
                seen.add(x.untyped_storage().data_ptr())
            entries.append(("t", name, tuple(int(s) for s in x.shape), off))
            off += _aligned(x.numel() * x.element_size())
        elif type(x) in _SCALARS:
            entries.append(("v", x))
        else:
            return None
    if len(entries) > MAX_ENTRIES:
        return None
    return SetLayout(tuple(entries), max(ALIGN, off))


def views(mem: torch.Tensor, layout: SetLayout, n: int, first: int = 0) -> list[list[Any]]:
    """Sets `first`..`first + n - 1` of the shelf `mem` (uint8), each input a view of it (a scalar: its value).
    In the candidate's process, outside `go`..`done`: only functions bound before any candidate code
    existed (`bound`)."""
    sets = []
    for i in range(first, first + n):
        base = i * layout.stride
        st: list[Any] = []
        for e in layout.entries:
            if e[0] == "v":
                st.append(e[1])
                continue
            dtype, shape, off = _DTYPES[e[1]], e[2], base + e[3]
            flat = bound.getitem(mem, slice(off, off + math.prod(shape) * dtype.itemsize))
            st.append(bound.view(bound.view(flat, dtype), shape))
        sets.append(st)
    return sets


class HostShared:
    """The CPU's shelf: a sealed `memfd` (it can neither shrink nor grow: a candidate holding its descriptor
    cannot make the reference's next write fault), mapped shared; `.tensor` is its bytes (uint8)."""

    def __init__(self, mm: mmap.mmap, size: int) -> None:
        self.mm, self.size = mm, size
        self.tensor: Any = torch.frombuffer(mm, dtype=torch.uint8)

    @classmethod
    def create(cls, nbytes: int) -> tuple[HostShared, int]:
        size = max(mmap.PAGESIZE, -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE)
        fd = os.memfd_create("wb-inputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            return cls(mmap.mmap(fd, size), size), fd
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def open(cls, fd: int, size: int) -> HostShared:
        """The memory another process shared as `fd` (`size` as the server said); `fd` is closed here."""
        try:
            if os.fstat(fd).st_size != size:
                raise OSError("the shared inputs are not the size the server named")
            return cls(mmap.mmap(fd, size), size)
        finally:
            os.close(fd)

    def close(self) -> None:
        self.tensor = None
        try:
            self.mm.close()
        except BufferError:  # a view of it is still alive here: freed with the process
            pass


def _backing(device: str) -> Any:
    if device == "cuda":
        from workbench.harness import devmem

        return devmem.Shared
    return HostShared


def open_shared(device: str, fd: int, size: int) -> Any:
    """The candidate's side: the shelf the server passed as `fd`, mapped (before it drops its privileges)."""
    return _backing(device).open(fd, size)


class Shelf:
    """The reference's side: `nbytes` of memory it owns and shares (`fd`, which the caller sends on and
    closes), filled with the sets it makes; `close` frees it."""

    def __init__(self, device: str, nbytes: int) -> None:
        self.device = device
        self.mem, self.fd = _backing(device).create(nbytes)
        self.size = int(self.mem.size)

    def put_at(self, i: int, inputs: list[Any], layout: SetLayout) -> None:
        """Copy one set into the shelf at set position `i`. It must have `layout`: a `get_inputs()` whose
        layout changed with the seed fails the spec, never the candidate."""
        if (i + 1) * layout.stride > self.size:
            raise ValueError(f"input set {i} does not fit the shared {self.size} bytes")
        if describe(inputs, self.device) != layout:
            raise ValueError("get_inputs() gave a set of another layout (dtypes, shapes, scalars) than the "
                             "probe's: its inputs cannot be shared (WB_DEVICE_INPUTS=off stages them)")
        for x, v in zip(inputs, views(self.mem.tensor, layout, 1, i)[0]):
            if isinstance(x, torch.Tensor) and x.numel():
                v.copy_(x)

    def close(self) -> None:
        self.mem.close()


__all__ = ["HostShared", "SetLayout", "Shelf", "describe", "open_shared", "views"]
