"""The captured graph's audit knows the candidate's Triton kernels by handle, never by name (issue 32).

The class of attack: the candidate names its kernels, so a `@triton.jit` function named exactly like the
library kernel it wants timed (cuBLAS's gemm, ATen's reduce; with or without the specialization suffix older
Triton appends; in a child graph; on a kernel reached as a CUkernel rather than a CUfunction; a name that
looks like the audit's own tag) made that library kernel pass an audit by name. On the CPU the driver is
mocked (`_walk` over a fake graph); on the GPU (`pytest -m gpu`) the graph is a real capture and the
candidate borrows the names cuBLAS's kernels have on that very device.
"""
from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pytest

from workbench.harness import graph_audit, opcheck
from workbench.harness.graph_audit import TRITON_TAG, audit, triton_kernels_in

HERE = Path(__file__).parent
SPEC = HERE.parents[1] / "examples" / "vector_add" / "spec.py"
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off"
REDUCE = "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_9func_wrapper_tIfZNS0_11sum_functorE"
FILL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
OWN = 0x7000  # the CUfunction Triton's JIT loaded for the candidate's own kernel


class _FakeDriver:
    """The driver calls `_walk` makes, over a graph given as {graph: [(kind, func, kern, name or child)]}."""

    def __init__(self, graphs: dict[int, list[tuple[int, int, int, Any]]]) -> None:
        self.graphs = graphs
        self.nodes: dict[int, tuple[int, int, int, Any]] = {}
        for g, nodes in graphs.items():
            for i, n in enumerate(nodes):
                self.nodes[g * 1000 + i + 1] = n

    def cuGraphGetNodes(self, graph: Any, out: Any, n: Any) -> int:
        g = graph.value
        n._obj.value = len(self.graphs[g])
        if out is not None:
            for i in range(len(self.graphs[g])):
                out[i] = g * 1000 + i + 1
        return 0

    def cuGraphNodeGetType(self, node: Any, kind: Any) -> int:
        kind._obj.value = self.nodes[node.value][0]
        return 0

    def cuGraphKernelNodeGetParams_v2(self, node: Any, params: Any) -> int:
        _, func, kern, _ = self.nodes[node.value]
        params._obj.func, params._obj.kern = func or None, kern or None
        return 0

    def _name(self, handle: int, out: Any) -> int:
        for kind, func, kern, name in self.nodes.values():
            if kind == 0 and handle in (func, kern):
                out._obj.value = name.encode()
                return 0
        return 1

    def cuFuncGetName(self, out: Any, func: Any) -> int:
        return self._name(func.value, out)

    def cuKernelGetName(self, out: Any, kern: Any) -> int:
        return self._name(kern.value, out)

    def cuGraphChildGraphNodeGetGraph(self, node: Any, child: Any) -> int:
        child._obj.value = self.nodes[node.value][3]
        return 0


def _names(graphs: dict[int, list[tuple[int, int, int, Any]]], functions: set[int]) -> list[str]:
    out: list[str] = []
    graph_audit._walk(_FakeDriver(graphs), 1, out, functions)
    return sorted(set(out))


def _candidate(*kernel_names: str) -> set[str]:
    src = "import triton\n" + "".join(f"@triton.jit\ndef {n}(x):\n    pass\n\n" for n in kernel_names)
    return triton_kernels_in(src)


@pytest.mark.parametrize("borrowed, node", [
    (GEMM, GEMM),                                 # cuBLAS's gemm under its exact name
    (REDUCE, REDUCE),                             # ATen's own compute kernel
    ("sm90_xmma_gemm_f32f32", "sm90_xmma_gemm_f32f32_v2"),  # the specialization suffix an audit by name accepts
    ("mystery_library_kernel", "mystery_library_kernel"),   # a name no library pattern knows
])
@pytest.mark.parametrize("where", ["top", "child", "cukernel"])
def test_a_library_kernel_under_the_candidates_kernel_name_is_refused(borrowed: str, node: str, where: str) -> None:
    own = (0, OWN, 0, "add_kernel")
    lib = (0, 0, 0x9100, node) if where == "cukernel" else (0, 0x9000, 0, node)
    graphs = {1: [own, lib, (2, 0, 0, None)]} if where != "child" else {1: [own, (4, 0, 0, 2)], 2: [lib]}
    names = _names(graphs, {OWN})
    assert TRITON_TAG + "add_kernel" in names and node in names, names  # the library's node is not tagged
    triton = _candidate("add_kernel", borrowed)
    bad, unknown = audit(names, triton)
    assert bad == [f"forbidden_graph_kernel:borrowed:{node}"] and not unknown, (bad, unknown)
    assert graph_audit._is_triton(node, triton)  # judged by its name, as before, the library's node passed


def test_honest_nodes_pass_and_no_name_passes_for_a_handle() -> None:
    graphs = {1: [(0, OWN, 0, "add_kernel"), (0, OWN + 1, 0, "scale_kernel"), (0, 0, 0x9200, FILL), (1, 0, 0, None)]}
    names = _names(graphs, {OWN, OWN + 1})
    assert audit(names, _candidate("add_kernel", "scale_kernel")) == ([], [])
    # a kernel Triton loaded that the candidate's source does not define: no device clock, no violation
    assert audit(names, _candidate("add_kernel")) == ([], ["scale_kernel"])
    # no node known by its handle (this Triton keeps none, or the driver reports others): no device clock,
    # never an honest kernel refused
    bare = _names(graphs, set())
    assert audit(bare, _candidate("add_kernel", "scale_kernel")) == ([], ["add_kernel", "scale_kernel"])
    # a library kernel named like the tag is not read as one
    spoof = _names({1: [(0, OWN, 0, "add_kernel"), (0, 0x9000, 0, TRITON_TAG + GEMM)]}, {OWN})
    assert TRITON_TAG + GEMM not in spoof and audit(spoof, _candidate("add_kernel"))[0], spoof


