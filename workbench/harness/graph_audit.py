"""The audit of the CUDA graph whose replays give the device time: only the candidate's Triton kernels and
allowed copies and fills may be in it.

A forward's host code runs once, at capture; the replays the clock times run whatever the capture recorded.
A candidate can make that recording differ from what its host code looks like on any other call (a cuBLAS
call only while `torch.cuda.is_current_stream_capturing()`, a library kernel reached some way the op
recorder does not see), so the graph itself is audited: every kernel node's function name, read from the
driver (`cuGraphGetNodes`, `cuGraphKernelNodeGetParams_v2`, `cuFuncGetName`/`cuKernelGetName`, child graphs
followed), must be one of the Triton kernels the candidate launched or one of PyTorch's copy and fill
kernels (`empty_like` plus a fill, `.copy_()` glue: `ALLOWED_KERNEL_PATTERNS`). Memcpy, memset and empty
nodes are allowed; host, event, conditional and memory-allocation nodes are not. Where the driver cannot
say (an old driver, no `raw_cuda_graph`), `kernel_names` returns None and the device clock is not used: the
fitness falls back to the wall clock (`timing_basis` says why), which does not depend on the graph.

A node is the candidate's Triton by its **handle**, never by its name: the candidate names its kernels, so a
`@triton.jit` function named exactly like cuBLAS's gemm (or like an allowed fill) would carry that library
kernel through a check by name. `kernel_names` tags a node `TRITON_TAG + name` only when its CUfunction is one
that Triton's JIT loaded in this process (`opcheck.triton_functions`: the harness's launch wrapper keeps
every `CompiledKernel` the JIT hands back); the server's `audit` then also wants the name defined in the
candidate's source (`triton_kernels_in`). A node that is not Triton's and carries the name of one of the
candidate's Triton kernels is a library kernel under a borrowed name: a violation wherever the handles were
seen to work (some node of the graph is tagged), else unknown (no device clock). Library copy and fill
kernels are still recognized by their names, names the candidate cannot give a kernel of its own (it has no
route to device code but Triton's, and every Triton node is known by its handle).

The names are read by harness code in the candidate's process (bound at import, before any candidate code
exists) and sent with the `captured` report: a candidate that could replace that code could also forge the
list (docs/harness.md, "not covered").
"""
from __future__ import annotations

import ast
import ctypes
import re
from typing import Any

# PyTorch's own copy and fill kernels (mangled or demangled names): glue, not compute.
ALLOWED_KERNEL_PATTERNS = (
    re.compile(r"FillFunctor|fill_kernel|direct_copy_kernel|copy_kernel|CatArrayBatchedCopy|"
               r"elementwise_kernel_with_index|zero_kernel"),
)
_NODE_KERNEL, _NODE_MEMCPY, _NODE_MEMSET, _NODE_GRAPH, _NODE_EMPTY = 0, 1, 2, 4, 5
MAX_NODES = 1 << 16
# Marks a node whose CUfunction Triton's JIT loaded in the candidate's process. No kernel name starts with
# '<' (mangled and C names are identifiers; the other node kinds are reported as `<graph node of type N>`).
TRITON_TAG = "<triton>"


class _KernelParamsV2(ctypes.Structure):
    _fields_ = [("func", ctypes.c_void_p), ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint),
                ("blockDimZ", ctypes.c_uint), ("sharedMemBytes", ctypes.c_uint),
                ("kernelParams", ctypes.c_void_p), ("extra", ctypes.c_void_p), ("kern", ctypes.c_void_p),
                ("ctx", ctypes.c_void_p)]


