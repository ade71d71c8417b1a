"""searchsorted and bucketize: one binary search per value, the same search as PyTorch's kernels.

Each lane searches its value's row of the boundaries (the one row of a 1-d sequence, else the row with
the value's leading coordinates) with PyTorch's loop and predicates: the left bound moves past `mid`
while `!(b[mid] >= v)` (`!(b[mid] > v)` for right=True). Copying the predicates, not only the result
on clean data, gives PyTorch's answers where the data breaks the sortedness contract too: a NaN value
lands at the end, a NaN boundary steers the search as it steers PyTorch's. The loop runs
`len.bit_length()` times, the most a binary search over `len` needs; finished lanes stop moving.

Both inputs are read in their common dtype (torch.result_type), fp16/bf16 widened to fp32 (exact, same
order). With a `sorter`, the boundary at position mid is `seq[row, sorter[row, mid]]` (one more load a step).
The Scalar overloads are not lowered.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported
from workbench.lowering.graph import op_name, packet, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")
_ORDERED = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16,
            torch.int32, torch.int64)


def search_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    if packet(node) == "searchsorted":
        seq, x = node.args[:2]
        side = node.kwargs.get("side", None)
        right = bool(node.kwargs.get("right", False)) or side == "right"
        sorter = node.kwargs.get("sorter", None)
    else:
        x, seq = node.args[:2]
        right = bool(node.kwargs.get("right", False))
        sorter = None
    # searchsorted.Scalar: one value, a literal of the kernel
    scalar = isinstance(x, (int, float)) and not isinstance(x, bool) and packet(node) == "searchsorted"
    if not (isinstance(seq, fx.Node) and (isinstance(x, fx.Node) or scalar)):
        raise Unsupported(f"unsupported: {op_name(node)} of a Python scalar")
    common = torch.result_type(val(seq), x if scalar else val(x))
    if common not in _ORDERED:
        raise Unsupported(f"unsupported: {op_name(node)} on {common}")
    ct = pw.TL_DTYPE[torch.float32 if common in (torch.float16, torch.bfloat16) else common]
    rows = val(seq).dim() > 1  # one boundary row per leading coordinate of the values
    if rows and (scalar or val(seq).shape[:-1] != val(x).shape[:-1]):
        raise Unsupported(f"unsupported: {op_name(node)} with boundaries {tuple(val(seq).shape)} for values "
                          f"{'a scalar' if scalar else tuple(val(x).shape)}")
    keep = "start = tl.where(go & ~(b > v), mid + 1, start)" if right else \
        "start = tl.where(go & ~(b >= v), mid + 1, start)"
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n",
         f"v = tl.full([BLOCK], {_literal(x)}, {ct})" if scalar else
         f"v = tl.load(x_ptr + offs, mask=mask, other=0).to({ct})",
         "base = (offs // xlast) * nb if ROWS else tl.zeros([BLOCK], dtype=tl.int64)",
         "start = tl.zeros([BLOCK], dtype=tl.int64)", "end = tl.zeros([BLOCK], dtype=tl.int64) + nb",
         "for _ in range(steps):",
         "    go = mask & (start < end)",
         "    mid = start + ((end - start) >> 1)",
         "    at = tl.load(s_ptr + base + mid, mask=go, other=0) if SORTER else mid",
         f"    b = tl.load(b_ptr + base + at, mask=go, other=0).to({ct})",
         "    " + keep,
         "    end = tl.where(go & (start <= mid), mid, end)",
         "tl.store(out_ptr + offs, start.to(out_ptr.dtype.element_ty), mask=mask)"]
    sig = "x_ptr, b_ptr, s_ptr, out_ptr, n, nb, xlast, steps, ROWS: tl.constexpr, SORTER: tl.constexpr, " \
        "BLOCK: tl.constexpr"
    side_doc = "right" if right else "left"
    doc = f'    """{side_doc} binary search of each value in its row of the sorted boundaries."""'
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + ["    " + ln for ln in L]) + "\n"
    bv, v = names[seq], names[node]
    out_dt = "torch.int32" if node.kwargs.get("out_int32", False) else "torch.int64"
    sv = f"{names[sorter]}.contiguous()" if sorter is not None else "_b"
    # the scalar overload: a 0-d result, and b's pointer in place of x's (never read)
    xs, xn, xl = ("[]", "1", "1") if scalar else \
        (f"{names[x]}.shape", f"{names[x]}.numel()", f"max({names[x]}.shape[-1] if {names[x]}.dim() else 1, 1)")
    launch = [f"_b = {bv}.contiguous()", "_x = _b" if scalar else f"_x = {names[x]}.contiguous()", f"_s = {sv}",
              f"{v} = torch.empty({xs}, dtype={out_dt}, device=dev)", f"_n = {xn}",
              f"_nb = {bv}.shape[-1] if {bv}.dim() else 1",
              f"if _n: {name}[(triton.cdiv(_n, BLOCK),)](_x, _b, _s, {v}, _n, _nb, {xl}, _nb.bit_length(), "
              f"ROWS={rows}, SORTER={sorter is not None}, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return src, launch, set()


def _literal(x: float) -> str:
    return f'float("{x}")' if isinstance(x, float) and (x != x or x in (float("inf"), -float("inf"))) else repr(x)


register("searchsorted", Primitive("search", TUNABLES, search_kernel))
register("bucketize", Primitive("search", TUNABLES, search_kernel))
