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
(`child`), where the judge reports the difference. A slot left unwritten reads as zeros: the comparison
fails unless zeros are the right answer.

Why a file and not CUDA IPC memory: the candidate runs in its own PID namespace, across which the CUDA
driver refuses legacy IPC handles; the virtual-memory API's shareable file descriptors would need a
descriptor passed into the confined process (docs/harness.md, what is not covered).
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ALIGN = 4096             # slots start on page boundaries
CHUNK = 64 * 2**20       # bytes one host round trip moves on the GPU
FILE_NAME = "outbox.bin"
_JUDGE_MB = float(os.environ.get("WB_JUDGE_MB", "512"))
MIN_TIMED = 2            # timed outputs judged however large they are (the first round always gives one)


def judged_outputs(out_bytes: int) -> int:
    """Timed outputs the judge reads: their bytes within WB_JUDGE_MB, at least `MIN_TIMED`, at most 1000."""
    return int(max(MIN_TIMED, min(1000, _JUDGE_MB * 2**20 // max(1, out_bytes))))


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
    n = 1
    for s in shape:
        n *= s
    return n * _dtype(dtype).itemsize


@dataclass(frozen=True)
class Layout:
    """Every slot's outputs as (dtype, shape, offset); `total` bytes in all."""

    slots: tuple[tuple[tuple[str, tuple[int, ...], int], ...], ...]
    total: int

    @classmethod
    def build(cls, metas: list[Meta]) -> Layout:
        off, slots = 0, []
        for meta in metas:
            entries = []
            for dtype, shape in meta:
                entries.append((dtype, tuple(shape), off))
                off += -(-_nbytes(dtype, tuple(shape)) // ALIGN) * ALIGN
            slots.append(tuple(entries))
        return cls(tuple(slots), off)

    def to_dict(self) -> dict[str, Any]:
        return {"slots": [[[d, list(s), o] for d, s, o in slot] for slot in self.slots], "total": self.total}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Layout:
        return cls(tuple(tuple((str(e[0]), tuple(int(x) for x in e[1]), int(e[2])) for e in slot)
                         for slot in d["slots"]), int(d["total"]))


class Arena:
    """The trusted side: the file, created and held open by the reference process, read back by slot."""

    def __init__(self, path: Path, layout: Layout, device: str) -> None:
        self.layout, self.device = layout, device
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        self.fd = os.open(path, flags, 0o600)
        try:
            os.fchmod(self.fd, 0o666)  # the candidate's uid writes it; it cannot replace this inode for us
            os.ftruncate(self.fd, layout.total)  # sparse: pages exist once written
        except BaseException:
            os.close(self.fd)
            raise
        self._pinned: torch.Tensor | None = None

    def read(self, slot: int) -> list[torch.Tensor]:
        """Slot `slot`'s outputs, as tensors on the device (a short file reads as an error, not as data)."""
        outs = []
        for dtype, shape, off in self.layout.slots[slot]:
            dst = torch.empty(shape, dtype=_dtype(dtype), device=self.device)
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

    def _buffer(self) -> torch.Tensor:
        if self._pinned is None:
            self._pinned = _host_buffer(self.device)
        return self._pinned

    def close(self) -> None:
        os.close(self.fd)


class Writer:
    """The candidate process's side: the trusted file, opened before the process drops its privileges."""

    def __init__(self, path: Path, layout: Layout, device: str) -> None:
        self.layout, self.device = layout, device
        self.fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        st = os.fstat(self.fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != layout.total:
            os.close(self.fd)
            raise OSError(f"{path}: not the outbox the reference made")
        self._pinned: torch.Tensor | None = None

    def fits(self, slot: int, outs: list[Any]) -> bool:
        if not 0 <= slot < len(self.layout.slots) or len(outs) != len(self.layout.slots[slot]):
            return False
        return all(isinstance(o, torch.Tensor) and str(o.dtype).removeprefix("torch.") == d and tuple(o.shape) == s
                   for o, (d, s, _) in zip(outs, self.layout.slots[slot]))

    def put(self, slot: int, outs: list[Any]) -> bool:
        """Write `outs` into slot `slot`; False (nothing written) when their layout is not the slot's."""
        if not self.fits(slot, outs):
            return False
        for o, (_, _, off) in zip(outs, self.layout.slots[slot]):
            flat = o.detach().contiguous().reshape(-1).view(torch.uint8)
            if flat.device.type == "cpu":
                _pwrite_all(self.fd, flat.numpy(), off)
                continue
            if self._pinned is None:
                self._pinned = _host_buffer(self.device)
            buf = self._pinned
            for start in range(0, flat.numel(), CHUNK):
                m = min(CHUNK, flat.numel() - start)
                buf[:m].copy_(flat[start:start + m])  # synchronous: the bytes are on the host after it
                _pwrite_all(self.fd, buf[:m].numpy(), off + start)
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