def test_the_launch_wrapper_keeps_the_compiled_kernels_whose_handles_the_audit_trusts() -> None:
    """A compiled kernel's CUfunction is read when the audit runs: one warmed up and launched later (its
    handle loaded after the JIT returned it) is known too."""

    class Compiled:
        function = None

    k = Compiled()
    opcheck._note_compiled(k)
    opcheck._note_compiled(None)
    try:
        assert OWN not in opcheck.triton_functions()
        k.function = OWN
        assert OWN in opcheck.triton_functions()
    finally:
        opcheck.STATE.compiled.pop(id(k), None)


def test_the_tag_is_not_a_prefix_any_kernel_name_can_have() -> None:
    # mangled and C names are identifiers; demangled C++ names never start with '<'
    assert not TRITON_TAG[0].isidentifier() and TRITON_TAG[0] == "<"
    assert ctypes.sizeof(graph_audit._KernelParamsV2) >= 8 * 4


# -- on the GPU -------------------------------------------------------------------------------------------------
# construction/cublas_only_in_graph.py with its identity made in __init__ (so the graph holds cuBLAS's kernels
# alone) and, at the mark, empty Triton functions named like them
BORROWER = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m) * scale, mask=m)


# BORROWED
class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.eye = torch.eye(64, device="cuda", dtype=torch.float32)

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), self.scale, BLOCK=1024)
        if torch.cuda.is_current_stream_capturing():
            torch.mm(self.eye, self.eye)  # cuBLAS's kernels, only in the graph, under names "it" defines
        return out
"""
def _library_names_of(fn: Any) -> list[str]:
    """The kernel names a capture of `fn()` holds on this device (read from the driver)."""
    import torch

    from workbench.harness.graph_audit import kernel_names

    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        fn()
    names = kernel_names(g, set())
    assert names, "the driver could not list the graph's kernels"
    return names


@pytest.mark.gpu
def test_the_handles_the_jit_loads_are_the_graph_nodes_functions_on_the_gpu(tmp_path: Path) -> None:
    """The assumption the audit rests on: a Triton launch captured into a graph is a node whose CUfunction
    is the `CompiledKernel.function` the JIT returned; a cuBLAS kernel named like the candidate's is not."""
    import importlib.util
    import sys

    import torch

    from platforms.clock import device_memory
    from workbench.harness.graph_audit import kernel_names

    with device_memory("cuda", exclusive=True):
        eye = torch.eye(64, device="cuda")
        gemm = [n for n in _library_names_of(lambda: torch.mm(eye, eye))]
        mod = tmp_path / "borrowing_kernels.py"
        mod.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef twice_kernel(x_ptr, n, "
                       "BLOCK: tl.constexpr):\n    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                       "    m = offs < n\n    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)\n"
                       + "".join(f"\n\n@triton.jit\ndef {n}(x):\n    pass\n" for n in gemm if n.isidentifier()))
        spec = importlib.util.spec_from_file_location("borrowing_kernels", mod)
        m = importlib.util.module_from_spec(spec)
        sys.modules["borrowing_kernels"] = m
        spec.loader.exec_module(m)
        x = torch.ones(4096, device="cuda")
        k = m.twice_kernel[(4,)](x, x.numel(), BLOCK=1024)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g):
            m.twice_kernel[(4,)](x, x.numel(), BLOCK=1024)
            torch.mm(eye, eye)
        names = kernel_names(g, {k.function})
    assert TRITON_TAG + "twice_kernel" in names, names
    bad, unknown = audit(names, triton_kernels_in(mod.read_text()))
    assert bad and all(b.startswith("forbidden_graph_kernel:") for b in bad) and not unknown, (names, bad)


@pytest.mark.gpu
def test_a_candidate_borrowing_cublas_kernel_names_is_refused_on_the_gpu(tmp_path: Path) -> None:
    """cublas_only_in_graph, plus empty `@triton.jit` functions named exactly as the kernels cuBLAS runs for
    its matmul on this device: judged by name, its graph held only "its" kernels and passed on device time."""
    import torch

    from platforms.clock import device_memory
    from workbench.harness import Harness
    from workbench.result import Status

    with device_memory("cuda", exclusive=True):
        eye = torch.eye(64, device="cuda", dtype=torch.float32)
        names = _library_names_of(lambda: torch.mm(eye, eye))
    borrowed = [n for n in names if n.isidentifier()]
    assert borrowed, names
    src = BORROWER.replace("# BORROWED\n", "".join(f"@triton.jit\ndef {n}(x):\n    pass\n\n\n" for n in borrowed))
    cand = tmp_path / "borrows_cublas_names.py"
    cand.write_text(src)
    with Harness(device="cuda") as h:
        res = h.evaluate(SPEC, cand, trials=2, policy=False)
    assert res.status == Status.REJECTED and res.fitness == 0.0, (res.status, res.error, res.timing_basis)
    assert any(v.startswith("forbidden_graph_kernel:borrowed:") for v in res.violations), res.violations
