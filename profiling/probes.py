"""Probe-region conventions: read a kernel's declared regions; check they survive compilation.

A kernel lists its regions in its docstring (docs/CONTRACTS.md), as a line
`Probe regions: load_x, compute, store.`; `declared_regions(kernel)` reads that line.
`ttgir_regions(...)` compiles a kernel with probes on for a GPU target, on any machine (no GPU
needed), and returns the region names found in the TTGIR: the check that probes are not lost
before Proton's own lowering passes (which need a GPU session) run.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import subprocess
import sys
from typing import Any

from .errors import ProfilingUnavailable

log = logging.getLogger(__name__)

_REGIONS_LINE = re.compile(
    r"Probe regions(?:\s*\([^)]*\))?:\s*(?P<names>.*?)(?:\.\s|\.$|\n\s*\n|$)", re.IGNORECASE | re.DOTALL
)
_BACKTICKED = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RECORD = re.compile(r'proton\.record\s+(start|end)\s+"(?P<name>[^"]+)"')


def python_function(kernel: Any) -> Any:
    """The plain Python function behind a JITFunction, InterpretedFunction or autotuner."""
    fn = kernel
    for _ in range(4):
        inner = getattr(fn, "fn", None)
        if inner is None:
            break
        fn = inner
    return fn


def parse_regions_line(text: str) -> list[str] | None:
    """Names from the first `Probe regions: a, b, c.` line of `text` (None when there is none).

    With backticks (`load_x`, `mma` (loop), ...) only the backticked names count, so notes in
    parentheses may follow a name; without backticks every identifier up to the full stop counts.
    """
    m = _REGIONS_LINE.search(text or "")
    if not m:
        return None
    seg = m["names"]
    names = _BACKTICKED.findall(seg) or _IDENT.findall(seg)
    return list(dict.fromkeys(names))


def declared_regions(kernel: Any) -> list[str]:
    """Region names declared in the kernel's docstring, else in its module's docstring."""
    fn = python_function(kernel)
    module = inspect.getmodule(fn)
    for doc in (inspect.getdoc(fn), getattr(module, "__doc__", None)):
        names = parse_regions_line(doc or "")
        if names is not None:
            return names
    return []


def ttgir_regions(
    kernel: Any,
    signature: dict[str, str],
    constexprs: dict[str, Any],
    arch: int = 90,
    warp_size: int = 32,
    probes_flag: str = "PROBES",
) -> dict[str, list[str]]:
    """Compile `kernel` with `probes_flag=True` for `GPUTarget("cuda", arch, warp_size)` up to TTGIR.

    Returns {"ttir": [...], "ttgir": [...]}: region names (each once, in order of first record).
    Uses Triton 3.6's compiler stages directly (private API: `make_backend`, `add_stages`) and turns
    Proton's frontend switch on for the duration, restoring it after. Under TRITON_INTERPRET=1 the
    standard-library helpers (`tl.sigmoid`, `tl.cdiv`) are interpreter objects that the compiler cannot
    use, so the compilation then runs in a child process without that variable.
    """
    if os.environ.get("TRITON_INTERPRET") == "1":
        return _ttgir_regions_in_child(kernel, signature, constexprs, arch, warp_size, probes_flag)
    try:
        from triton._C.libtriton import ir
        from triton._C.libtriton import proton as triton_proton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.compiler.compiler import make_backend
        from triton.profiler.flags import flags
        from triton.runtime.jit import JITFunction
    except ImportError as exc:
        raise ProfilingUnavailable(
            f"this Triton build lacks the pieces needed to compile with probes: {exc}"
        ) from exc

    fn = kernel if isinstance(kernel, JITFunction) else JITFunction(python_function(kernel))
    sig = dict(signature)
    consts = dict(constexprs, **{probes_flag: True})
    for name in consts:
        sig[name] = "constexpr"
    try:  # private compiler API (Triton 3.6): a different Triton is "unavailable", not a kernel bug
        target = GPUTarget("cuda", arch, warp_size)
        backend = make_backend(target)
        options = backend.parse_options({})
        ctx = ir.context()
        ir.load_dialects(ctx)
        backend.load_dialects(ctx)
        triton_proton.load_dialects(ctx)
        src = ASTSource(fn=fn, signature=sig, constexprs=consts)
        stages: dict[str, Any] = {}
        backend.add_stages(stages, options, src.language)
        codegen, module_map = backend.get_codegen_implementation(options), backend.get_module_map()
        if "ttir" not in stages or "ttgir" not in stages:
            raise KeyError(f"stages {sorted(stages)}")
    except (AttributeError, KeyError, TypeError) as exc:
        raise ProfilingUnavailable(
            f"Triton's compiler stages differ from 3.6's ({type(exc).__name__}: {exc})"
        ) from exc
    saved = flags.instrumentation_on
    flags.instrumentation_on = True  # makes pl.enter_scope emit proton.record ops, as a session does
    try:
        module = src.make_ir(target, options, codegen, module_map, ctx)
        out: dict[str, list[str]] = {}
        metadata: dict[str, Any] = {}
        for stage in ("ttir", "ttgir"):
            module = stages[stage](module, metadata)
            out[stage] = list(dict.fromkeys(m["name"] for m in _RECORD.finditer(str(module))))
    finally:
        flags.instrumentation_on = saved
    return out


def _ttgir_regions_in_child(
    kernel: Any,
    signature: dict[str, str],
    constexprs: dict[str, Any],
    arch: int,
    warp_size: int,
    probes_flag: str,
) -> dict[str, list[str]]:
    return ttgir_regions_batch([(kernel, signature, constexprs)], arch, warp_size, probes_flag)[0]


_UNAVAILABLE_RC = 3  # the child's exit status for "this Triton cannot do it", as opposed to a failure


def ttgir_regions_batch(
    jobs: list[tuple[Any, dict[str, str], dict[str, Any]]],
    arch: int = 90,
    warp_size: int = 32,
    probes_flag: str = "PROBES",
) -> list[dict[str, list[str]]]:
    """`ttgir_regions` for several (kernel, signature, constexprs) in one child process without
    TRITON_INTERPRET (one torch/triton import instead of one per kernel)."""
    specs = []
    for kernel, signature, constexprs in jobs:
        fn = python_function(kernel)
        specs.append(
            {
                "module": fn.__module__,
                "name": fn.__name__,
                "signature": signature,
                "constexprs": constexprs,
                "arch": arch,
                "warp_size": warp_size,
                "probes_flag": probes_flag,
            }
        )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-m", "profiling.probes"],
        input=json.dumps(specs),
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode == _UNAVAILABLE_RC:
        raise ProfilingUnavailable(proc.stdout.strip().splitlines()[-1])
    if proc.returncode != 0:
        names = ", ".join(f"{j['module']}.{j['name']}" for j in specs)
        raise RuntimeError(f"compiling {names} with probes for cuda:{arch} failed:\n" + proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _main() -> None:
    import importlib

    out = []
    for job in json.loads(sys.stdin.read()):
        kernel = getattr(importlib.import_module(job["module"]), job["name"])
        out.append(
            ttgir_regions(
                kernel, job["signature"], job["constexprs"], job["arch"], job["warp_size"], job["probes_flag"]
            )
        )
    print(json.dumps(out))


if __name__ == "__main__":
    _main()
