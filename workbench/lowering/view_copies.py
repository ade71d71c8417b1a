"""The `*_copy` variants of view ops (view_copy, permute_copy, narrow_copy, as_strided_copy, unbind_copy) and
as_strided_scatter, as one strided copy kernel.

The view itself is glue (`x.view(...)`, `x.permute(...)`, `x.as_strided(...)`: no data moves); the kernel then
reads that view through its strides and writes a fresh tensor: each lane unravels its flat index over the
view's sizes (rank unrolled at lowering time) and dots the coordinates with the source's and the
destination's strides. as_strided_scatter is two such copies: x into a fresh tensor laid out as x's clone
would be (`empty_like`), then src into the `as_strided` view of it. unbind_copy returns a list of copies, one
per index of its dim (the list's length is the dim's size at run time).
"""
from __future__ import annotations

import torch.fx as fx

from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")


def copy_source(r: int) -> str:
    """`__KNAME___copy<r>(src, dst, n, sizes, src strides, dst strides)` for views of rank r (0-d as rank 1)."""
    r = max(r, 1)
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n", "rem = offs"]
    for d in reversed(range(r)):
        L += [f"c{d} = rem % s{d}", f"rem = rem // s{d}"]
    a = " + ".join(f"c{d} * a{d}" for d in range(r))
    b = " + ".join(f"c{d} * b{d}" for d in range(r))
    L.append(f"tl.store(dst_ptr + {b}, tl.load(src_ptr + {a}, mask=mask).to(dst_ptr.dtype.element_ty), mask=mask)")
    params = ", ".join([f"s{d}" for d in range(r)] + [f"a{d}" for d in range(r)] + [f"b{d}" for d in range(r)])
    return (f"@triton.jit\ndef __KNAME___copy{r}(src_ptr, dst_ptr, n, {params}, BLOCK: tl.constexpr):\n"
            f'    """dst[c] = src[c] over a rank-{r} index space, both read through their strides."""\n'
            + "".join(f"    {ln}\n" for ln in L))


def copy_launch(src: str, dst: str, r: int) -> str:
    """One launch copying tensor expression `src` into `dst` (same shape), both possibly strided."""
    if r == 0:
        src, dst = f"{src}.reshape([1])", f"{dst}.reshape([1])"
    return (f"if {dst}.numel(): __KNAME___copy{max(r, 1)}[(triton.cdiv({dst}.numel(), BLOCK),)]({src}, {dst}, "
            f"{dst}.numel(), *{dst}.shape, *{src}.stride(), *{dst}.stride(), BLOCK=BLOCK, num_warps=NUM_WARPS)")


def view_copy_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    p = packet(node)
    x = node.args[0]
    xv, v = names[x], names[node]
    rest = ", ".join(expr(a) for a in node.args[1:])
    kw = ", ".join(f"{k}={expr(a)}" for k, a in node.kwargs.items())
    call = ", ".join(s for s in (rest, kw) if s)
    if p == "unbind_copy":
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        r = val(x).dim() - 1
        launch = [f"{v} = []", f"for _t in {xv}.unbind({expr(dim)}):",
                  f"    _o = torch.empty(_t.shape, dtype={torch_dtype(dtype(x))}, device=dev)",
                  "    " + copy_launch("_t", "_o", r), f"    {v}.append(_o)"]
        return copy_source(r), launch, set()
    if p == "as_strided_scatter":
        src = node.args[1]
        geometry = ", ".join(expr(a) for a in node.args[2:])
        r_out, r_src = val(node).dim(), val(src).dim()
        launch = [f"{v} = torch.empty_like({xv})", copy_launch(xv, v, r_out),
                  f"_view = {v}.as_strided({geometry})", copy_launch(names[src], "_view", r_src)]
        srcs = copy_source(r_out) if max(r_out, 1) == max(r_src, 1) else \
            copy_source(r_out) + "\n\n" + copy_source(r_src)
        return srcs, launch, set()
    method = {"view_copy": "view", "permute_copy": "permute", "narrow_copy": "narrow",
              "as_strided_copy": "as_strided"}[p]
    if p == "view_copy" and node.args[1:] and not isinstance(node.args[1], (list, tuple)):
        raise Unsupported(f"unsupported: {op_name(node)} to a dtype")
    r = val(node).dim()
    launch = [f"_view = {xv}.{method}({call})",
              f"{v} = torch.empty(_view.shape, dtype={torch_dtype(dtype(node))}, device=dev)",
              copy_launch("_view", v, r)]
    return copy_source(r), launch, set()


for _op in ("view_copy", "permute_copy", "narrow_copy", "as_strided_copy", "unbind_copy", "as_strided_scatter"):
    register(_op, Primitive("view_copy", TUNABLES, view_copy_kernel))
