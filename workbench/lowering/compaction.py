"""Ops whose output size depends on the data: nonzero (so argwhere), nonzero_static, masked_select; and
masked_scatter, which needs the same ranks. Real Triton count / scan / scatter, the host reading one count.

Three kernels per op, over the flags (x != 0, or the broadcast mask) in C order:
1. `_count`: each program of BLOCK elements stores how many of its flags are set;
2. `_scan`: one program turns those counts into exclusive offsets (chunks of SCAN_CHUNK, the carry being the
   chunk scan's last column, as scan.py does for sm_90) and stores the total after them;
3. `_write`: each program ranks its set flags (a block cumsum plus its offset) and writes its elements there:
   the coordinates (nonzero), the value (masked_select), or for masked_scatter every element, the source's
   element of that rank where the mask is set.
The host reads the total (one int, `.item()`) to allocate nonzero's and masked_select's output; masked_scatter
and nonzero_static (a fixed size, rows past the total filled with fill_value on the device) read nothing.
nonzero's [count, ndim] result is stored column-major (as CUDA's nonzero does): the columns that
`as_tuple=True` returns are then contiguous, empty ones included.
"""
from __future__ import annotations

import torch.fx as fx

from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register, register_tunables

TUNABLES = ("BLOCK", "NUM_WARPS", "SCAN_CHUNK")
register_tunables({"SCAN_CHUNK": ([256, 1024, 4096], 1024)})

_SCAN = '''@triton.jit
def __KNAME___scan(cnt_ptr, off_ptr, nb, SCAN_CHUNK: tl.constexpr):
    """Exclusive prefix sum of the per-block counts, the total stored at off[nb]."""
    carry = tl.zeros([SCAN_CHUNK], tl.int64)
    for c0 in range(0, nb, SCAN_CHUNK):
        cols = c0 + tl.arange(0, SCAN_CHUNK)
        c = tl.load(cnt_ptr + cols, mask=cols < nb, other=0).to(tl.int64)
        inc = tl.cumsum(c, 0) + carry
        tl.store(off_ptr + cols, inc - c, mask=cols < nb)
        # every lane of the next carry is this chunk's last inclusive value
        carry = tl.zeros([SCAN_CHUNK], tl.int64) + tl.sum(tl.where(cols == c0 + SCAN_CHUNK - 1, inc, 0), 0)
    tl.store(off_ptr + nb + tl.arange(0, 1), tl.sum(tl.where(tl.arange(0, SCAN_CHUNK) == 0, carry, 0), 0)
             + tl.zeros([1], tl.int64))
'''


def _flags(kind: str) -> str:
    return "(tl.load(x_ptr + offs, mask=mask, other=0) != 0)" if kind == "nonzero" else \
        "(tl.load(m_ptr + offs, mask=mask, other=0) != 0)"


