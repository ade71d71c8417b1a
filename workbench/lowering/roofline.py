"""How far a timed forward is from the hardware: its compulsory bytes and useful flops, estimated from the
captured graph at the spec's sizes, over the measured time, as shares of the GPU's ceilings
(`platforms.ceilings`).

```python
work = estimate_work("level1/23_Softmax.py")           # Work(flops, bytes, dtype) at published sizes
share = achieved_share(work, time_us=3100.0)          # Share(gbs, tflops, bandwidth_share, flop_share, bound)
share.bound, share.share                              # "memory", 0.97: 97 % of the H200's copy bandwidth
```
Bytes are what any implementation must move: every graph input (user inputs, parameters, buffers) read once
and every output written once; intermediates that a perfect fusion keeps on chip are not counted. Flops are
the multiply-adds of the GEMM-like ops (mm, bmm, convolution, 2 per MAC) plus one per output element of
every other op, a floor that keeps a pointwise chain's share near zero, as it should be (those are
memory-bound). The share that matters is the larger of the two (the roofline's binding ceiling): a
memory-bound kernel at 0.85 moves 85 % of the copy bandwidth's bytes per second.

fp32 with TF32 off (the suite's condition) is measured against the FMA ceiling (`fp32`), not the TF32 one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

from platforms.ceilings import mem_bandwidth_gbs, peak_tflops
from workbench.lowering.graph import packet, val

# ops that move or alias data but compute nothing: no flop floor for them
_NO_FLOPS = frozenset({"view", "_unsafe_view", "reshape", "permute", "expand", "slice", "select", "squeeze",
                       "unsqueeze", "clone", "copy", "_to_copy", "alias", "t", "transpose", "as_strided",
                       "empty", "full", "zeros", "ones", "cat", "split", "split_with_sizes", "unbind",
                       "sym_size", "sym_stride", "sym_numel", "lift_fresh_copy", "detach", "contiguous"})


@dataclass(frozen=True)
class Work:
    """What a forward must do at one size: useful flops, compulsory bytes, and its dominant float dtype."""

    flops: float
    bytes: float
    dtype: str          # torch dtype name of the largest float input ("float32", "bfloat16", ...)


@dataclass(frozen=True)
class Share:
    """A timed forward against the ceilings of one architecture."""

    gbs: float                 # achieved compulsory bytes per second, GB/s
    tflops: float              # achieved useful TFLOP/s
    bandwidth_share: float     # gbs / the copy bandwidth
    flop_share: float          # tflops / the dtype's peak (nan when the table has none)
    bound: str                 # "memory" or "compute": the ceiling the forward is nearer to

    @property
    def share(self) -> float:
        """The binding ceiling's share (what a report shows per problem)."""
        return self.bandwidth_share if self.bound == "memory" else self.flop_share


def _int(s: Any) -> int:
    if isinstance(s, int):
        return s
    hint = getattr(getattr(s, "node", None), "hint", None)   # a traced symbolic size: its example value
    return int(hint) if hint is not None else int(s)


def _numel(t: torch.Tensor) -> int:
    return math.prod(_int(d) for d in t.shape)


def _nbytes(t: Any) -> int:
    return _numel(t) * t.element_size() if isinstance(t, torch.Tensor) else 0


def node_flops(node: fx.Node) -> float:
    """Useful flops of one graph node: 2 per multiply-add of mm/bmm/convolution, else one per output element
    (zero for views, copies and allocations)."""
    p = packet(node)
    out = val(node)
    if p == "mm":
        (m, k), n = val(node.args[0]).shape, val(node.args[1]).shape[1]
        return 2.0 * _int(m) * _int(k) * _int(n)
    if p == "bmm":
        b, m, k = val(node.args[0]).shape
        return 2.0 * _int(b) * _int(m) * _int(k) * _int(val(node.args[1]).shape[2])
    if p in ("addmm", "baddbmm"):
        a, b_ = val(node.args[1]), val(node.args[2])
        lead = _numel(a) // _int(a.shape[-1]) if a.dim() == 2 else _int(a.shape[0]) * _int(a.shape[1])
        return 2.0 * lead * _int(a.shape[-1]) * _int(b_.shape[-1])
    if p == "convolution":
        x, w = val(node.args[0]), val(node.args[1])
        taps = math.prod(_int(k) for k in w.shape[2:])
        # w is [Cout, Cin/G, k...] (transposed: [Cin, Cout/G, k...]): each output element (transposed: each
        # input element) meets w.shape[1] channels x taps
        return 2.0 * _numel(x if node.args[6] else out) * _int(w.shape[1]) * taps
    if p in _NO_FLOPS or not isinstance(out, torch.Tensor):
        return 0.0
    return float(_numel(out))


def graph_work(graph: fx.Graph) -> Work:
    """The Work of a captured forward graph: its placeholders read once, its outputs written once."""
    read = sum(_nbytes(val(n)) for n in graph.nodes if n.op == "placeholder")
    out_node = next(n for n in graph.nodes if n.op == "output")
    outs = out_node.args[0] if isinstance(out_node.args[0], (list, tuple)) else [out_node.args[0]]
    written = sum(_nbytes(val(a)) for a in outs if isinstance(a, fx.Node))
    flops = sum(node_flops(n) for n in graph.nodes if n.op == "call_function")
    floats = [val(n) for n in graph.nodes if n.op == "placeholder" and isinstance(val(n), torch.Tensor)
              and val(n).dtype.is_floating_point]
    dtype = str(max(floats, key=_numel).dtype).removeprefix("torch.") if floats else "float32"
    return Work(flops=flops, bytes=float(read + written), dtype=dtype)


def estimate_work(spec_path: str | Path, overrides: dict | None = None) -> Work:
    """The Work of a KernelBench-format spec's forward at its sizes (captured with fake tensors: no memory
    is allocated and nothing runs)."""
    from workbench.lowering.capture import capture, spec_module

    return graph_work(capture(spec_module(spec_path, overrides)).graph)


def achieved_share(work: Work, time_us: float, arch: str = "sm_90", tf32: bool = False) -> Share:
    """`work` done in `time_us` against `arch`'s ceilings. fp32 counts against the FMA peak unless `tf32`
    (the spec allows TF32), other dtypes against their tensor-core peak."""
    if time_us <= 0:
        raise ValueError(f"time_us must be positive, got {time_us}")
    sec = time_us * 1e-6
    gbs = work.bytes / sec / 1e9
    tflops = work.flops / sec / 1e12
    key = "fp32" if work.dtype == "float32" and not tf32 else work.dtype
    peak = peak_tflops(arch, key)
    bw = gbs / mem_bandwidth_gbs(arch)
    fl = tflops / peak if peak == peak and peak > 0 else float("nan")
    # the binding ceiling: the one the forward's arithmetic intensity puts it under
    ridge = peak * 1e12 / (mem_bandwidth_gbs(arch) * 1e9) if fl == fl else float("inf")
    bound = "compute" if work.bytes > 0 and work.flops / work.bytes > ridge else "memory"
    return Share(gbs=gbs, tflops=tflops, bandwidth_share=bw, flop_share=fl, bound=bound)
