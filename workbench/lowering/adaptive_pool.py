"""Adaptive max and average pooling over 2 or 3 spatial dims (adaptive_max_pool1d reaches here as 2-d).

Output o of a dim of input size I and output size O pools the window [floor(o*I/O), ceil((o+1)*I/O)),
as PyTorch's `start_index`/`end_index`. One lane per output element of the flattened [P, O...] output
(P: the leading batch and channel dims, which may be one dim or two); the window is a loop of AP_K<d> steps,
the longest window of that dim, computed on the host from the sizes (windows differ by one at most, so the
loop masks the steps past each lane's end). A runtime loop, not a static one: adaptive pooling to 1 x 1 of a
224 x 224 map would unroll 50,176 steps.
Max pooling also returns the flat index of the maximum in its input plane, as PyTorch: the first maximum,
replaced by any later nan (`val > max || isnan(val)`), starting from the window's first position.
Average pooling sums in fp32 and divides by the window's size, rounding once to the output dtype.
A pooled value of a batched input ([N, C, I...]) that only a cat along N or C reads is stored into its slice of
the cat's buffer (cat_chain.py; the slice's batch stride enters as `out_gap`), as pool.py's.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import cat_chain
from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("POOL_BLOCK", "NUM_WARPS")  # POOL_BLOCK is registered by pool.py
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def adaptive_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr,  # noqa: ANN001
                    into: cat_chain.Into | None = None) -> tuple[str, list[str], set[str]]:
    p = packet(node)
    is_max = p.startswith("adaptive_max")
    S = 3 if p.endswith("3d") else 2
    x = node.args[0]
    dt = dtype(x)
    if dt not in _FLOATS:
        raise Unsupported(f"unsupported: {op_name(node)} on {dt}")
    sp = list(range(S))
    used: set[str] = set()
    L = ["offs = tl.program_id(0).to(tl.int64) * POOL_BLOCK + tl.arange(0, POOL_BLOCK)", "mask = offs < TOTAL",
         "rest = offs"]
    for d in reversed(sp):
        L += [f"o{d} = rest % O{d}", f"rest = rest // O{d}",
              f"s{d} = (o{d} * I{d}) // O{d}", f"e{d} = ((o{d} + 1) * I{d} + O{d} - 1) // O{d}"]
    plane = " * ".join(f"I{d}" for d in sp)
    L.append(f"base = rest * ({plane})")
    # the value's offset: flat, or in its slice of a cat's buffer: a narrow of that contiguous buffer along N or C
    # keeps each plane contiguous and a sample's planes adjacent, so a sample starts out_gap elements further on
    # than in a fresh output (the offset spelled n * sn + c * sc + o kept 16 bytes of stack at sm_90, 3-d)
    out_off = "offs + (rest // C) * out_gap" if into is not None else "offs"
    first = "s0"
    for d in sp[1:]:
        first = f"({first}) * I{d} + s{d}"
    if is_max:
        L += ['best = tl.full([POOL_BLOCK], -float("inf"), tl.float32)', f"besti = {first}"]
    else:
        L.append("acc = tl.zeros([POOL_BLOCK], tl.float32)")
    ind = ""
    for d in sp:
        L.append(f"{ind}for k{d} in range(0, AP_K{d}):")
        ind += "    "
        L.append(f"{ind}i{d} = s{d} + k{d}")
    flat = "i0"
    for d in sp[1:]:
        flat = f"({flat}) * I{d} + i{d}"
    ok = " & ".join(["mask"] + [f"(i{d} < e{d})" for d in sp])
    L += [f"{ind}ok = {ok}", f"{ind}v = tl.load(x_ptr + base + {flat}, mask=ok, other=0.0).to(tl.float32)"]
    if is_max:
        L += [f"{ind}take = ok & ((v > best) | (v != v))", f"{ind}best = tl.where(take, v, best)",
              f"{ind}besti = tl.where(take, {flat}, besti)",
              f"tl.store(out_ptr + {out_off}, {pw.narrow('best', dt, used)}, mask=mask)",
              "tl.store(idx_ptr + offs, besti, mask=mask)"]
    else:
        L.append(f"{ind}acc += tl.where(ok, v, 0.0)")
        cnt = " * ".join(f"(e{d} - s{d})" for d in sp)
        L.append(f"tl.store(out_ptr + {out_off}, {pw.narrow(f'acc / ({cnt}).to(tl.float32)', dt, used)}, mask=mask)")
    params = ["x_ptr", "out_ptr"] + (["idx_ptr"] if is_max else []) + ["TOTAL"] + [f"I{d}" for d in sp] + \
        [f"O{d}" for d in sp] + [f"AP_K{d}" for d in sp] + (["C", "out_gap"] if into is not None else []) + \
        ["POOL_BLOCK: tl.constexpr"]
    kind = "max" if is_max else "avg"
    doc = f'    """adaptive {kind} pool{S}d of x viewed as [P, I...] (contiguous) to [P, O...]."""'
    src = "\n".join([f"@triton.jit\ndef {name}({', '.join(params)}):", doc] + ["    " + ln for ln in L]) + "\n"
    xv, v = names[x], names[node]
    launch = [f"_x = {xv}.contiguous()", f"_I = list(_x.shape[-{S}:])",
              f"_O = [int(_o) for _o in {expr(node.args[1])}]",
              # the longest window of each dim: ceil((o+1)I/O) - floor(oI/O) over o
              "_K = [max(((_o + 1) * _i + _n - 1) // _n - (_o * _i) // _n for _o in range(_n)) if _n else 1 "
              "for _i, _n in zip(_I, _O)]",
              f"_shape = [*_x.shape[:-{S}], *_O]"]
    outs = [f"{v}_0", f"{v}_1"] if is_max else [v]
    if into is None:
        launch.append(f"{outs[0]} = torch.empty(_shape, dtype={torch_dtype(dt)}, device=dev)")
    else:
        alloc, view = cat_chain.slice_lines(into, outs[0], names, "_shape")
        launch += alloc + [view]
    if is_max:
        launch.append(f"{outs[1]} = torch.empty(_shape, dtype=torch.int64, device=dev)")
    launch.append("_n = _numel(_shape)")
    strided = f"_shape[1], {outs[0]}.stride(0) - _shape[1] * {outs[0]}.stride(1), " if into is not None else ""
    launch.append(f"if _n: {name}[(triton.cdiv(_n, POOL_BLOCK),)](_x, {', '.join(outs)}, _n, *_I, *_O, *_K, "
                  f"{strided}POOL_BLOCK=POOL_BLOCK, num_warps=NUM_WARPS)")
    return src, launch, used


def _batched(node: fx.Node, dim: int) -> bool:
    """A cat along N or C of a [N, C, O...] output (an unbatched input's leading dim is one flat index)."""
    return dim <= 1 and val(node.args[0]).dim() == (3 if packet(node).endswith("3d") else 2) + 2


for _op in ("adaptive_max_pool2d", "adaptive_max_pool3d"):
    register(_op, Primitive("apool", TUNABLES, adaptive_kernel, tuple_out=True))
    cat_chain.register_store(_op, _batched)
register("_adaptive_avg_pool3d", Primitive("apool", TUNABLES, adaptive_kernel))
cat_chain.register_store("_adaptive_avg_pool3d", _batched)
