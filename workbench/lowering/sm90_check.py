"""Compile a candidate's kernels for the H200 (sm_90) on a machine without a GPU, and say whether they fit.

Triton 3.6 compiles for `GPUTarget("cuda", 90, 32)` with its bundled ptxas; no driver is needed. What a
kernel uses is in the result: `metadata.shared` (Triton's dynamic shared memory), and the cubin's resource
table (`cuobjdump -res-usage`: registers per thread, static shared memory, local-memory spills). An H200
block may hold 232,448 bytes of shared memory, a thread 255 registers, and a block 65,536 registers
(`regs * 32 * num_warps`): past those the GPU raises `OutOfResources` at the first launch, which this check
sees on the CPU.

Two steps, because the signatures come from a real call:
1. `record_launches(model_new, inputs)` runs the forward under the interpreter (TRITON_INTERPRET=1) and
   records every distinct kernel launch: the kernel name, each argument's Triton type, the constexpr
   values and num_warps/num_stages.
2. `compile_launches(source, launches)` compiles each in a child process without TRITON_INTERPRET (the
   interpreter patches triton.language in this one) and returns one `KernelFit` per launch.

For the tuner: `fits(n_regs, shared, num_warps)` is the predicate; `check_config(source, launches, config)`
recompiles the recorded launches with new TUNABLES values (`{"BLOCK": 4096, "NUM_WARPS": 8}`) and returns
the fits, so a config that cannot run on the H200 is dropped before any GPU time. A kwarg of a launch
follows a tunable when the launch line passes it by name (`BLOCK=BLOCK`, `num_warps=NUM_WARPS`); a
constexpr computed at run time (`triton.next_power_of_2(N)`) keeps its recorded value, so record at the
sizes that will be timed when such kernels matter (sort rows).
"""
from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """Per-block limits of a GPU (defaults: H200, sm_90)."""
    max_shared: int = 232448
    max_regs_per_thread: int = 255
    regs_per_block: int = 65536
    threads_per_warp: int = 32


SM90 = Limits()


def fits(n_regs: int, shared: int, num_warps: int, limits: Limits = SM90) -> bool:
    """The predicate the tuner uses: a block of num_warps warps with this use can be resident on the GPU."""
    return (shared <= limits.max_shared and n_regs <= limits.max_regs_per_thread
            and n_regs * limits.threads_per_warp * num_warps <= limits.regs_per_block)


@dataclass
class Launch:
    kernel: str
    signature: dict[str, str]          # arg name -> Triton type ("*fp32", "i32", "constexpr")
    constexprs: dict[str, Any]
    num_warps: int = 4
    num_stages: int = 3
    divisible: list[str] = field(default_factory=list)  # args the JIT marks divisible by 16 (pointers, ints)

    def key(self) -> str:
        return json.dumps([self.kernel, self.signature, self.constexprs, self.num_warps, self.num_stages,
                           self.divisible], sort_keys=True, default=str)


@dataclass
class KernelFit:
    kernel: str
    num_warps: int
    constexprs: dict[str, Any] = field(default_factory=dict)
    n_regs: int = 0
    shared: int = 0            # dynamic (Triton) + static shared memory, bytes
    # bytes per thread spilled: the cubin's STACK (where ptxas puts spilled registers on sm_90: a direct
    # convolution tile of 1024 x 16 read REG:32 STACK:8960 LOCAL:0) or its LOCAL, whichever is larger
    spills: int = 0
    error: str = ""            # one line when the compile failed

    @property
    def ok(self) -> bool:
        return not self.error and fits(self.n_regs, self.shared, self.num_warps)

    def why(self) -> str:
        if self.error:
            return f"{self.kernel}: does not compile for sm_90: {self.error}"
        if self.shared > SM90.max_shared:
            return f"{self.kernel}: {self.shared} bytes of shared memory > {SM90.max_shared}"
        regs = self.n_regs * SM90.threads_per_warp * self.num_warps
        if self.n_regs > SM90.max_regs_per_thread or regs > SM90.regs_per_block:
            return f"{self.kernel}: {self.n_regs} registers x {32 * self.num_warps} threads = {regs} > 65536"
        return ""


_TORCH_TO_TT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "i8",
                "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1",
                "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "uint16": "u16", "uint32": "u32",
                "uint64": "u64"}


