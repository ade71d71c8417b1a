"""Integer matmul: mm and bmm of two integer tensors (int8 ... int64), exact, with the fused epilogue.

`tl.dot` takes no int64 operands (and its int8 path accumulates in int32), so this family's kernel is the
FMA form: an [IMM_BLOCK_M, IMM_BLOCK_K] tile of A and an [IMM_BLOCK_K, IMM_BLOCK_N] tile of B, widened to
int64, multiplied as a broadcast [M, K, N] product and summed over K (`tl.sum(axis=1)`) into an int64
accumulator. Integer addition and multiplication wrap modulo 2**64 in any order, and two's complement
truncation is a ring map, so the int64 accumulator cast to the output dtype is what ATen's CPU gemm stores
(its accumulator is the dtype itself: an int32 mm wraps modulo 2**32 as the low half of ours does), bit for
bit, whatever the K order or split. The epilogue (addmm's `beta * bias + alpha * mm`, after
`graph.rewrite_addmm`) reads the product as the output dtype, as eager does.

The family claims an mm/bmm anchor whose operands are integers before the float matmul family
(`templates.py`, rank 40) does: `rank=35`. No split-K: exact sums have no chain length to shorten, and the
tiles of OpInfo's and KernelBench's integer products fill a GPU or are tiny. On the GPU, int64 multiplies are
emulated by 32-bit IMADs: this is a correct kernel, not a fast one (untimed).
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import build_body, store_lines, torch_dtype
from workbench.lowering.families import Family, Space, register_family, register_space
from workbench.lowering.graph import dtype, packet, rank
from workbench.lowering.partition import Group
from workbench.lowering.primitives import register_tunables
from workbench.lowering.templates import _input_args, indent, mm_shape_lines

INTS = frozenset({torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64})

TUNABLE_DEFAULTS = {
    "IMM_BLOCK_M": ([16, 32, 64], 32),
    "IMM_BLOCK_N": ([16, 32, 64], 32),
    # the [M, K, N] product lives in registers: 32 x 8 x 32 int64 is 128 registers a thread on 4 warps
    "IMM_BLOCK_K": ([2, 4, 8, 16], 8),
    "IMM_NUM_WARPS": ([2, 4, 8], 4),
}
register_tunables(TUNABLE_DEFAULTS)


def _is_int_matmul(node: fx.Node) -> bool:
    if node.op != "call_function" or packet(node) not in ("mm", "bmm"):
        return False
    a, b = node.args[:2]
    return isinstance(a, fx.Node) and isinstance(b, fx.Node) and dtype(a) in INTS and dtype(b) in INTS


def int_matmul_kernel(name: str, group: Group, mat: list[fx.Node], names: dict[fx.Node, str],
                      precision: str) -> tuple[str, list[str], set[str]]:
    """C[b] = A[b] @ B[b] for integer A, B ([B, M, K] @ [B, K, N]; mm is B = 1): one program per
    IMM_BLOCK_M x IMM_BLOCK_N tile, K walked IMM_BLOCK_K at a time, int64 accumulator, the epilogue on the
    tile cast to the output dtype."""
    del precision  # no tl.dot
    anchor = group.anchor
    assert anchor is not None
    a, b = anchor.args[:2]
    batched = rank(anchor) == 3
    out_dt = dtype(anchor)
    res = pw.Val("acc" if out_dt == torch.int64 else "acc_o", out_dt)
    idx = (["pid_b"] if batched else []) + ["rm[:, None]", "rn[None, :]"]
    body = build_body(group, [], idx, "cmask", "(rm[:, None] * 0 + rn[None, :] * 0)", {anchor: res})
    body.outputs = ([anchor] if anchor in mat else []) + [n for n in mat if n is not anchor]
    body.values[anchor] = res  # type: ignore[attr-defined]
    lines = ["grid_n = tl.cdiv(N, IMM_BLOCK_N)",
             "pid_m = tl.program_id(0) // grid_n", "pid_n = tl.program_id(0) % grid_n",
             "pid_b = tl.program_id(1).to(tl.int64)",
             "rm = pid_m * IMM_BLOCK_M + tl.arange(0, IMM_BLOCK_M)",
             "rn = pid_n * IMM_BLOCK_N + tl.arange(0, IMM_BLOCK_N)",
             "rk = tl.arange(0, IMM_BLOCK_K)",
             "cmask = (rm[:, None] < M) & (rn[None, :] < N)",
             "a_ptrs = a_ptr + pid_b * a_sb + rm[:, None].to(tl.int64) * a_sm + rk[None, :] * a_sk",
             "b_ptrs = b_ptr + pid_b * b_sb + rk[:, None] * b_sk + rn[None, :].to(tl.int64) * b_sn",
             "acc = tl.zeros([IMM_BLOCK_M, IMM_BLOCK_N], tl.int64)",
             "for k0 in range(0, K, IMM_BLOCK_K):",
             "    a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0).to(tl.int64)",
             "    b = tl.load(b_ptrs, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0).to(tl.int64)",
             "    # wraps modulo 2**64 as the CPU's gemm does (in its own width, which the cast below keeps)",
             "    acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)",
             "    a_ptrs += IMM_BLOCK_K * a_sk",
             "    b_ptrs += IMM_BLOCK_K * b_sk"]
    if out_dt != torch.int64:
        lines.append(f"acc_o = acc.to({pw.TL_DTYPE[out_dt]})  # two's complement truncation: eager's wrap")
    lines += body.lines + store_lines(body, "pid_b * M * N + rm[:, None].to(tl.int64) * N + rn[None, :]", "cmask")
    r = 3 if batched else 2
    sig = ", ".join(["a_ptr", "b_ptr"] + [f"out{j}_ptr" for j in range(len(body.outputs))] +
                    [f"in{k}_ptr" for k in range(len(body.inputs))] + [f"sc{k}" for k in range(len(body.scalars))] +
                    ["M", "N", "K", "a_sb", "a_sm", "a_sk", "b_sb", "b_sk", "b_sn"] +
                    [f"in{k}_s{d}" for k in range(len(body.inputs)) for d in range(r)] +
                    ["IMM_BLOCK_M: tl.constexpr", "IMM_BLOCK_N: tl.constexpr", "IMM_BLOCK_K: tl.constexpr"])
    doc = (f'    """integer {"bmm" if batched else "mm"} ({str(dtype(a)).removeprefix("torch.")}), int64 '
           f'accumulator; epilogue: {", ".join(n.name for n in group.nodes) or "none"}."""')
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + indent(lines)) + "\n"
    av, bv = names[a], names[b]
    launch = mm_shape_lines(av, bv, batched)
    outs = [names[n] for n in body.outputs]
    launch += [f"{o} = torch.empty(_shape, dtype={torch_dtype(dtype(n))}, device=dev)"
               for o, n in zip(outs, body.outputs)]
    prep, ptrs, strd = _input_args(body, names, "_shape")
    launch += prep
    args = [av, bv] + outs + ptrs + [names[s] for s in body.scalars] + \
        ["_M", "_N", "_K", "_sa[0]", "_sa[1]", "_sa[2]", "_sb[0]", "_sb[1]", "_sb[2]"] + strd
    # a thin operand (a matrix-vector product) gets a tile no wider than it needs
    launch += ["_bm = min(IMM_BLOCK_M, max(16, triton.next_power_of_2(_M)))",
               "_bn = min(IMM_BLOCK_N, max(16, triton.next_power_of_2(_N)))",
               f"if _M and _N and _B: {name}[(triton.cdiv(_M, _bm) * triton.cdiv(_N, _bn), _B)]("
               f"{', '.join(args)}, IMM_BLOCK_M=_bm, IMM_BLOCK_N=_bn, IMM_BLOCK_K=IMM_BLOCK_K, "
               "num_warps=IMM_NUM_WARPS)"]
    return src, launch, body.helpers


register_family(Family("int_matmul", "int_matmul", int_matmul_kernel, tuple(TUNABLE_DEFAULTS),
                       anchor=_is_int_matmul, rank=35))
register_space(Space("int_matmul", ("IMM_BLOCK_M", "IMM_BLOCK_N", "IMM_BLOCK_K", "IMM_NUM_WARPS"),
                     ((32, 32, 8, 4), (64, 64, 4, 8), (64, 32, 8, 8), (32, 64, 4, 4), (16, 32, 16, 4),
                      (64, 64, 2, 4), (32, 32, 4, 2), (16, 16, 16, 2)), rank=75))
