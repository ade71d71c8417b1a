"""sort, topk, kthvalue, median and nanmedian along one dim: a bitonic sort of a row held in registers.

The sorted dim is moved last and the input viewed as [M, N]; a program owns SORT_BLOCK_M rows padded
to next_power_of_2(N) columns. Each element becomes one int64 key, `order bits << 31 | column`:
the order bits are the value's bits mapped so that integer order is value order (floats: sign-magnitude
flipped, -0.0 taken as 0.0, every nan above +inf, as torch orders them; descending: the bits
complemented), and the column breaks ties, so sorting the keys (a bitonic network, `_sort_rows`) is a
*stable* sort with indices.
Padding sorts after everything. Values are read back through the sorted indices (exact in every
dtype). kthvalue/median pick one column per row: k - 1, the lower median (the first nan when a row has
one, as torch), or nanmedian's median of the non-nan values.
Keys are 32 bits: 64-bit dtypes (int64, float64) sort twice, the low halves then the high halves (`_wide_keys`).
Rows longer than MAX_N are reported unsupported (one row must fit in registers; at 8192 the GPU spills, not
measured there yet).
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.pointwise import HELPERS
from workbench.lowering.primitives import Primitive, register, register_tunables

TUNABLES = ("SORT_BLOCK_M", "NUM_WARPS")
DEFAULTS = {"SORT_BLOCK_M": ([1, 2, 4, 8, 16], 4)}
register_tunables(DEFAULTS)
MAX_N = 8192      # the longest row one program sorts (OpInfo's sort samples reach 8000)
ROW_ELEMS = 4096  # short rows are packed up to this many elements per program
# the bitonic network written with reshapes and sums, not `tl.sort`: Triton's interpreter runs tl.sort's
# xor reduction element by element in Python (130 s for OpInfo's sort samples) but tl.sum in numpy
# One compare-exchange stage is its own function: its constexprs (`j`, `A`) are then defined once per call, as
# Triton 3.6's compiler requires ("constexpr cannot be reassigned" when they sat in the unrolled loop: no sort
# compiled for sm_90), while the interpreter still sees them as constexprs.
HELPERS["_sort_rows"] = '''@triton.jit
def _bitonic_stage(x, BM: tl.constexpr, LOG_N: tl.constexpr, s: tl.constexpr, jj: tl.constexpr):
    # stage (s, j = s - 1 - jj) of the network on x [BM, 2 ** LOG_N]
    N: tl.constexpr = 1 << LOG_N
    j: tl.constexpr = s - 1 - jj
    A: tl.constexpr = N >> (j + 1)
    p = tl.arange(0, 2)[None, None, :, None]
    y = tl.reshape(x, [BM, A, 2, 1 << j])
    lo = tl.sum(tl.where(p == 0, y, 0), axis=2)
    hi = tl.sum(tl.where(p == 1, y, 0), axis=2)
    a = tl.arange(0, A)[None, :, None]
    if s == LOG_N:
        desc = a < 0
    else:
        desc = ((a >> (s - j - 1)) & 1) == 1
    swap = (lo > hi) != desc
    first = tl.where(swap, hi, lo)
    second = tl.where(swap, lo, hi)
    return tl.reshape(tl.where(p == 0, first[:, :, None, :], second[:, :, None, :]), [BM, N])


@triton.jit
def _sort_rows(x, BM: tl.constexpr, LOG_N: tl.constexpr):
    # ascending bitonic sort of each row of x [BM, 2 ** LOG_N] (distinct int64 keys)
    for s in tl.static_range(1, LOG_N + 1):
        for jj in tl.static_range(0, s):
            x = _bitonic_stage(x, BM, LOG_N, s, jj)
    return x
'''
_FLOAT_KEYS = (torch.float32, torch.float16, torch.bfloat16)
_INT_KEYS = (torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)
_WIDE_KEYS = (torch.int64, torch.float64)  # two passes of 32-bit keys (`_wide_keys`)


def _arg(node: fx.Node, i: int, name: str, default):  # noqa: ANN001, ANN202 - small local accessor
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def _params(node: fx.Node) -> tuple[str, int | None, int, bool, bool]:
    """(mode, dim or None for the whole tensor, k, descending, keepdim) of one node."""
    p = packet(node)
    if p == "sort":
        return "all", _arg(node, 1, "dim", -1), 0, bool(_arg(node, 2, "descending", False)), False
    if p == "topk":
        return "topk", _arg(node, 2, "dim", -1), _arg(node, 1, "k", 1), bool(_arg(node, 3, "largest", True)), False
    if p == "kthvalue":
        return "kth", _arg(node, 2, "dim", -1), _arg(node, 1, "k", 1), False, bool(_arg(node, 3, "keepdim", False))
    dim = _arg(node, 1, "dim", None)
    return p, dim, 0, False, bool(_arg(node, 2, "keepdim", False))


def _wide_keys(floating: bool, descending: bool) -> list[str]:
    """64-bit values (int64, float64): two stable passes of 32-bit keys, least significant half first (LSD radix
    order): the low halves (unsigned) with the column, then the high halves (signed, offset) in that order with
    the position, so ties of the whole value keep their columns' order; `idx` is pass 1's index at pass 2's."""
    L = (["x = tl.where(x == 0, 0.0, x)", "b = x.to(tl.int64, bitcast=True)",
          "b = tl.where(b < 0, b ^ 0x7FFFFFFFFFFFFFFF, b)"] if floating else ["b = x"])
    L += ["hi = (b >> 32) + 2147483648", "lo = b & 4294967295"]
    if floating:  # every nan above +inf, equal to each other
        L += ["hi = tl.where(x != x, 4294967295, hi)", "lo = tl.where(x != x, 4294967295, lo)"]
    if descending:
        L += ["hi = 4294967295 - hi", "lo = 4294967295 - lo"]
    pad = "tl.where(m, {0}, cols[None, :] + tl.zeros_like({0}))"  # padding (and rows past M) sorts last
    return L + ["key = tl.where(m, (lo << 31) | cols[None, :].to(tl.int64), 9223372036854775807)",
                "first = _sort_rows(key, SORT_BLOCK_M, SORT_LOG) & 2147483647",
                f"first = {pad.format('first')}",
                "key = tl.where(m, (tl.gather(hi, first, 1) << 31) | cols[None, :].to(tl.int64), "
                "9223372036854775807)",
                "pos2 = _sort_rows(key, SORT_BLOCK_M, SORT_LOG) & 2147483647",
                f"idx = tl.gather(first, {pad.format('pos2')}, 1)"]