def _arg_type(a: Any) -> str:
    import torch

    if isinstance(a, torch.Tensor):
        return "*" + _TORCH_TO_TT[str(a.dtype).removeprefix("torch.")]
    if isinstance(a, bool):
        return "i1"
    if isinstance(a, int):
        return "i32" if -2 ** 31 <= a < 2 ** 31 else "i64"
    if isinstance(a, float):
        return "fp32"
    if a is None:
        return "constexpr"
    raise TypeError(f"kernel argument of type {type(a).__name__}")


def _divisible_16(v: Any) -> bool:
    import torch

    if isinstance(v, torch.Tensor):
        return v.data_ptr() % 16 == 0
    return isinstance(v, int) and not isinstance(v, bool) and v % 16 == 0


@contextlib.contextmanager
def recording() -> Iterator[list[Launch]]:
    """Record the kernel launches made inside the block (interpreter only: TRITON_INTERPRET=1)."""
    from triton.runtime.interpreter import InterpretedFunction

    seen: dict[str, Launch] = {}
    out: list[Launch] = []
    orig = InterpretedFunction.run

    def run(self, *args, grid, warmup, **kwargs):  # noqa: ANN001, ANN202 - Triton's own signature
        import inspect

        params = list(inspect.signature(self.fn).parameters.values())
        bound = dict(zip([p.name for p in params], args))
        opts = {"num_warps": kwargs.pop("num_warps", 4), "num_stages": kwargs.pop("num_stages", 3)}
        bound.update(kwargs)
        sig, const, div = {}, {}, []
        for p in params:
            if p.name not in bound:
                if p.default is inspect.Parameter.empty:
                    raise TypeError(f"{self.fn.__name__}: argument {p.name} missing")
                bound[p.name] = p.default
            v = bound[p.name]
            is_const = "constexpr" in str(p.annotation) or v is None
            # the JIT's specialization, so the compile here is the one the GPU runs: an int equal to 1 is a
            # constant, an int or a pointer divisible by 16 is marked so (it decides coalescing and vector
            # widths: a stride of 1 makes a tile contiguous along that axis)
            if not is_const and isinstance(v, int) and not isinstance(v, bool) and v == 1:
                is_const = True
            sig[p.name] = "constexpr" if is_const else _arg_type(v)
            if is_const:
                const[p.name] = v
            elif _divisible_16(v):
                div.append(p.name)
        ln = Launch(self.fn.__name__, sig, const, int(opts["num_warps"]), int(opts["num_stages"]), div)
        if ln.key() not in seen:
            seen[ln.key()] = ln
            out.append(ln)
        return orig(self, *args, grid=grid, warmup=warmup, **kwargs, **opts)

    InterpretedFunction.run = run
    try:
        yield out
    finally:
        InterpretedFunction.run = orig


def record_launches(model_new: Any, inputs: list[Any]) -> list[Launch]:
    """Run `model_new(*inputs)` once under the interpreter and return its distinct launches."""
    import torch

    with recording() as launches, torch.no_grad():
        model_new(*inputs)
    return launches


