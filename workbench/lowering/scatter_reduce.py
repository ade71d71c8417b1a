"""scatter_reduce and index_reduce (sum, prod, mean, amax, amin; include_self or not) as one pull kernel each.

Each output element gathers what lands on it instead of each source element pushing with atomics: a lane
owns one output coordinate c and walks the K positions of the index along `dim` (those that share c's other
coordinates for scatter_reduce, the K entries of the 1-d index for index_reduce), folding in the source values
whose index equals c[dim]. So every reduction works, prod and mean included, with no atomics, in a fixed
order: the index order, starting from self when include_self, which is the order of PyTorch's CPU loop. The
cost is numel(out) x K loads: right for OpInfo's and for segment-sized K, not for a long scatter into a short
output (a sorted-segment form would be the next step there).

Float dtypes (fp32, fp16, bf16) accumulate in fp32 and round once; nan propagates through amax/amin as in
PyTorch. scatter's legacy `reduce="multiply"`/`"add"` overloads (gather.py's scatter hands them here) are the
prod/sum cases with include_self.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_INIT = {"sum": "0.0", "mean": "0.0", "prod": "1.0", "amax": '-float("inf")', "amin": 'float("inf")'}
_LEGACY = {"multiply": "prod", "add": "sum"}


def _fold(kind: str, acc: str, v: str) -> str:
    if kind in ("sum", "mean"):
        return f"{acc} + {v}"
    if kind == "prod":
        return f"{acc} * {v}"
    op = "tl.maximum" if kind == "amax" else "tl.minimum"
    return f"tl.where({acc} != {acc}, {acc}, tl.where({v} != {v}, {v}, {op}({acc}, {v})))"


def pull_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    p = packet(node)
    x, dim, index, src = node.args[:4]
    if p == "scatter":  # scatter.reduce / scatter.value_reduce with reduce="multiply" | "add"
        reduce = node.kwargs.get("reduce") or node.args[4]
        kind, include_self = _LEGACY[reduce], True
    else:
        reduce = node.args[4] if len(node.args) > 4 else node.kwargs["reduce"]
        kind = reduce
        include_self = bool(node.args[5] if len(node.args) > 5 else node.kwargs.get("include_self", True))
    out_dt = dtype(node)
    if out_dt not in _FLOATS or kind not in _INIT:
        raise Unsupported(f"unsupported: {op_name(node)} with reduce={reduce!r} on {out_dt}")
    one_d = p == "index_reduce"
    r = max(val(x).dim(), 1)
    dim = dim % r
    scalar = not isinstance(src, fx.Node)
    if not one_d and val(index).dim() != val(x).dim():
        raise Unsupported(f"unsupported: {op_name(node)} with index of rank {val(index).dim()} for rank {r}")
    others = [d for d in range(r) if d != dim]
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n", "rem = offs"]
    for d in reversed(range(r)):
        L += [f"c{d} = rem % s{d}", f"rem = rem // s{d}"]
    L.append(f"base = tl.load(x_ptr + {' + '.join(f'c{d} * sx{d}' for d in range(r))}, mask=mask, other=0)"
             ".to(tl.float32)")
    if one_d:
        L += ["inside = mask"]
    else:  # the coordinates the index tensor covers (it may be smaller than out in every dim)
        L += ["inside = mask" + "".join(f" & (c{d} < is{d})" for d in others)]
    # offsets of the lane's row in index and src ("offs * 0" for a 1-d tensor: a block of pointers for the mask)
    ib = " + ".join(f"c{d} * si{d}" for d in others) or "offs * 0"
    sb = " + ".join(f"c{d} * ss{d}" for d in others) or "offs * 0"
    L += [f"acc = {'base' if include_self else 'tl.zeros_like(base) + ' + _INIT[kind]}",
          "cnt = tl.zeros_like(base)", "for k in range(0, K):"]
    if one_d:
        L += ["    j = tl.load(idx_ptr + k * si_k).to(tl.int64)", f"    hit = inside & (c{dim} == j)"]
    else:
        L += [f"    j = tl.load(idx_ptr + {ib} + k * si_k, mask=inside, other=-1).to(tl.int64)",
              f"    hit = inside & (c{dim} == j)"]
    if scalar:
        L.append("    v = tl.zeros_like(base) + sv")
    else:
        L.append(f"    v = tl.load(src_ptr + {sb} + k * ss_k, mask=hit, other=0).to(tl.float32)")
    L += [f"    acc = tl.where(hit, {_fold(kind, 'acc', 'v')}, acc)", "    cnt = cnt + hit.to(tl.float32)"]
    if kind == "mean":
        L.append(f"acc = acc / tl.maximum(cnt + {1.0 if include_self else 0.0}, 1.0)")
    L.append("acc = tl.where(cnt > 0, acc, base)")  # nothing landed: self, include_self or not
    used: set[str] = set()
    store = pw.narrow("acc", out_dt, used) if out_dt != torch.float32 else "acc"
    L.append("tl.store(out_ptr + offs, " + store + ", mask=mask)")
    params = ["out_ptr", "x_ptr", "idx_ptr", "sv" if scalar else "src_ptr", "n", "K", "si_k"] + \
        ([] if scalar else ["ss_k"]) + [f"s{d}" for d in range(r)] + [f"sx{d}" for d in range(r)]
    if not one_d:
        params += [f"is{d}" for d in others] + [f"si{d}" for d in others]
    if not scalar:
        params += [f"ss{d}" for d in others]
    what = "index_reduce" if one_d else "scatter_reduce"
    doc = f'    """{what} {kind} along dim {dim} (include_self={include_self}): each output pulls its matches."""'
    src_text = "\n".join([f"@triton.jit\ndef {name}({', '.join(params)}, BLOCK: tl.constexpr):", doc]
                         + ["    " + ln for ln in L]) + "\n"
    xv, iv, v = names[x], names[index], names[node]
    xs = f"{xv}.reshape([1])" if val(x).dim() == 0 else xv
    ivs = f"{iv}.reshape([1])" if val(index).dim() == 0 else iv
    args = [v, xs, ivs]
    if scalar:
        args.append(f"float({expr(src)})")
    else:
        sv_ = f"{names[src]}.reshape([1])" if val(src).dim() == 0 else names[src]
        args.append(sv_)
    args += [f"{v}.numel()", f"{ivs}.shape[{0 if one_d else dim}]", f"{ivs}.stride({0 if one_d else dim})"]
    if not scalar:
        args.append(f"{args[3]}.stride({dim})")
    args += [f"{xs}.shape[{d}]" for d in range(r)] + [f"{xs}.stride({d})" for d in range(r)]
    if not one_d:
        args += [f"{ivs}.shape[{d}]" for d in others] + [f"{ivs}.stride({d})" for d in others]
    if not scalar:
        args += [f"{args[3]}.stride({d})" for d in others]
    launch = [f"{v} = torch.empty({xv}.shape, dtype={torch_dtype(out_dt)}, device=dev)",
              f"if {v}.numel(): {name}[(triton.cdiv({v}.numel(), BLOCK),)]({', '.join(args)}, BLOCK=BLOCK, "
              "num_warps=NUM_WARPS)"]
    return src_text, launch, used


register("scatter_reduce", Primitive("scatter_reduce", TUNABLES, pull_kernel))
register("index_reduce", Primitive("scatter_reduce", TUNABLES, pull_kernel))


def put_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    """put(self, index, source, accumulate): self's flat (C-order) element e takes the source values whose index
    (negative ones wrapped) is e: the last one (PyTorch's CPU loop order), or their sum after self's value with
    accumulate. Pulled like scatter_reduce: a lane per element walks the K indices."""
    x, index, source = node.args[:3]
    accumulate = bool(node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False))
    out_dt = dtype(node)
    if accumulate and out_dt == torch.bool:
        raise Unsupported(f"unsupported: {op_name(node)} accumulating {out_dt}")
    acc_t = "tl.float32" if out_dt.is_floating_point else "tl.int64"
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n",
         "old = tl.load(x_ptr + offs, mask=mask, other=0)",
         f"acc = old.to({acc_t})" if accumulate else "acc = old", "hit_any = offs < 0",
         "for k in range(0, K):",
         "    j = tl.load(idx_ptr + k + offs * 0).to(tl.int64)", "    j = tl.where(j < 0, j + n, j)",
         "    hit = mask & (j == offs)",
         "    v = tl.load(src_ptr + k + offs * 0, mask=hit, other=0)"]
    L += [f"    acc = tl.where(hit, acc + v.to({acc_t}), acc)"] if accumulate else ["    acc = tl.where(hit, v, acc)"]
    L += ["    hit_any = hit_any | hit"]
    used: set[str] = set()
    if accumulate and out_dt == torch.bfloat16:
        res = pw.narrow("acc", out_dt, used)
    else:
        res = f"acc.to({pw.TL_DTYPE[out_dt]})"
    L.append(f"tl.store(out_ptr + offs, tl.where(hit_any, {res}, old), mask=mask)")
    src = "\n".join([f"@triton.jit\ndef {name}(out_ptr, x_ptr, idx_ptr, src_ptr, n, K, BLOCK: tl.constexpr):",
                     f'    """put (accumulate={accumulate}): each flat element pulls the sources indexed to it."""']
                    + ["    " + ln for ln in L]) + "\n"
    xv, v = names[x], names[node]
    launch = [f"_x = {xv}.contiguous()", f"_i = {names[index]}.reshape(-1).contiguous()",
              f"_s = {names[source]}.reshape(-1).contiguous()",
              f"{v} = torch.empty({xv}.shape, dtype={torch_dtype(out_dt)}, device=dev)",
              f"if _x.numel(): {name}[(triton.cdiv(_x.numel(), BLOCK),)]({v}, _x, _i, _s, _x.numel(), _i.numel(), "
              "BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return src, launch, used


register("put", Primitive("scatter_reduce", TUNABLES, put_kernel))