def _driver() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    for name in ("cuGraphGetNodes", "cuGraphNodeGetType", "cuGraphKernelNodeGetParams_v2",
                 "cuGraphChildGraphNodeGetGraph", "cuFuncGetName"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def _walk(lib: Any, graph: int, out: list[str], functions: set[int], depth: int = 0) -> None:
    n = ctypes.c_size_t(0)
    if lib.cuGraphGetNodes(ctypes.c_void_p(graph), None, ctypes.byref(n)) != 0 or n.value > MAX_NODES:
        raise RuntimeError("cuGraphGetNodes failed")
    nodes = (ctypes.c_void_p * max(1, n.value))()
    if lib.cuGraphGetNodes(ctypes.c_void_p(graph), nodes, ctypes.byref(n)) != 0:
        raise RuntimeError("cuGraphGetNodes failed")
    for i in range(n.value):
        node = ctypes.c_void_p(nodes[i])
        kind = ctypes.c_int(-1)
        if lib.cuGraphNodeGetType(node, ctypes.byref(kind)) != 0:
            raise RuntimeError("cuGraphNodeGetType failed")
        if kind.value == _NODE_KERNEL:
            params = _KernelParamsV2()
            if lib.cuGraphKernelNodeGetParams_v2(node, ctypes.byref(params)) != 0:
                raise RuntimeError("cuGraphKernelNodeGetParams failed")
            name = ctypes.c_char_p()
            if params.func:
                rc = lib.cuFuncGetName(ctypes.byref(name), ctypes.c_void_p(params.func))
            else:
                rc = lib.cuKernelGetName(ctypes.byref(name), ctypes.c_void_p(params.kern))
            if rc != 0 or not name.value:
                raise RuntimeError("a kernel node without a readable name")
            text = name.value.decode(errors="replace")
            if text.startswith("<"):  # no kernel is named so: never read as a tag or a node kind
                text = "?" + text
            out.append(TRITON_TAG + text if params.func and params.func in functions else text)
        elif kind.value == _NODE_GRAPH and depth < 8:
            child = ctypes.c_void_p()
            if lib.cuGraphChildGraphNodeGetGraph(node, ctypes.byref(child)) != 0:
                raise RuntimeError("cuGraphChildGraphNodeGetGraph failed")
            _walk(lib, child.value or 0, out, functions, depth + 1)
        elif kind.value in (_NODE_MEMCPY, _NODE_MEMSET, _NODE_EMPTY):
            continue
        else:
            out.append(f"<graph node of type {kind.value}>")


def kernel_names(graph: Any, functions: set[int] | None = None) -> list[str] | None:
    """The distinct names of a captured `torch.cuda.CUDAGraph`'s kernel nodes, `TRITON_TAG + name` for a node
    whose CUfunction is in `functions` (default: the kernels Triton's JIT loaded in this process), other
    node kinds as `<graph node of type N>`; None when the driver or this torch cannot say."""
    try:
        if functions is None:
            from workbench.harness.opcheck import triton_functions

            functions = triton_functions()
        raw = graph.raw_cuda_graph()
        if not raw:
            return None
        names: list[str] = []
        _walk(_driver(), int(raw), names, functions)
    except Exception:  # noqa: BLE001 - no audit possible: the caller drops the device clock
        return None
    return sorted(set(names))


def triton_kernels_in(source: str) -> set[str]:
    """Names of the functions a candidate's source decorates with a Triton decorator (`@triton.jit`,
    `@triton.autotune(...)`, `@triton.heuristics(...)`, or the same names imported bare)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name in ("jit", "autotune", "heuristics"):
                    found.add(node.name)
    return found


# Kernels of torch's own compute and of the vendor libraries (mangled or demangled): a violation in the graph.
LIBRARY_KERNEL = re.compile(r"_ZN2at6native|at::native|cublas|cudnn|cutlass|xmma|gemm|gemv|cusparse|cufft|"
                            r"curand|^sm\d+_|ampere_|volta_|turing_|hopper_|magma|splitK", re.IGNORECASE)


def _is_triton(name: str, triton_names: set[str]) -> bool:
    # Triton 3 names a kernel after its function; older releases appended a specialization suffix
    return name in triton_names or any(re.fullmatch(re.escape(t) + r"_[0-9a-zA-Z]+", name) for t in triton_names)


def audit(names: list[str], triton_names: set[str]) -> tuple[list[str], list[str]]:
    """(violations, unknown) for a graph's kernel names (`kernel_names`: Triton's nodes tagged by handle). A
    violation is a library or ATen compute kernel, a node kind no forward needs (`forbidden_graph_kernel:
    <name>`), or a kernel that is not Triton's but carries one of the candidate's Triton names while the
    handles are seen to work (`forbidden_graph_kernel:borrowed:<name>`); unknown is a kernel that is neither
    the candidate's Triton, an allowed copy or fill, nor a known library's, a Triton kernel the candidate's
    source does not define, or a borrowed name where no node was known by its handle: the device clock is
    then not used (the wall clock's rounds run the forward's host code, which the op recorder sees)."""
    bad, unknown = [], []
    handles_work = any(n.startswith(TRITON_TAG) for n in names)
    for entry in names:
        if entry.startswith(TRITON_TAG):
            name = entry[len(TRITON_TAG):]
            if not _is_triton(name, triton_names):
                unknown.append(name[:160])
            continue
        name = entry
        if _is_triton(name, triton_names):  # the candidate's name on a kernel its Triton did not load
            if handles_work:
                bad.append(f"forbidden_graph_kernel:borrowed:{name[:160]}")
            else:
                unknown.append(name[:160])
        elif any(p.search(name) for p in ALLOWED_KERNEL_PATTERNS):
            continue
        elif name.startswith("<graph node") or LIBRARY_KERNEL.search(name):
            bad.append(f"forbidden_graph_kernel:{name[:160]}")
        else:
            unknown.append(name[:160])
    return bad, unknown


__all__ = ["ALLOWED_KERNEL_PATTERNS", "TRITON_TAG", "audit", "kernel_names", "triton_kernels_in"]