def tunable_kwargs(source: str) -> dict[str, dict[str, str]]:
    """kernel name -> {launch kwarg: module-level tunable name} for kwargs passed as a bare tunable name."""
    tree = ast.parse(source)
    tunables: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if isinstance(node.value, ast.Constant):
                tunables.add(node.targets[0].id)
    # `_bm = min(MM_BLOCK_M, ...)`, `_rbn = min(RED_BLOCK_N * ..., ...)`: a block adapted to the operand's
    # shape follows the first tunable of min's first argument (the check compiles that tunable's value)
    clamped: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                and node.value.func.id == "min" and node.value.args:
            first = [n.id for n in ast.walk(node.value.args[0]) if isinstance(n, ast.Name) and n.id in tunables]
            if first:
                clamped[node.targets[0].id] = first[0]
    out: dict[str, dict[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) \
                and isinstance(node.func.value, ast.Name):
            m = out.setdefault(node.func.value.id, {})
            for kw in node.keywords:
                if kw.arg and isinstance(kw.value, ast.Name) and kw.value.id in tunables:
                    m[kw.arg] = kw.value.id
                elif kw.arg and isinstance(kw.value, ast.Name) and kw.value.id in clamped:
                    m[kw.arg] = clamped[kw.value.id]
    return out


def apply_config(source: str, launches: list[Launch], config: dict[str, Any]) -> list[Launch]:
    """The launches with the constexprs and options that follow a tunable set to config's values."""
    follow = tunable_kwargs(source)
    out = []
    for ln in launches:
        m = follow.get(ln.kernel, {})
        const = {k: config.get(m[k], v) if k in m else v for k, v in ln.constexprs.items()}
        nw = config.get(m["num_warps"], ln.num_warps) if "num_warps" in m else ln.num_warps
        ns = config.get(m["num_stages"], ln.num_stages) if "num_stages" in m else ln.num_stages
        out.append(Launch(ln.kernel, dict(ln.signature), const, int(nw), int(ns), list(ln.divisible)))
    return out


def compile_launches(source: str, launches: list[Launch], timeout_s: float = 300.0) -> list[KernelFit]:
    """Compile every launch of `source` for sm_90 in a child process; one KernelFit each."""
    if not launches:
        return []
    with tempfile.TemporaryDirectory(prefix="sm90_") as d:
        src = Path(d) / "candidate_sm90.py"
        src.write_text(source)
        req = Path(d) / "launches.json"
        req.write_text(json.dumps([asdict(ln) for ln in launches], default=_jsonable))
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["TRITON_CACHE_DIR"] = str(Path(d) / "cache")
        # its own session: on a timeout the whole group goes, ptxas included (a 256-wide fp32 tile kept
        # ptxas running for 18 min and 4 GB after its parent was killed)
        proc = subprocess.Popen([sys.executable, "-m", "workbench.lowering.sm90_check", str(src), str(req)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                cwd=str(Path(__file__).resolve().parents[2]), start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RuntimeError(f"sm_90 compile of {len(launches)} launches ran past {timeout_s:.0f} s") from None
        if proc.returncode != 0:
            tail = (stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"sm_90 compile child failed (exit {proc.returncode}): {tail}")
        return [KernelFit(**r) for r in json.loads(stdout.strip().splitlines()[-1])]


def check_config(source: str, launches: list[Launch], config: dict[str, Any]) -> list[KernelFit]:
    """The tuner's check: the recorded launches recompiled with config's TUNABLES values."""
    return compile_launches(source, apply_config(source, launches, config))


def _jsonable(v: Any) -> Any:
    if hasattr(v, "value"):  # tl.constexpr
        return v.value
    return str(v)


# -- the child: compile without the interpreter --------------------------------------------------------
_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def _resources(cubin: bytes) -> tuple[int, int, int]:
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([str(tool), "-res-usage", f.name], capture_output=True, text=True,
                              check=True).stdout
    m = _RES.search(text)
    if m is None:
        raise RuntimeError(f"no resource line in cuobjdump output: {text[:200]}")
    return int(m.group(1)), int(m.group(3)), max(int(m.group(2)), int(m.group(4)))


def _compile_one(mod: Any, ln: dict) -> KernelFit:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fit = KernelFit(ln["kernel"], ln["num_warps"], ln["constexprs"])
    fn = getattr(mod, ln["kernel"])
    try:
        names = list(ln["signature"])
        attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in ln.get("divisible", []) if a in names}
        src = ASTSource(fn, ln["signature"], ln["constexprs"], attrs)
        c = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": ln["num_warps"], "num_stages": ln["num_stages"]})
        regs, static_shared, local = _resources(c.asm["cubin"])
        fit.n_regs, fit.shared, fit.spills = regs, int(c.metadata.shared) + static_shared, local
    except Exception as e:  # noqa: BLE001 - the compile error is the result, with its first line
        lines = [x for x in f"{type(e).__name__}: {e}".splitlines() if x.strip()]
        fit.error = " | ".join(lines[:1] + [x for x in lines[1:] if "error" in x.lower()][:2])[:400]
    return fit


def _child(src: str, req: str) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("candidate_sm90", src)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["candidate_sm90"] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    fits_ = [asdict(_compile_one(mod, ln)) for ln in json.loads(Path(req).read_text())]
    sys.stdout.write("\n" + json.dumps(fits_, default=_jsonable) + "\n")


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
