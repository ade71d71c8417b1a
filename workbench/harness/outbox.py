"""The judged outputs' way out of the candidate process: slots in a file the trusted reference owns.

The reference process creates the job's outbox before any candidate code exists: one file in the
sandbox, sized for every output the judge will read (each trial's, and `judged_outputs` timed ones),
laid out with the reference's own output dtypes and shapes (`Layout`). It keeps the file open and reads
the slots back through that descriptor after the candidate is dead: nothing the candidate names (a
symlink, a file it swapped in, a size it chose) is opened or trusted, and no pickle is loaded.

The candidate process opens the file before it drops its privileges and writes each judged output's raw
bytes at its slot's offset (`Writer.put`): on the GPU through one pinned host buffer in chunks, so a GB
output costs no more host memory than the chunk; on the CPU straight from the tensor. An output whose
layout differs from the reference's (a dtype, a shape, a count, a non-tensor) goes to a file as before
(`reference_proc`), where the judge reports the difference. A slot left unwritten reads as zeros: the
comparison fails unless zeros are the right answer.

Outputs over `WB_JUDGE_FULL_MB` (KernelBench's elementwise problems return 6 GB) are judged in full on each shape's
first trial, and on a sample everywhere else: the first and last `EDGE` elements and `SAMPLE` positions
drawn from a seed the trusted side picks. A timed output's seed is sent with the `save` order, after
`done`: the outputs exist before anyone knows which positions are read.

On the GPU the slots are device memory the reference allocated (`devmem.Shared`: the virtual-memory
API's shareable descriptor, passed by the server into the confined process; legacy CUDA IPC handles do not
cross the candidate's PID namespace): the candidate copies device to device, the judge compares in place.
Its first byte in the file says which the candidate wrote (`D` device, `F` file): where the device memory
could not be mapped, the file is the way, as on the CPU.
"""
from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from workbench.harness import bound

ALIGN = 4096             # slots start on page boundaries
HEADER = ALIGN           # the file's first page: which way the candidate wrote (b"D" device, b"F" file)
CHUNK = 64 * 2**20       # bytes one host round trip moves on the GPU
FILE_NAME = "outbox.bin"
MIN_TIMED = 2            # timed outputs judged however large they are (the first round always gives one)
SAMPLE = 1 << 20         # random positions of a sampled output
EDGE = 1 << 16           # and its first and last elements (tails are where masks go wrong)
# Entries (one output of one slot) a layout may hold: its description travels in one `Prepared` message, whose
# nested values are bounded (`trusted_messages.MAX_NESTED`, 4 MiB); an entry encodes in 30-60 bytes
MAX_LAYOUT_ENTRIES = 1 << 15


def judged_outputs(out_bytes: int, judge_mb: float, n_outputs: int = 1, other_entries: int = 0) -> int:
    """Timed outputs the judge reads: their bytes within `judge_mb` (`WB_JUDGE_MB`), at least `MIN_TIMED`, at
    most 1000, and no more than the layout's entries allow beside `other_entries` (the trials' slots) when one
    set of outputs is `n_outputs` tensors (OpInfo's `unique` in int64: 1,056 outputs of 4 KB pages, 130
    timed sets by bytes, a 5 MB description the server refused as malformed)."""
    by_bytes = judge_mb * 2**20 // max(1, out_bytes)
    by_entries = (MAX_LAYOUT_ENTRIES - other_entries) // max(1, n_outputs)
    return int(max(MIN_TIMED, min(1000, by_bytes, by_entries)))


Meta = list[tuple[str, tuple[int, ...]]]  # one slot: (dtype name, shape) of each output


def describe(outs: list[Any]) -> Meta | None:
    """The layout of a reference's flattened outputs; None unless every one is a dense strided tensor."""
    meta: Meta = []
    for o in outs:
        if type(o) is not torch.Tensor or o.layout != torch.strided or o.device.type == "meta":
            return None
        meta.append((str(o.dtype).removeprefix("torch."), tuple(int(s) for s in o.shape)))
    return meta


def _dtype(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"not a dtype: {name!r}")
    return dt


def _nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    return math.prod(shape) * _dtype(dtype).itemsize


def sampled(meta: Meta, full_mb: float) -> bool:
    """Whether a slot of this layout is judged on a sample (when it is not a first trial): an output over
    `full_mb` (`WB_JUDGE_FULL_MB`)."""
    return any(_nbytes(d, s) > full_mb * 2**20 for d, s in meta)