def _body(mode: str, floating: bool, descending: bool, wide: bool = False) -> list[str]:
    kt = ("tl.float64" if floating else "tl.int64") if wide else ("tl.float32" if floating else "tl.int32")
    L = ["rows = tl.program_id(0).to(tl.int64) * SORT_BLOCK_M + tl.arange(0, SORT_BLOCK_M)",
         "cols = tl.arange(0, 1 << SORT_LOG)", "m = (rows[:, None] < M) & (cols[None, :] < N)",
         "ptr = x_ptr + rows[:, None] * x_sm", f"x = tl.load(ptr + cols[None, :] * x_sn, mask=m, other=0).to({kt})"]
    if wide:
        L += _wide_keys(floating, descending)
    elif floating:
        L += ["x = tl.where(x == 0, 0.0, x)",
              "b = x.to(tl.int32, bitcast=True)", "b = tl.where(b < 0, b ^ 0x7FFFFFFF, b)",
              "key = b.to(tl.int64) + 2147483648", "key = tl.where(x != x, 4294967295, key)"]
    else:
        L.append("key = x.to(tl.int64) + 2147483648")
    if descending and not wide:
        L.append("key = 4294967295 - key")
    if not wide:
        L += ["key = tl.where(m, (key << 31) | cols[None, :].to(tl.int64), 9223372036854775807)",
              "idx = _sort_rows(key, SORT_BLOCK_M, SORT_LOG) & 2147483647"]
    if mode in ("all", "topk"):
        return L + ["keep = (rows[:, None] < M) & (cols[None, :] < K)",
                    "out = rows[:, None] * K + cols[None, :]",
                    "tl.store(vals_ptr + out, tl.load(ptr + idx * x_sn, mask=keep), mask=keep)",
                    "tl.store(idx_ptr + out, idx, mask=keep)"]
    if mode == "kth":
        L.append("pos = tl.zeros([SORT_BLOCK_M], tl.int64) + (K - 1)")
    elif not floating:
        L.append("pos = tl.zeros([SORT_BLOCK_M], tl.int64) + (N - 1) // 2")
    else:
        L.append("nn = tl.sum((m & (x != x)).to(tl.int64), axis=1)")
        L.append("pos = tl.where(nn > 0, N - nn, (N - 1) // 2)" if mode == "median" else
                 "pos = tl.where(N - nn > 0, (N - nn - 1) // 2, 0)")
    return L + ["i = tl.sum(tl.where(cols[None, :] == pos[:, None], idx, 0), axis=1)", "rm = rows < M",
                "tl.store(vals_ptr + rows, tl.load(x_ptr + rows * x_sm + i * x_sn, mask=rm), mask=rm)",
                "tl.store(idx_ptr + rows, i, mask=rm)"]


