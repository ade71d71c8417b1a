"""segment_reduce(data, reduce, lengths= | offsets=, axis, initial): sum / mean / max / min / prod over segments.

As ATen's CPU kernel (SegmentReduce.cpp `_segment_reduce_lengths_cpu_kernel1`): `axis` is the last dim of
`lengths` / `offsets`, whose leading dims match data's before it; segment s of row `outer` spans
[start, start + length) of data's axis, start being the sum of the row's earlier lengths (or offsets[outer, s], and
the end offsets[outer, s + 1]). Each segment starts from `initial` (else 0, 1, -inf or inf by reduction); max and
min take a nan and keep it (`isnan(v) ? v : std::max(acc, v)`); mean divides by the length when it is > 0 and the
sum is not nan, and an empty segment without `initial` is nan.
One lane per output element of [outer, S, inner]; its start is a loop over the row's lengths (S steps) and its
segment a loop to the block's longest (a block reduction, nothing read by the host). Computed in fp32 registers,
rounded to fp16/bf16 after every step as ATen's CPU kernel (its accumulator is the data's dtype) does.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_INIT = {"sum": "0.0", "mean": "0.0", "prod": "1.0", "max": '-float("inf")', "min": 'float("inf")'}
_STEP = {"sum": "acc + v", "mean": "acc + v", "prod": "acc * v",
         # std::max(acc, v) = acc < v ? v : acc (a nan acc stays), a nan v wins
         "max": "tl.where(v != v, v, tl.where(acc < v, v, acc))",
         "min": "tl.where(v != v, v, tl.where(v < acc, v, acc))"}


def segment_reduce_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    data, reduce = node.args[:2]
    kw = node.kwargs
    lengths, offsets = kw.get("lengths"), kw.get("offsets")
    seg = offsets if offsets is not None else lengths
    dt = dtype(node)
    if reduce not in _INIT or dt not in _FLOATS or kw.get("indices") is not None or not isinstance(seg, fx.Node):
        raise Unsupported(f"unsupported: {op_name(node)} {reduce} on {dt}")
    initial = kw.get("initial")
    axis = val(seg).dim() - 1
    is_off = offsets is not None
    used: set[str] = set()

    def rnd(e: str) -> str:  # ATen's CPU kernel accumulates in the data's dtype: fp16/bf16 round every step
        return f"({e})" if dt == torch.float32 else f"{pw.narrow(f'({e})', dt, used)}.to(tl.float32)"

    init = repr(float(torch.tensor(float(initial), dtype=dt))) if initial is not None else _INIT[reduce]
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < TOTAL",
         "inner = offs % INNER", "rest = offs // INNER", "s = rest % S", "outer = rest // S",
         f"lrow = outer * {'(S + 1)' if is_off else 'S'}"]
    if is_off:
        L += ["start = tl.load(seg_ptr + lrow + s, mask=mask, other=0).to(tl.int64)",
              "length = tl.load(seg_ptr + lrow + s + 1, mask=mask, other=0).to(tl.int64) - start"]
    else:  # start: the row's earlier lengths summed
        L += ["length = tl.load(seg_ptr + lrow + s, mask=mask, other=0).to(tl.int64)", "start = tl.zeros_like(offs)",
              "for k in range(0, S):",
              "    start += tl.where(mask & (k < s), tl.load(seg_ptr + lrow + k, mask=mask & (k < s), other=0), 0)"]
    L += ["lmax = tl.max(tl.where(mask, length, 0), axis=0)",
          f"acc = tl.zeros([BLOCK], tl.float32) + {init}",
          "base = outer * AXIS * INNER + inner",
          "for j in range(0, lmax):",
          "    ok = mask & (j < length)",
          "    v = tl.load(x_ptr + base + (start + j) * INNER, mask=ok, other=0.0).to(tl.float32)",
          f"    acc = tl.where(ok, {rnd(_STEP[reduce])}, acc)"]
    if reduce == "mean":
        if initial is None:
            L.append('acc = tl.where(length == 0, float("nan"), acc)')
        L.append(f"acc = tl.where((length > 0) & (acc == acc), {rnd('acc / length.to(tl.float32)')}, acc)")
    L.append(f"tl.store(out_ptr + offs, {pw.narrow('acc', dt, used) if dt != torch.float32 else 'acc'}, mask=mask)")
    params = ["x_ptr", "seg_ptr", "out_ptr", "TOTAL", "S", "AXIS", "INNER", "BLOCK: tl.constexpr"]
    doc = (f'    """segment_reduce {reduce} by {"offsets" if is_off else "lengths"}: out[outer, s, inner] over '
           'x[outer, start:start + length, inner]."""')
    src = "\n".join([f"@triton.jit\ndef {name}({', '.join(params)}):", doc] + ["    " + ln for ln in L]) + "\n"
    xv, sv, v = names[data], names[seg], names[node]
    nseg = f"{sv}.shape[-1]{' - 1' if is_off else ''}"
    launch = [f"_x, _seg = {xv}.contiguous(), {sv}.contiguous()",
              f"_shape = [*_x.shape[:{axis}], {nseg}, *_x.shape[{axis + 1}:]]",
              f"{v} = torch.empty(_shape, dtype={torch_dtype(dt)}, device=dev)", "_n = _numel(_shape)",
              f"if _n: {name}[(triton.cdiv(_n, BLOCK),)](_x, _seg, {v}, _n, {nseg}, _x.shape[{axis}], "
              f"_numel(_x.shape[{axis + 1}:]), BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return src, launch, used


register("segment_reduce", Primitive("segment", TUNABLES, segment_reduce_kernel))
