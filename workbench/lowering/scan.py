"""cumsum and cumprod along one dim; cummax and cummin (values and indices).

The scanned dim is moved last and the input viewed as [M, N]; a program owns SCAN_BLOCK_M rows and
walks N in SCAN_BLOCK_N chunks: `tl.cumsum` (or `tl.cumprod`) of the chunk plus the carry of the chunks
before it. Accumulates in fp32 (int64 for integers, as torch does) and writes a contiguous [M, N]
result that the forward views back into the input's dim order.
cummax/cummin scan (value, index) pairs with `tl.associative_scan`; the combine takes the later
element on ties and on a nan (a nan then stays, its index moving to each later nan), as torch's CPU
kernel does; the carry is the last column of the previous chunk.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.families import Space, register_space
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register, register_helper, register_tunables

TUNABLES = ("SCAN_BLOCK_M", "SCAN_BLOCK_N", "NUM_WARPS")
DEFAULTS = {"SCAN_BLOCK_M": ([1, 2, 4, 8], 4), "SCAN_BLOCK_N": ([64, 128, 256, 512, 1024], 256)}
register_tunables(DEFAULTS)
register_space(Space("scan", ("SCAN_BLOCK_M", "SCAN_BLOCK_N"),
                     ((1, 1024), (2, 512), (8, 128), (1, 512), (4, 512), (2, 1024)), rank=30))


def scan_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    r = max(val(x).dim(), 1)
    dim = node.args[1] % r
    prod = packet(node) == "cumprod"
    out_dt = dtype(node)
    acc_dt = pw.compute_dtype(out_dt) if out_dt.is_floating_point else torch.int64
    acc = pw.TL_DTYPE[acc_dt]
    used: set[str] = set()
    L = ["rows = tl.program_id(0).to(tl.int64) * SCAN_BLOCK_M + tl.arange(0, SCAN_BLOCK_M)", "rmask = rows < M",
         f"carry = tl.full([SCAN_BLOCK_M], {1 if prod else 0}, {acc})",
         "for n0 in range(0, N, SCAN_BLOCK_N):",
         "    cols = n0 + tl.arange(0, SCAN_BLOCK_N)",
         "    m = rmask[:, None] & (cols[None, :] < N)",
         f"    v = tl.load(x_ptr + rows[:, None] * x_sm + cols[None, :] * x_sn, mask=m, other={1 if prod else 0})"
         f".to({acc})"]
    # the carry is the last column of the chunk's scan, for both: a loop-carried reduction (`carry +
    # tl.sum(v)`, or tl.reduce with a custom combine) stops sm_90's compile in TritonGPUOptimizeThreadLocality
    # (`PassManager::run failed`, seen on the H200 for cumsum and cumprod)
    scan = "tl.cumprod(v, axis=1) * carry[:, None]" if prod else "tl.cumsum(v, axis=1) + carry[:, None]"
    L += [f"    c = {scan}",
          "    carry = tl.sum(tl.where(cols[None, :] == n0 + SCAN_BLOCK_N - 1, c, 0), axis=1)"]
    store = pw.narrow("c", out_dt, used) if acc_dt == torch.float32 and out_dt != torch.float32 else \
        f"c.to({pw.TL_DTYPE[out_dt]})"
    L.append(f"    tl.store(out_ptr + rows[:, None] * N + cols[None, :], {store}, mask=m)")
    doc = f'    """{packet(node)} along the last axis of x viewed as [M, N], carried across chunks."""'
    sig = "x_ptr, out_ptr, M, N, x_sm, x_sn, SCAN_BLOCK_M: tl.constexpr, SCAN_BLOCK_N: tl.constexpr"
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + ["    " + ln for ln in L]) + "\n"
    xv, v = names[x], names[node]
    perm = [d for d in range(r) if d != dim] + [dim]
    inv = [perm.index(d) for d in range(r)]
    launch = [f"_xs = {xv}.reshape([1]) if {xv}.dim() == 0 else {xv}",
              f"_xp = _xs.permute({perm})", "_x = _xp.reshape(_numel(_xp.shape[:-1]), _xp.shape[-1])",
              "_M, _N = _x.shape",
              f"_o = torch.empty([_M, _N], dtype={torch_dtype(out_dt)}, device=dev)",
              f"if _M and _N: {name}[(triton.cdiv(_M, SCAN_BLOCK_M),)](_x, _o, _M, _N, *_x.stride(), "
              "SCAN_BLOCK_M=SCAN_BLOCK_M, SCAN_BLOCK_N=SCAN_BLOCK_N, num_warps=NUM_WARPS)",
              f"{v} = _o.reshape(_xp.shape).permute({inv}).reshape({xv}.shape)"]
    return src, launch, used


def combine_source(kind: str) -> str:
    """The (value, index) combine of cummax ('max') or cummin ('min'): b (the later) wins ties and nans."""
    op = ">=" if kind == "max" else "<="
    return (f"@triton.jit\ndef _cum{kind}_combine(va, ia, vb, ib):\n"
            f"    take = (vb != vb) | (vb {op} va)\n"
            "    return tl.where(take, vb, va), tl.where(take, ib, ia)\n")


def _launch(name: str, x: str, r: int, dim: int, outs: list[tuple[str, str]]) -> list[str]:
    """Permute the scanned dim last, view as [M, N], launch, and view each [M, N] output back."""
    perm = [d for d in range(r) if d != dim] + [dim]
    inv = [perm.index(d) for d in range(r)]
    lines = [f"_xs = {x}.reshape([1]) if {x}.dim() == 0 else {x}",
             f"_xp = _xs.permute({perm})", "_x = _xp.reshape(_numel(_xp.shape[:-1]), _xp.shape[-1])",
             "_M, _N = _x.shape"]
    lines += [f"_o{k} = torch.empty([_M, _N], dtype={dt}, device=dev)" for k, (_, dt) in enumerate(outs)]
    ptrs = ", ".join(f"_o{k}" for k in range(len(outs)))
    lines.append(f"if _M and _N: {name}[(triton.cdiv(_M, SCAN_BLOCK_M),)](_x, {ptrs}, _M, _N, *_x.stride(), "
                 "SCAN_BLOCK_M=SCAN_BLOCK_M, SCAN_BLOCK_N=SCAN_BLOCK_N, num_warps=NUM_WARPS)")
    lines += [f"{v} = _o{k}.reshape(_xp.shape).permute({inv}).reshape({x}.shape)" for k, (v, _) in enumerate(outs)]
    return lines


def extreme_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    r = max(val(x).dim(), 1)
    dim = node.args[1] % r
    kind = packet(node).removeprefix("cum")
    dt = dtype(x)
    if dt == torch.bool or dt.is_complex:
        raise Unsupported(f"unsupported: {op_name(node)} on {dt}")
    acc_dt = pw.compute_dtype(dt)
    acc = pw.TL_DTYPE[acc_dt]
    if acc_dt.is_floating_point:
        ident = '-float("inf")' if kind == "max" else 'float("inf")'
    else:
        info = torch.iinfo(acc_dt)
        ident = str(info.min if kind == "max" else info.max)
    comb = f"_cum{kind}_combine"
    L = ["rows = tl.program_id(0).to(tl.int64) * SCAN_BLOCK_M + tl.arange(0, SCAN_BLOCK_M)", "rmask = rows < M",
         f"carry_v = tl.full([SCAN_BLOCK_M], {ident}, {acc})", "carry_i = tl.zeros([SCAN_BLOCK_M], tl.int64)",
         "for n0 in range(0, N, SCAN_BLOCK_N):",
         "    cols = n0 + tl.arange(0, SCAN_BLOCK_N)",
         "    m = rmask[:, None] & (cols[None, :] < N)",
         f"    v = tl.load(x_ptr + rows[:, None] * x_sm + cols[None, :] * x_sn, mask=m, other={ident}).to({acc})",
         "    i = tl.zeros([SCAN_BLOCK_M, SCAN_BLOCK_N], tl.int64) + cols[None, :]",
         f"    cv, ci = tl.associative_scan((v, i), 1, {comb})",
         f"    cv, ci = {comb}(carry_v[:, None], carry_i[:, None], cv, ci)",
         f"    tl.store(vals_ptr + rows[:, None] * N + cols[None, :], cv.to({pw.TL_DTYPE[dt]}), mask=m)",
         "    tl.store(idx_ptr + rows[:, None] * N + cols[None, :], ci, mask=m)",
         "    last = cols[None, :] == n0 + SCAN_BLOCK_N - 1",
         "    carry_v = tl.sum(tl.where(last, cv, 0), axis=1)",
         "    carry_i = tl.sum(tl.where(last, ci, 0), axis=1)"]
    doc = f'    """cum{kind} (values, indices) along the last axis of x viewed as [M, N], carried across chunks."""'
    sig = "x_ptr, vals_ptr, idx_ptr, M, N, x_sm, x_sn, SCAN_BLOCK_M: tl.constexpr, SCAN_BLOCK_N: tl.constexpr"
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + ["    " + ln for ln in L]) + "\n"
    v = names[node]
    launch = _launch(name, names[x], r, dim, [(f"{v}_0", torch_dtype(dt)), (f"{v}_1", "torch.int64")])
    return src, launch, {comb}


for _kind in ("max", "min"):
    register_helper(f"_cum{_kind}_combine", combine_source(_kind))
for _op in ("cumsum", "cumprod"):
    register(_op, Primitive("scan", TUNABLES, scan_kernel))
for _op in ("cummax", "cummin"):
    register(_op, Primitive("scan", TUNABLES, extreme_kernel, tuple_out=True))
