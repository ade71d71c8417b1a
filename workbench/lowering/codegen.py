"""Turn a partitioned graph into one standalone candidate module.

The forward is a straight-line transcription of the graph: Python arithmetic for symbolic sizes
(`x.shape[0] * 2`), glue ops (views, permutes, expands, allocations) as tensor methods, and one
kernel launch per group. Kernels are deduplicated by text, so two identical fused chains share one
@triton.jit function.
"""
from __future__ import annotations

import logging
import math
import operator
import re
from typing import Any

import torch
import torch.fx as fx

from workbench.lowering import cat_chain, copies, families, glue, primitives
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import SYM_BINOPS, is_tensor_node, op_name, packet, val
from workbench.lowering.partition import Group, outside_users, partition

log = logging.getLogger(__name__)

# a kernel's docstring: the first string after its `def ...:` line
_DOCSTRING = re.compile(r'(?<=\):\n)[ \t]+""".*?"""\n', re.DOTALL)

RUNTIME_HELPERS = '''def _bshape(*shapes):
    """Broadcast shape of several shapes (torch's rules), in plain Python."""
    r = max((len(s) for s in shapes), default=0)
    out = [1] * r
    for s in shapes:
        for i, d in enumerate(s):
            j = r - len(s) + i
            if d != 1:
                out[j] = d
    return out


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _idx64(n, *ts):
    """Whether a flat index below n, or an element offset into one of the tensors ts, can pass 2**31."""
    return n >= 2 ** 31 or any(sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()) if s) >= 2 ** 31
                               for t in ts)


def _red_view(xp, k):
    """x (reduced dims last, k kept dims first) as [M, N] without a copy where its strides allow: (tensor, M,
    N, stride of M // M2, N2, stride of N // N2, stride of N % N2, N in two groups?, M2, stride of M % M2, M
    in two groups?); a copy otherwise."""
    def merge(dims):
        out = []
        for size, st in dims:
            if size == 1:
                continue
            if out and out[-1][1] == size * st:
                out[-1] = (out[-1][0] * size, st)
            else:
                out.append((size, st))
        # no dims on a side (a full reduction's rows): stride 0, which Triton marks divisible by 16; a stride
        # of 1 made `rows * x_sm` unaligned and every load of 94_MSELoss a scalar one
        return out or [(1, 0)]
    m, n = _numel(xp.shape[:k]), _numel(xp.shape[k:])
    kept, red = merge(zip(xp.shape[:k], xp.stride()[:k])), merge(zip(xp.shape[k:], xp.stride()[k:]))
    if len(kept) > 2 or len(red) > 2:
        x = xp.reshape(m, n)
        return x, m, n, x.stride(0), 1, x.stride(1), 0, False, 1, 0, False
    km = (kept[0][1], 1, 0, False) if len(kept) == 1 else (kept[0][1], kept[1][0], kept[1][1], True)
    if len(red) == 1:
        return xp, m, n, km[0], 1, red[0][1], 0, False, *km[1:]
    return xp, m, n, km[0], red[1][0], red[0][1], red[1][1], True, *km[1:]


def _coalesce(shape, *ts):
    """(sizes, strides of each of ts) of a pointwise kernel's shape with adjacent dims merged where every view ts
    (broadcast to shape) allows it, the merged dims first and 1s after: the rank stays, and a size or stride of
    1 is a constant to Triton, so the kernel splits its flat index only at the dims the layouts need."""
    groups = []
    for d, size in enumerate(shape):
        if size == 1:
            continue
        sts = [t.stride(d) for t in ts]
        if groups and all(g == size * s for g, s in zip(groups[-1][1], sts)):
            groups[-1] = (groups[-1][0] * size, sts)
        else:
            groups.append((size, sts))
    pad = len(shape) - len(groups)
    return ([g[0] for g in groups] + [1] * pad,
            [tuple(g[1][k] for g in groups) + (0,) * pad for k in range(len(ts))])


def _swizzle(sizes, strides, block):
    """(rows, whether a pointwise kernel's programs walk its dim 0 fastest) for coalesced `sizes` and each
    operand's `strides` (`_coalesce`): when an operand broadcast along dim 0 holds 2**20 elements or more of its
    own (L2 cannot keep it from one row to the next) and a row is a whole number of blocks; (1, False) else."""
    n0, rest = sizes[0], _numel(sizes[1:])
    if n0 < 2 or rest % block:
        return 1, False
    for st in strides:
        if st[0] == 0 and _numel([s for s, t in zip(sizes[1:], st[1:]) if t]) >= 2 ** 20:
            return n0, True
    return 1, False


def _red_views(k, *xps):
    """Several tensors of one shape (reduced dims last, k kept dims first; a reduction's prologue inputs, broadcast)
    as [M, N] with one grouping of their dims shared by all: (M, N, N2, N in two groups?, M2, M in two groups?,
    [(tensor, stride of M // M2, stride of N // N2, stride of N % N2, stride of M % M2) per tensor]); each read
    in place when both sides merge into at most two stride groups, copied otherwise."""
    shape = list(xps[0].shape)

    def merge(lo, hi):
        out = []
        for d in range(lo, hi):
            if shape[d] == 1:
                continue
            sts = [t.stride(d) for t in xps]
            if out and all(g == shape[d] * s for g, s in zip(out[-1][1], sts)):
                out[-1] = (out[-1][0] * shape[d], sts)
            else:
                out.append((shape[d], sts))
        return out or [(1, [0] * len(xps))]  # stride 0 on an empty side, as in _red_view
    m, n = _numel(shape[:k]), _numel(shape[k:])
    kept, red = merge(0, k), merge(k, len(shape))
    if len(kept) > 2 or len(red) > 2:
        ts = [t.reshape(m, n) for t in xps]
        return m, n, 1, False, 1, False, [(t, t.stride(0), t.stride(1), 0, 0) for t in ts]
    k2, x2 = len(kept) == 2, len(red) == 2
    return (m, n, red[1][0] if x2 else 1, x2, kept[1][0] if k2 else 1, k2,
            [(t, kept[0][1][i], red[0][1][i], red[1][1][i] if x2 else 0, kept[1][1][i] if k2 else 0)
             for i, t in enumerate(xps)])


def _red_split(m, n, block_m, block_n, target=528):
    """How many programs share one row of a reduction: enough for `target` programs (RED_SPLIT_PROGS: 528 is
    ~4 waves of an H200's 132 SMs), each walking at least 8 blocks (1 when the rows alone give two programs an
    SM, or the rows are short: a second launch costs more than it gains there)."""
    progs = -(-m // block_m)
    if n < 16 * block_n or progs >= min(264, target // 2):
        return 1
    return max(1, min(-(-target // progs), n // (8 * block_n), 1024))


_TICKETS = {}


def _tickets(dev, n):
    """n int32 zeros on dev, kept between calls: a split reduction's ticket counters (one per row block; the
    last program of a block resets its counter, so they are zero again after every launch)."""
    t = _TICKETS.get(dev)
    if t is None or t.numel() < n:
        t = torch.zeros(max(n, 4096), dtype=torch.int32, device=dev)
        _TICKETS[dev] = t
    return t


def _mm_split(m, n, k, b, block_m, block_n, block_k):
    """Split-K factor of a matmul: split when the output tiles cannot fill the GPU and K is long, and
    so that no fp32 accumulator chain is longer than 16384 (a 1M-long chain drifts by ~2e-4 relative)."""
    tiles = -(-m // block_m) * -(-n // block_n) * b
    par = -(-264 // tiles) if tiles < 132 and k >= 4096 else 1
    return max(1, min(max(par, -(-k // 16384)), k // (4 * block_k), 256))
'''

