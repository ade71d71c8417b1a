"""frexp: x = mantissa * 2 ** exponent with |mantissa| in [0.5, 1), read off the float's bits.

One kernel over the flattened input (made contiguous: glue). Subnormals are first scaled into the
normal range (by 2 ** 24, or 2 ** 54 in fp64) and the exponent corrected; 0, inf and nan give
(x, 0), as torch does. fp16/bf16 go through fp32, where they are exact, normal numbers.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")
# per compute dtype: bits type, mantissa bits, exponent mask, bias, smallest normal, scale exponent,
# mask that clears the exponent, exponent bits of 0.5
_FMT = {torch.float32: ("tl.int32", 23, 0xFF, 126, "1.1754943508222875e-38", 24, -2139095041, 0x3F000000),
        torch.float64: ("tl.int64", 52, 0x7FF, 1022, "2.2250738585072014e-308", 54, -9218868437227405313,
                        0x3FE0000000000000)}


def frexp_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    dt = dtype(x)
    if not dt.is_floating_point or dt not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise Unsupported(f"unsupported: {op_name(node)} on {dt}")
    c = torch.float64 if dt == torch.float64 else torch.float32
    bits, mbits, emask, bias, tiny, scale, clear, half = _FMT[c]
    ct = "tl.float64" if c == torch.float64 else "tl.float32"
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n",
         f"x = tl.load(x_ptr + offs, mask=mask, other=1.0).to({ct})",
         "a = tl.abs(x)", f"sub = (a < {tiny}) & (a > 0)",
         f"b = tl.where(sub, x * {float(2 ** scale)!r}, x).to({bits}, bitcast=True)",
         f"e = ((b >> {mbits}) & {emask}) - {bias} - tl.where(sub, {scale}, 0)",
         f"m = ((b & {clear}) | {half}).to({ct}, bitcast=True)",
         'special = (x == 0) | (x != x) | (a == float("inf"))',
         "tl.store(m_ptr + offs, tl.where(special, x, m).to(m_ptr.dtype.element_ty), mask=mask)",
         "tl.store(e_ptr + offs, tl.where(special, 0, e).to(tl.int32), mask=mask)"]
    sig = "x_ptr, m_ptr, e_ptr, n, BLOCK: tl.constexpr"
    doc = '    """frexp of the flattened x: mantissa in [0.5, 1) and exponent, from the bits."""'
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + ["    " + ln for ln in L]) + "\n"
    xv, v = names[x], names[node]
    launch = [f"_x = {xv}.contiguous()",
              f"{v}_0 = torch.empty({xv}.shape, dtype={torch_dtype(dt)}, device=dev)",
              f"{v}_1 = torch.empty({xv}.shape, dtype=torch.int32, device=dev)", f"_n = {xv}.numel()",
              f"if _n: {name}[(triton.cdiv(_n, BLOCK),)](_x, {v}_0, {v}_1, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return src, launch, set()


register("frexp", Primitive("frexp", TUNABLES, frexp_kernel, tuple_out=True))