def compaction_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    p = packet(node)
    kind = "nonzero" if p in ("nonzero", "nonzero_static") else p
    x = node.args[0]
    if dtype(x).is_complex:
        raise Unsupported(f"unsupported: {op_name(node)} on {dtype(x)}")
    r = val(x).dim()
    v, xv = names[node], names[x]
    head = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n",
            f"f = {_flags(kind)} & mask"]
    count = (f"@triton.jit\ndef __KNAME___count({'x_ptr' if kind == 'nonzero' else 'm_ptr'}, cnt_ptr, n, "
             "BLOCK: tl.constexpr):\n    \"\"\"How many flags of this block are set.\"\"\"\n"
             + "".join(f"    {ln}\n" for ln in head)
             + "    tl.store(cnt_ptr + tl.program_id(0) + tl.arange(0, 1), tl.sum(f.to(tl.int32), 0) "
               "+ tl.zeros([1], tl.int32))\n")
    rank = ["pos = tl.load(off_ptr + tl.program_id(0)) + tl.cumsum(f.to(tl.int64), 0) - f.to(tl.int64)"]
    launch: list[str] = []
    if kind == "nonzero":
        static = p == "nonzero_static"
        size = node.kwargs.get("size", node.args[1] if len(node.args) > 1 else None)
        fill = node.kwargs.get("fill_value", node.args[2] if len(node.args) > 2 else -1)
        body = head + rank + ["rem = offs"]
        for d in reversed(range(r)):
            body += [f"c{d} = rem % s{d}", f"rem = rem // s{d}"]
        keep = "f & (pos < limit)" if static else "f"
        body += [f"tl.store(out_ptr + pos + {d} * ocol, c{d}, mask={keep})" for d in range(r)]
        sizes = "".join(f", s{d}" for d in range(r))
        write = (f"@triton.jit\ndef __KNAME___write(x_ptr, off_ptr, out_ptr, n, limit, ocol{sizes}, "
                 "BLOCK: tl.constexpr):\n"
                 f'    """The coordinates of each nonzero element at its rank."""\n'
                 + "".join(f"    {ln}\n" for ln in body))
        src = count + "\n\n" + _SCAN + "\n\n" + write
        xs = f"{xv}.reshape([1])" if r == 0 else f"{xv}.contiguous()"
        launch += [f"_x = {xs}", "_n = _x.numel()", "_nb = triton.cdiv(_n, BLOCK)",
                   "_cnt = torch.empty([max(_nb, 1)], dtype=torch.int32, device=dev)",
                   "_off = torch.zeros([_nb + 1], dtype=torch.int64, device=dev)",
                   "if _n: __KNAME___count[(_nb,)](_x, _cnt, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)",
                   "if _n: __KNAME___scan[(1,)](_cnt, _off, _nb, SCAN_CHUNK=SCAN_CHUNK)"]
        shape_args = "".join(f", _x.shape[{d}]" for d in range(r))
        if static:
            if not isinstance(size, int):
                raise Unsupported(f"unsupported: {op_name(node)} with a symbolic size")
            launch += [f"{v} = torch.empty([{r}, {size}], dtype=torch.int64, device=dev).t()",
                       f"if {size} * {r}: __KNAME___fill[(triton.cdiv({size} * {r}, BLOCK),)]({v}, _off, _nb, "
                       f"{size} * {r}, {size}, {int(fill)}, BLOCK=BLOCK, num_warps=NUM_WARPS)",
                       f"if _n: __KNAME___write[(_nb,)](_x, _off, {v}, _n, {size}, {size}{shape_args}, BLOCK=BLOCK, "
                       "num_warps=NUM_WARPS)"]
            src += "\n\n" + FILL
        else:
            launch += ["_total = int(_off[_nb].item()) if _n else 0",  # the one value the host reads
                       f"{v} = torch.empty([{r}, _total], dtype=torch.int64, device=dev).t()",
                       f"if _total: __KNAME___write[(_nb,)](_x, _off, {v}, _n, _total, _total{shape_args}, "
                       "BLOCK=BLOCK, num_warps=NUM_WARPS)"]
        return src, launch, set()
    m = node.args[1]
    if kind == "masked_select":
        body = head + rank + ["tl.store(out_ptr + pos, tl.load(x_ptr + offs, mask=f), mask=f)"]
        write = ("@triton.jit\ndef __KNAME___write(x_ptr, m_ptr, off_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
                 '    """Each selected element at its rank."""\n' + "".join(f"    {ln}\n" for ln in body))
        launch += [f"_shape = _bshape({xv}.shape, {names[m]}.shape)",
                   f"_x = {xv}.expand(_shape).contiguous()", f"_m = {names[m]}.expand(_shape).contiguous()",
                   "_n = _x.numel()", "_nb = triton.cdiv(_n, BLOCK)",
                   "_cnt = torch.empty([max(_nb, 1)], dtype=torch.int32, device=dev)",
                   "_off = torch.zeros([_nb + 1], dtype=torch.int64, device=dev)",
                   "if _n: __KNAME___count[(_nb,)](_m, _cnt, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)",
                   "if _n: __KNAME___scan[(1,)](_cnt, _off, _nb, SCAN_CHUNK=SCAN_CHUNK)",
                   "_total = int(_off[_nb].item()) if _n else 0",
                   f"{v} = torch.empty([_total], dtype={torch_dtype(dtype(node))}, device=dev)",
                   f"if _total: __KNAME___write[(_nb,)](_x, _m, _off, {v}, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
        return count + "\n\n" + _SCAN + "\n\n" + write, launch, set()
    # masked_scatter(x, mask, source): the k-th set flag takes source.flatten()[k]
    s = node.args[2]
    body = head + rank + ["src = tl.load(s_ptr + pos, mask=f, other=0)",
                          "old = tl.load(x_ptr + offs, mask=mask, other=0)",
                          "tl.store(out_ptr + offs, tl.where(f, src, old), mask=mask)"]
    write = ("@triton.jit\ndef __KNAME___write(x_ptr, m_ptr, s_ptr, off_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
             '    """Each element: the source element of its rank where the mask is set, else x."""\n'
             + "".join(f"    {ln}\n" for ln in body))
    launch += [f"_shape = _bshape({xv}.shape, {names[m]}.shape)",
               f"_x = {xv}.expand(_shape).contiguous()", f"_m = {names[m]}.expand(_shape).contiguous()",
               f"_s = {names[s]}.reshape(-1).contiguous()",
               "_n = _x.numel()", "_nb = triton.cdiv(_n, BLOCK)",
               "_cnt = torch.empty([max(_nb, 1)], dtype=torch.int32, device=dev)",
               "_off = torch.zeros([_nb + 1], dtype=torch.int64, device=dev)",
               f"{v} = torch.empty(_shape, dtype={torch_dtype(dtype(node))}, device=dev)",
               "if _n: __KNAME___count[(_nb,)](_m, _cnt, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)",
               "if _n: __KNAME___scan[(1,)](_cnt, _off, _nb, SCAN_CHUNK=SCAN_CHUNK)",
               f"if _n: __KNAME___write[(_nb,)](_x, _m, _s, _off, {v}, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return count + "\n\n" + _SCAN + "\n\n" + write, launch, set()


FILL = '''@triton.jit
def __KNAME___fill(out_ptr, off_ptr, nb, n, rows, fill, BLOCK: tl.constexpr):
    """nonzero_static's rows past the count: fill_value (the total read on the device; column-major out)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    total = tl.load(off_ptr + nb)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], tl.int64) + fill, mask=(offs < n) & (offs % rows >= total))
'''

for _op in ("nonzero", "nonzero_static", "masked_select", "masked_scatter"):
    register(_op, Primitive("compact", TUNABLES, compaction_kernel))