def attr_path(root: str, path: str) -> str:
    """`self.layers[0].weight` style access without a computed getattr (the static policy refuses those)."""
    out = root
    for part in path.split("."):
        out = f"{out}.{part}" if part.isidentifier() else f'getattr({out}, "{part}")'
    return out


class Emitter:
    def __init__(self, graph: fx.Graph, inputs: dict[str, tuple[str, Any]], forward_args: list[str],
                 precision: str) -> None:
        self.graph = graph
        self.inputs = inputs
        self.forward_args = forward_args
        self.precision = precision
        self.lines: list[str] = []
        self.kernels: dict[str, str] = {}      # kernel text (placeholder name, no docstring) -> name
        self.kernel_src: list[str] = []
        self.helpers: set[str] = set()
        self.names: dict[fx.Node, str] = {}
        self.ops: list[str] = []
        self.tunables: set[str] = set()
        self.tuple_vars: dict[fx.Node, list[str]] = {}
        self.outputs: list[str] = []
        self.cat_chains: dict[fx.Node, cat_chain.Chain] = {}
        self.prim_into: dict[fx.Node, cat_chain.Into] = {}

    # -- names ---------------------------------------------------------------------------------
    def name(self, node: fx.Node) -> str:
        if node not in self.names:
            base = node.name if node.name.isidentifier() else f"n{len(self.names)}"
            self.names[node] = f"{base}" if not base.startswith("_") else f"v{base}"
        return self.names[node]

    def expr(self, a: Any) -> str:
        """A graph argument as Python source in the forward."""
        if isinstance(a, fx.Node):
            return self.name(a)
        if isinstance(a, (list, tuple)):
            inner = ", ".join(self.expr(x) for x in a)
            return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
        if isinstance(a, torch.dtype):
            return torch_dtype(a)
        if isinstance(a, torch.device):
            return "dev"
        if isinstance(a, torch.memory_format):
            return f"torch.{str(a).removeprefix('torch.')}"
        if isinstance(a, float) and (a != a or a in (float("inf"), float("-inf"))):
            return f'float("{a}")'
        return repr(a)

    # -- kernels -------------------------------------------------------------------------------
    def add_kernel(self, prefix: str, make) -> tuple[str, list[str]]:
        src, launch, helpers = make("__KNAME__")
        # the key leaves out the docstring, which names the group's nodes: DenseNet201's 416 kernels were
        # 14 texts, and each copy was one more compile on the GPU (its first call ran past 45 s)
        key = _DOCSTRING.sub("", src, count=1)
        if key in self.kernels:
            name = self.kernels[key]
        else:
            name = f"{prefix}_kernel_{len(self.kernels)}"  # never an FX node name (those are op names)
            self.kernels[key] = name
            self.kernel_src.append(src.replace("__KNAME__", name))
        self.helpers |= helpers
        return name, [ln.replace("__KNAME__", name) for ln in launch]

    # -- the forward ---------------------------------------------------------------------------
    def run(self) -> None:
        for n in self.graph.nodes:
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
                name = op_name(n)
                if name not in self.ops:
                    self.ops.append(name)
        group_of = partition(self.graph)
        used_outside = outside_users(self.graph, group_of)
        # growing cats share one buffer; a convolution, matmul, pointwise or pool kernel whose output only its
        # chain's cats read stores it into its slice of that buffer instead of a copy kernel moving it there
        self.cat_chains = cat_chain.direct_writes(self.graph, cat_chain.plan(self.graph, group_of), group_of)
        self.prim_into = cat_chain.primitive_into(self.cat_chains, group_of)  # the pools' slices (not groups)
        last_of: dict[fx.Node, Group] = {g.last: g for g in group_of.values()}
        dev_set = False
        for node in self.graph.nodes:
            if node.op == "placeholder":
                kind, where = self.inputs[node.name]
                if kind == "token":
                    if node.users:  # an effectful op is still in the graph
                        raise Unsupported("unsupported: an op with side effects (export's effect token)")
                    continue
                v = self.name(node)
                if kind == "input":
                    if v != self.forward_args[where]:
                        self.lines.append(f"{v} = {self.forward_args[where]}")
                else:
                    self.lines.append(f"{v} = {attr_path('self', where)}")
                if not dev_set and is_tensor_node(node):
                    self.lines.append(f"dev = {v}.device")
                    dev_set = True
                continue
            if node.op == "output":
                self.emit_output(node)
                continue
            if node in group_of:
                g = group_of[node]
                if last_of.get(node) is g:
                    self.emit_group(g, [m for m in g.members if used_outside.get(m)])
                continue
            if not dev_set:
                self.lines.append("dev = torch.device('cpu')")
                dev_set = True
            self.emit_node(node)

    def emit_group(self, g: Group, mat: list[fx.Node]) -> None:
        for m in g.members:
            self.name(m)
        for into in g.into.values():
            self.name(into.chain.members[-1])  # the buffer it stores into
        fam = families.of_group(g)
        if g.anchor is not None and isinstance(val(g.anchor), (tuple, list)):  # (values, indices) of max.dim
            self.tuple_vars[g.anchor] = [self.names[g.anchor] + "_0", self.names[g.anchor] + "_1"]
        _, launch = self.add_kernel(fam.kernel_prefix(g),
                                    lambda nm: fam.make(nm, g, mat, self.names, self.precision))
        self.tunables |= fam.tunables_for(self.precision)
        self.lines.append(f"# {', '.join(op_name(m).removeprefix('aten.') for m in g.members)}")
        self.lines += launch

    def emit_node(self, node: fx.Node) -> None:
        v = self.name(node)
        if node.op != "call_function":
            raise Unsupported(f"unsupported: graph node {node.op} {node.target}")
        t = node.target
        if t is operator.getitem:
            src, i = node.args
            if src in self.tuple_vars:
                self.lines.append(f"{v} = {self.tuple_vars[src][i]}")
            else:
                self.lines.append(f"{v} = {self.expr(src)}[{i}]")
            return
        if t in SYM_BINOPS:
            a, b = node.args
            self.lines.append(f"{v} = {self.expr(a)} {SYM_BINOPS[t]} {self.expr(b)}")
            return
        if t is operator.neg:
            self.lines.append(f"{v} = -{self.expr(node.args[0])}")
            return
        if t in (math.trunc, math.floor, math.ceil):  # sizes from a scale factor (interpolate)
            self.lines.append(f"{v} = math.{t.__name__}({self.expr(node.args[0])})")
            return
        if isinstance(t, torch._ops.OpOverload) and packet(node) in ("sym_size", "sym_stride", "sym_numel",
                                                                      "sym_storage_offset"):
            x = self.expr(node.args[0])
            p = packet(node)
            line = {"sym_size": f"{x}.shape[{node.args[1] if len(node.args) > 1 else ''}]",
                    "sym_stride": f"{x}.stride({node.args[1] if len(node.args) > 1 else ''})",
                    "sym_numel": f"{x}.numel()", "sym_storage_offset": f"{x}.storage_offset()"}[p]
            self.lines.append(f"{v} = {line}")
            return
        if t in (torch.sym_max, torch.sym_min, torch.sym_float, torch.sym_int, torch.sym_sqrt, torch.sym_not) \
                if hasattr(torch, "sym_sqrt") else False:
            fn = {torch.sym_max: "max", torch.sym_min: "min", torch.sym_float: "float", torch.sym_int: "int",
                  torch.sym_not: "not "}.get(t)
            if fn is None:
                raise Unsupported(f"unsupported: {op_name(node)}")
            self.lines.append(f"{v} = {fn}({', '.join(self.expr(a) for a in node.args)})")
            return
        if not isinstance(t, torch._ops.OpOverload):
            raise Unsupported(f"unsupported: {op_name(node)}")
        p = packet(node)
        if p in ("_assert_scalar", "_assert_tensor_metadata", "sym_constrain_range_for_size", "_assert_async"):
            return
        if p in glue.GLUE and not copies.constant_output(node):
            self.lines += glue.GLUE[p](v, node, self.expr)
            return
        if node in self.cat_chains:  # one buffer for a chain of growing cats, each input copied once (or stored)
            chain = self.cat_chains[node]
            self.name(chain.members[-1])
            name = "__KNAME__"
            if any(x not in chain.direct for x in chain.new[node]):
                name, _ = self.add_kernel("cat", lambda nm: (copies.copy_source(nm, val(node).dim()), [], set()))
                self.tunables |= set(copies.TUNABLES)
            self.lines.append(f"# {op_name(node).removeprefix('aten.')} (chained)")
            self.lines += cat_chain.chain_cat_launch(name, node, chain, self.names, copies._copy_launch)
            return
        prim = primitives.lookup(p)
        if prim is not None:
            into = self.prim_into.get(node)
            kw = {} if into is None else {"into": into}  # its output stored into its slice of a cat's buffer
            if into is not None:
                self.name(into.chain.members[-1])
            _, launch = self.add_kernel(prim.prefix, lambda nm: prim.make(nm, node, self.names, self.expr, **kw))
            self.tunables |= set(prim.tunables)
            if prim.tuple_out:
                self.tuple_vars[node] = [f"{v}_{i}" for i in range(prim.n_out)]
            self.lines.append(f"# {op_name(node).removeprefix('aten.')}")
            self.lines += launch
            return
        raise Unsupported(f"unsupported: {op_name(node)}")

    def emit_output(self, node: fx.Node) -> None:
        self.outputs = [self.expr(a) if a is not None else "None" for a in node.args[0]]


def render_return(outs: list[str], out_spec: Any) -> str:
    from torch.utils import _pytree as pytree

    tree = pytree.tree_unflatten([_Lit(o) for o in outs], out_spec)
    return "return " + _render(tree)


class _Lit(str):
    pass


def _render(obj: Any) -> str:
    if isinstance(obj, _Lit):
        return str(obj)
    if isinstance(obj, tuple):
        inner = ", ".join(_render(o) for o in obj)
        return f"({inner}{',' if len(obj) == 1 else ''})"
    if isinstance(obj, list):
        return "[" + ", ".join(_render(o) for o in obj) + "]"
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{k!r}: {_render(v)}" for k, v in obj.items()) + "}"
    return repr(obj)
