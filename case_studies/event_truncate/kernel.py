"""Batch Event Truncate for all features at once in two Triton launches, no host synchronization.

For S = F * B segments (KeyedJaggedTensor layout, `reference.py`), keep_s = min(len_s, T);
new_offsets = exclusive scan of keep; segment s copies values[offsets[s+1] - keep_s : offsets[s+1]]
to new_values[new_offsets[s] : new_offsets[s+1]].

Launch 1 `_keep_scan_kernel`: one program per SCAN_BLOCK segments computes keep, its inclusive
scan within the block (into a scratch buffer) and the block total.
Launch 2 `_fixup_copy_kernel`: one program per SEGS segments adds the sum of the preceding block
totals (at most a few hundred, read at once), writes the final offsets, and copies its segments as
a [SEGS, COLS] tile per step (one row per segment, contiguous in both source and destination), up to
the longest kept length of its segments. The scan's scratch is a separate buffer, never updated in
place: a small tensor is replicated over threads, and a read-modify-write of the same element by two
replicas raced on the H200 (the prefix was sometimes added twice; the CPU interpreter cannot show it).
A single launch would need a decoupled look-back scan (programs spinning on their predecessors);
two launches cost about 2 us more and cannot deadlock.

The output size is data. `batch_event_truncate(..., exact=False)` allocates the values by the
host-known upper bound min(N, S * T) and returns it with the device offsets (new_offsets[S] is the
device-side total): no synchronization, capturable in a CUDA graph. `exact=True` (what the
reference's contract asks: an exact-size tensor) reads that one total back: one host sync after both
launches, unavoidable for any implementation that returns an exact-size tensor.

Bytes that must move: offsets 2 x 8 S, kept values 2 x 8 per kept event (read + write).

Probe regions (PROBES=True): `scan` (launch 1), `fixup_offsets`, `copy_values` (launch 2).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

try:  # Proton's language module: probes compile away without an instrumentation session
    import triton.profiler.language as pl

    pl.enable_semantic("triton")
except Exception:  # noqa: BLE001 - interpreter or a Triton without Proton: PROBES stays False
    pl = None

TUNABLES = {"SCAN_BLOCK": [512, 1024, 2048, 4096], "SEGS": [8, 16, 32, 64], "COLS": [32, 64, 128, 256],
            "NUM_WARPS": [2, 4, 8]}
SCAN_BLOCK = 1024
SEGS = 16
COLS = 64
NUM_WARPS = 4


def tunables_valid(cfg: dict) -> bool:
    return cfg["SCAN_BLOCK"] % cfg["SEGS"] == 0 and cfg["SEGS"] * cfg["COLS"] >= 32 * cfg["NUM_WARPS"]


@triton.jit
def _keep_scan_kernel(offsets_ptr, scratch_ptr, block_sums_ptr, S, T,
                      SCAN_BLOCK: tl.constexpr, PROBES: tl.constexpr = False):
    pid = tl.program_id(0)
    if PROBES:
        pl.enter_scope("scan")
    s = pid.to(tl.int64) * SCAN_BLOCK + tl.arange(0, SCAN_BLOCK)
    m = s < S
    lo = tl.load(offsets_ptr + s, mask=m, other=0)
    hi = tl.load(offsets_ptr + s + 1, mask=m, other=0)
    keep = tl.minimum(hi - lo, T)
    incl = tl.cumsum(keep, axis=0)
    tl.store(scratch_ptr + s, incl, mask=m)
    tl.store(block_sums_ptr + pid, tl.sum(keep, axis=0))
    if PROBES:
        pl.exit_scope("scan")


@triton.jit
def _fixup_copy_kernel(values_ptr, offsets_ptr, scratch_ptr, block_sums_ptr, new_offsets_ptr, out_ptr, S, T,
                       SCAN_BLOCK: tl.constexpr, NB_P2: tl.constexpr, SEGS: tl.constexpr,
                       COLS: tl.constexpr, PROBES: tl.constexpr = False):
    pid = tl.program_id(0)
    first = pid.to(tl.int64) * SEGS
    if PROBES:
        pl.enter_scope("fixup_offsets")
    # SCAN_BLOCK % SEGS == 0: all SEGS segments of this program lie in one scan block
    blk = first // SCAN_BLOCK
    nb = tl.arange(0, NB_P2)
    prefix = tl.sum(tl.load(block_sums_ptr + nb, mask=nb < blk, other=0), axis=0)
    s = first + tl.arange(0, SEGS)
    m = s < S
    lo = tl.load(offsets_ptr + s, mask=m, other=0)
    hi = tl.load(offsets_ptr + s + 1, mask=m, other=0)
    keep = tl.minimum(hi - lo, T)
    end = prefix + tl.load(scratch_ptr + s, mask=m, other=0)   # block-local inclusive scan (launch 1)
    tl.store(new_offsets_ptr + s + 1, end, mask=m)
    if pid == 0:
        tl.store(new_offsets_ptr, tl.zeros([], tl.int64))
    if PROBES:
        pl.exit_scope("fixup_offsets")
        pl.enter_scope("copy_values")
    src = hi - keep
    dst = end - keep
    kmax = tl.max(keep, axis=0)
    for c in range(0, kmax, COLS):
        j = c + tl.arange(0, COLS)
        mm = m[:, None] & (j[None, :] < keep[:, None])
        v = tl.load(values_ptr + src[:, None] + j[None, :], mask=mm)
        tl.store(out_ptr + dst[:, None] + j[None, :], v, mask=mm)
    if PROBES:
        pl.exit_scope("copy_values")


def batch_event_truncate(values: torch.Tensor, offsets: torch.Tensor, max_len: int, *, exact: bool = True,
                         scan_block: int | None = None, segs: int | None = None, cols: int | None = None,
                         num_warps: int | None = None,
                         probes: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Truncate every segment to its last `max_len` events. Returns (values, offsets [S + 1]).

    exact=True: values sized exactly (one host sync to read the total). exact=False: values sized by
    min(N, S * max_len) with the tail past offsets[S] unwritten, no host sync.
    """
    if max_len < 0:
        raise ValueError("max_len must be >= 0")
    sb, sg = scan_block or SCAN_BLOCK, segs or SEGS
    if sb % sg:
        raise ValueError(f"SCAN_BLOCK {sb} must be a multiple of SEGS {sg}")
    S = offsets.numel() - 1
    n = values.numel()
    new_offsets = torch.empty(S + 1, dtype=torch.int64, device=offsets.device)
    bound = min(n, S * max_len)
    out = torch.empty(bound, dtype=values.dtype, device=values.device)
    if S == 0:
        new_offsets.zero_()
        return out, new_offsets
    n_blocks = triton.cdiv(S, sb)
    block_sums = torch.empty(n_blocks, dtype=torch.int64, device=offsets.device)
    scratch = torch.empty(S, dtype=torch.int64, device=offsets.device)
    nw = num_warps or NUM_WARPS
    _keep_scan_kernel[(n_blocks,)](offsets, scratch, block_sums, S, max_len, SCAN_BLOCK=sb,
                                   PROBES=probes, num_warps=nw)
    _fixup_copy_kernel[(triton.cdiv(S, sg),)](values, offsets, scratch, block_sums, new_offsets, out,
                                              S, max_len,
                                              SCAN_BLOCK=sb, NB_P2=triton.next_power_of_2(n_blocks), SEGS=sg,
                                              COLS=cols or COLS, PROBES=probes, num_warps=nw)
    if exact:
        out = out[:_read_total(new_offsets[S:])]   # the one host sync: the output's size is data
    return out, new_offsets


