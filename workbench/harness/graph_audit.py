"""The audit of the CUDA graph whose replays give the device time: only the candidate's Triton kernels and
allowed copies and fills may be in it.

A forward's host code runs once, at capture; the replays the clock times run whatever the capture recorded.
A candidate can make that recording differ from what its host code looks like on any other call (a cuBLAS
call only while `torch.cuda.is_current_stream_capturing()`, a library kernel reached some way the op
recorder does not see), so the graph itself is audited: every kernel node's function name, read from the
driver (`cuGraphGetNodes`, `cuGraphKernelNodeGetParams_v2`, `cuFuncGetName`/`cuKernelGetName`, child graphs
followed), must be one of the Triton kernels the candidate launched (names the server also finds defined
in its source, `triton_kernels_in`) or one of PyTorch's copy and fill kernels (`empty_like` plus a fill,
`.copy_()` glue: `ALLOWED_KERNEL_PATTERNS`). Memcpy, memset and empty nodes are allowed; host, event,
conditional and memory-allocation nodes are not. Where the driver cannot say (an old driver, no
`raw_cuda_graph`), `kernel_names` returns None and the device clock is not used: the fitness falls back
to the wall clock (`timing_basis` says why), which does not depend on the graph.

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


def _walk(lib: Any, graph: int, out: list[str], depth: int = 0) -> None:
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
            out.append(name.value.decode(errors="replace"))
        elif kind.value == _NODE_GRAPH and depth < 8:
            child = ctypes.c_void_p()
            if lib.cuGraphChildGraphNodeGetGraph(node, ctypes.byref(child)) != 0:
                raise RuntimeError("cuGraphChildGraphNodeGetGraph failed")
            _walk(lib, child.value or 0, out, depth + 1)
        elif kind.value in (_NODE_MEMCPY, _NODE_MEMSET, _NODE_EMPTY):
            continue
        else:
            out.append(f"<graph node of type {kind.value}>")


def kernel_names(graph: Any) -> list[str] | None:
    """The distinct names of a captured `torch.cuda.CUDAGraph`'s kernel nodes (other node kinds as
    `<graph node of type N>`); None when the driver or this torch cannot say."""
    try:
        raw = graph.raw_cuda_graph()
        if not raw:
            return None
        names: list[str] = []
        _walk(_driver(), int(raw), names)
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
    """(violations, unknown) for a graph's kernel names. A violation is a library or ATen compute kernel, or
    a node kind no forward needs (`forbidden_graph_kernel:<name>`); unknown is a kernel that is neither
    the candidate's Triton, an allowed copy or fill, nor a known library's: the device clock is then not
    used (the wall clock's rounds run the forward's host code, which the op recorder sees)."""
    bad, unknown = [], []
    for name in names:
        if _is_triton(name, triton_names) or any(p.search(name) for p in ALLOWED_KERNEL_PATTERNS):
            continue
        if name.startswith("<graph node") or LIBRARY_KERNEL.search(name):
            bad.append(f"forbidden_graph_kernel:{name[:160]}")
        else:
            unknown.append(name[:160])
    return bad, unknown


__all__ = ["ALLOWED_KERNEL_PATTERNS", "audit", "kernel_names", "triton_kernels_in"]