def positions(numel: int, seed: int, device: str) -> torch.Tensor:
    """The flat positions a sampled output is judged at: both ends and `SAMPLE` drawn from `seed` (the
    same in both processes: one generator, one seed, one device type)."""
    edge = min(EDGE, numel // 2)
    gen = _Generator(device=device)
    _manual_seed(gen, int(seed) & (2**63 - 1))
    mid = _randint(0, numel, (SAMPLE,), generator=gen, device=device)
    return _cat([_arange(edge, device=device), mid, _arange(numel - edge, numel, device=device)])


# bound at import, before any candidate code exists (`bound`): the candidate's process samples with them
_Generator, _manual_seed = torch.Generator, torch.Generator.manual_seed
_randint, _cat, _arange = torch.randint, torch.cat, torch.arange


def sample_of(outs: list[torch.Tensor], seed: int) -> list[torch.Tensor]:
    """Each output's values at its `positions` (output j drawn from seed + j), flat."""
    res = []
    for j, o in enumerate(outs):
        flat = bound.reshape(o, -1)
        res.append(bound.getitem(flat, positions(bound.numel(flat), seed + j, bound.device_type(o))))
    return res


Entry = tuple[str, tuple[int, ...], int, bool]  # dtype, shape, offset, judged on a sample


@dataclass(frozen=True)
class Layout:
    """Every slot's outputs as (dtype, shape, offset, sampled); `total` bytes in all. A sampled entry
    holds its sample's values (1-D), not the whole output."""

    slots: tuple[tuple[Entry, ...], ...]
    total: int

    @classmethod
    def build(cls, metas: list[Meta], sample: list[bool] | None = None) -> Layout:
        off, slots = 0, []
        for n, meta in enumerate(metas):
            entries = []
            for dtype, shape in meta:
                samp = bool(sample and sample[n])
                numel = math.prod(shape)
                size = (SAMPLE + 2 * min(EDGE, numel // 2)) * _dtype(dtype).itemsize if samp else \
                    _nbytes(dtype, tuple(shape))
                entries.append((dtype, tuple(shape), off, samp))
                off += -(-size // ALIGN) * ALIGN
            slots.append(tuple(entries))
        return cls(tuple(slots), off)

    def to_dict(self) -> dict[str, Any]:
        return {"slots": [[[d, list(s), o, m] for d, s, o, m in slot] for slot in self.slots],
                "total": self.total}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Layout:
        return cls(tuple(tuple((str(e[0]), tuple(int(x) for x in e[1]), int(e[2]), bool(e[3])) for e in slot)
                         for slot in d["slots"]), int(d["total"]))


def _stored_shape(entry: Entry) -> tuple[int, ...]:
    _, shape, _, samp = entry
    if not samp:
        return shape
    return (SAMPLE + 2 * min(EDGE, math.prod(shape) // 2),)


def _slot_view(mem: torch.Tensor, entry: Entry) -> torch.Tensor:
    """An entry's bytes in device memory `mem` (uint8), as its dtype and stored shape."""
    dtype, off = _dtype(entry[0]), entry[2]
    shape = _stored_shape(entry)
    return bound.view(bound.view(bound.getitem(mem, slice(off, off + math.prod(shape) * dtype.itemsize)), dtype),
                      shape)


class Arena:
    """The trusted side: the file, created and held open by the reference process, read back by slot;
    with `shared`, the device memory the candidate maps too."""

    def __init__(self, path: Path, layout: Layout, device: str, shared: Any = None) -> None:
        self.layout, self.device, self.shared = layout, device, shared
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        self.fd = os.open(path, flags, 0o600)
        try:
            os.fchmod(self.fd, 0o666)  # the candidate's uid writes it; it cannot replace this inode for us
            os.ftruncate(self.fd, HEADER + layout.total)  # sparse: pages exist once written
        except BaseException:
            os.close(self.fd)
            raise
        self._pinned: torch.Tensor | None = None

    def way(self) -> str:
        """How the candidate wrote its outputs: "device" or "file" (as its first byte says)."""
        return "device" if self.shared is not None and os.pread(self.fd, 1, 0) == b"D" else "file"

    def read(self, slot: int) -> list[torch.Tensor]:
        """Slot `slot`'s outputs (a sampled one: its sample's values), as tensors on the device; a short
        file reads as an error, not as data."""
        if self.way() == "device":
            return [_slot_view(self.shared.tensor, e) for e in self.layout.slots[slot]]
        outs = []
        for entry in self.layout.slots[slot]:
            dtype, off = entry[0], HEADER + entry[2]
            dst = torch.empty(_stored_shape(entry), dtype=_dtype(dtype), device=self.device)
            flat = dst.reshape(-1).view(torch.uint8)
            if self.device == "cpu":
                _pread_into(self.fd, flat.numpy(), off)
            else:
                buf = self._buffer()
                for start in range(0, flat.numel(), CHUNK):
                    m = min(CHUNK, flat.numel() - start)
                    _pread_into(self.fd, buf[:m].numpy(), off + start)
                    flat[start:start + m].copy_(buf[:m])
            outs.append(dst)
        return outs

    def expected(self, slot: int, ref: list[Any], seed: int | None) -> list[Any]:
        """The reference's outputs as slot `slot` holds them: a sampled entry's values at its positions."""
        entries = self.layout.slots[slot]
        if len(ref) != len(entries):
            return ref
        return [sample_of([r], seed + j)[0] if e[3] and seed is not None else r  # type: ignore[operator]
                for j, (r, e) in enumerate(zip(ref, entries))]

    def _buffer(self) -> torch.Tensor:
        if self._pinned is None:
            self._pinned = _host_buffer(self.device)
        return self._pinned

    def close(self) -> None:
        os.close(self.fd)


class Writer:
    """The candidate process's side: the trusted file, opened before the process drops its privileges;
    with `shared` (the reference's device memory, mapped), outputs are copied there instead."""

    def __init__(self, path: Path, layout: Layout, device: str, shared: Any = None) -> None:
        self.layout, self.device, self.shared = layout, device, shared
        self.fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        st = os.fstat(self.fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != HEADER + layout.total:
            os.close(self.fd)
            raise OSError(f"{path}: not the outbox the reference made")
        _pwrite_all(self.fd, memoryview(b"D" if shared is not None else b"F"), 0)
        self._pinned: torch.Tensor | None = None

    def fits(self, slot: int, outs: list[Any]) -> bool:
        if not 0 <= slot < len(self.layout.slots) or len(outs) != len(self.layout.slots[slot]):
            return False
        return all(isinstance(o, bound.Tensor) and str(bound.dtype(o)).removeprefix("torch.") == d
                   and tuple(bound.shape(o)) == s for o, (d, s, _, _) in zip(outs, self.layout.slots[slot]))

    def put(self, slot: int, outs: list[Any], seed: int | None = None) -> bool:
        """Write `outs` into slot `slot` (a sampled entry: its values at the positions of `seed`); False
        (nothing written) when their layout is not the slot's, or a sampled slot comes without a seed."""
        if not self.fits(slot, outs):
            return False
        entries = self.layout.slots[slot]
        if any(e[3] for e in entries) and seed is None:
            return False
        # After `done`, in the candidate's process: every tensor method bound before any candidate code
        # existed (`bound`), so nothing it added to a class or module runs here, outside the clock.
        for j, (o, entry) in enumerate(zip(outs, entries)):
            off, samp = HEADER + entry[2], entry[3]
            o = bound.detach(o)
            if samp:
                o = sample_of([o], seed + j)[0]  # type: ignore[operator]
            if self.shared is not None:  # device to device, into the reference's memory
                bound.copy_(_slot_view(self.shared.tensor, entry), bound.reshape(o, _stored_shape(entry)))
                bound.synchronize("cuda")
                continue
            flat = bound.view(bound.reshape(bound.contiguous(o), -1), torch.uint8)
            if bound.device_type(flat) == "cpu":
                _pwrite_all(self.fd, bound.numpy(flat), off)
                continue
            if self._pinned is None:
                self._pinned = _host_buffer(self.device)
            buf = self._pinned
            n = bound.numel(flat)
            for start in range(0, n, CHUNK):
                m = min(CHUNK, n - start)
                part = bound.getitem(buf, slice(0, m))
                bound.copy_(part, bound.getitem(flat, slice(start, start + m)))  # synchronous: on the host after it
                _pwrite_all(self.fd, bound.numpy(part), off + start)
        return True


def _host_buffer(device: str) -> torch.Tensor:
    try:
        return torch.empty(CHUNK, dtype=torch.uint8, pin_memory=device == "cuda")
    except RuntimeError:  # no page-locked memory here: pageable is slower, not wrong
        return torch.empty(CHUNK, dtype=torch.uint8)


def _pwrite_all(fd: int, arr: Any, off: int) -> None:
    view = memoryview(arr).cast("B")
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], off + done)


def _pread_into(fd: int, arr: Any, off: int) -> None:
    view = memoryview(arr).cast("B")
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], off + done)
        if n <= 0:
            raise OSError(f"outbox shorter than its layout at byte {off + done}")
        done += n