_pinned: dict[int, torch.Tensor] = {}


def _read_total(total: torch.Tensor) -> int:
    """The device-side total on the host. On CUDA: an asynchronous copy into a pinned buffer and one
    stream synchronization (`.item()` copies through pageable memory, a few microseconds more)."""
    if not total.is_cuda:
        return int(total[0])
    dev = total.device.index or 0
    buf = _pinned.get(dev)
    if buf is None:
        buf = _pinned[dev] = torch.empty(1, dtype=torch.int64, pin_memory=True)
    buf.copy_(total, non_blocking=True)
    torch.cuda.current_stream(total.device).synchronize()
    return int(buf[0])


class ModelNew(torch.nn.Module):
    """Same constructor and forward as `reference.BatchEventTruncate`: two launches, one host sync."""

    def __init__(self, max_len: int, num_features: int):
        super().__init__()
        if max_len < 0 or num_features < 1:
            raise ValueError("max_len must be >= 0 and num_features >= 1")
        self.max_len = int(max_len)
        self.num_features = int(num_features)

    def forward(self, values: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if (offsets.numel() - 1) % self.num_features:
            raise ValueError(f"{offsets.numel() - 1} segments do not split into {self.num_features} features")
        return batch_event_truncate(values.contiguous(), offsets.contiguous(), self.max_len)