def sort_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    dt = dtype(x)
    if dt not in _FLOAT_KEYS + _INT_KEYS + _WIDE_KEYS:
        raise Unsupported(f"unsupported: {op_name(node)} on {dt}")
    mode, dim, k, desc, keepdim = _params(node)
    r = val(x).dim()
    whole = dim is None
    if not whole:
        dim = dim % max(r, 1)
        n = val(x).shape[dim] if r else 1
        if isinstance(n, int) and n > MAX_N:
            raise Unsupported(f"unsupported: {op_name(node)} over rows of {n} > {MAX_N} elements")
    doc = (f'    """{packet(node)} along the last axis of x viewed as [M, N]: a stable bitonic sort of '
           f'(value, column) keys{", descending" if desc else ""}."""')
    sig = "x_ptr, vals_ptr, idx_ptr, M, N, x_sm, x_sn, K, SORT_BLOCK_M: tl.constexpr, SORT_LOG: tl.constexpr"
    body = _body(mode, dt in _FLOAT_KEYS or dt == torch.float64, desc, dt in _WIDE_KEYS)
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + ["    " + ln for ln in body]) + "\n"
    xv, v = names[x], names[node]
    if whole:
        launch = [f"_x = {xv}.reshape(1, {xv}.numel())"]
    else:
        perm = [d for d in range(max(r, 1)) if d != dim] + [dim]
        launch = [f"_xs = {xv}.reshape([1]) if {xv}.dim() == 0 else {xv}", f"_xp = _xs.permute({perm})",
                  "_x = _xp.reshape(_numel(_xp.shape[:-1]), _xp.shape[-1])"]
    K = {"all": "_N", "topk": expr(k), "kth": expr(k)}.get(mode, "1")
    one = mode not in ("all", "topk")
    launch += ["_M, _N = _x.shape",
               f"if _N > {MAX_N}:",
               f"    raise ValueError(f'{packet(node)}: rows of {{_N}} elements, more than the {MAX_N} a block holds')",
               "_BN = triton.next_power_of_2(max(_N, 1))", f"_BM = max(1, min(SORT_BLOCK_M, {ROW_ELEMS} // _BN))",
               f"_K = {K}",
               f"_v = torch.empty([_M{'' if one else ', _K'}], dtype={torch_dtype(dt)}, device=dev)",
               f"_i = torch.empty([_M{'' if one else ', _K'}], dtype=torch.int64, device=dev)",
               f"if _M and _N: {name}[(triton.cdiv(_M, _BM),)](_x, _v, _i, _M, _N, *_x.stride(), _K, "
               "SORT_BLOCK_M=_BM, SORT_LOG=_BN.bit_length() - 1, num_warps=NUM_WARPS)"]
    if whole:
        return src, launch + [f"{v} = _v.reshape([])"], {"_sort_rows"}
    if one:
        shape = "_xp.shape[:-1]"
        back = f".unsqueeze({dim})" if keepdim and r else ""
    else:
        inv = [perm.index(d) for d in range(max(r, 1))]
        shape = "[*_xp.shape[:-1], _K]"
        back = f".permute({inv})" + (".reshape([])" if r == 0 else "")
    launch += [f"{v}_0 = _v.reshape({shape}){back}", f"{v}_1 = _i.reshape({shape}){back}"]
    return src, launch, {"_sort_rows"}


for _op in ("sort", "topk", "kthvalue", "median", "nanmedian"):
    register(_op, Primitive("sort", TUNABLES, sort_kernel, tuple_out=True))
