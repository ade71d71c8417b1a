"""Lab book, frozen: ran at commit c561fff as `case_studies.pffn.sass_stats`; results:
results/case_studies/pffn/sass_loop_stats.json.
Nothing imports this file and it is not maintained: its imports name the modules as they were at c561fff;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

Instruction mix of the PFFN kernels' K loop, from an sm_90 build made on any machine (no GPU needed).

    python -m case_studies.pffn.sass_stats --out results/case_studies/pffn/sass_loop_stats.json

Compiles `_pffn_kernel` / `_pffn_splitk_kernel` with Triton's compiler for `GPUTarget("cuda", 90, 32)`,
16-byte divisibility hints on pointers and strides and unit inner strides (what a launch on contiguous
production tensors specializes on), disassembles the cubin with the `cuobjdump` that Triton ships, and
counts the instructions of each loop (a backward branch's span) by opcode. Per thread; one iteration.
"""
from __future__ import annotations

import argparse
import collections
import glob
import inspect
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

UNIT_STRIDES = {"x_stride_d": 1, "w1_stride_k": 1, "w2_stride_d": 1, "o_stride_d": 1}
BASE = {"UPCAST_DOT": False, "DOT_PRECISION": "tf32", "PROBES": False}
# (kernel, constexprs, num_warps, num_stages)
BUILDS: list[tuple[str, dict[str, Any], int, int]] = [
    *[("fused", {"D_POW2": 256, "USE_TMA": True, "BLOCK_B": 128, "BLOCK_KC": 64, "D_SPLIT": 1, "FAST_GELU": fg},
       8, 2) for fg in (0, 1, 2)],
    *[("fused", {"D_POW2": 256, "USE_TMA": True, "BLOCK_B": 64, "BLOCK_KC": 64, "D_SPLIT": 1, "FAST_GELU": fg},
       4, 1) for fg in (0, 2)],
    *[("splitk", {"D_POW2": 128, "USE_TMA": False, "BLOCK_B": 16, "BLOCK_KC": 128, "SPLIT_K": 2, "FAST_GELU": fg},
       4, 1) for fg in (0, 2)],
    ("splitk", {"D_POW2": 256, "USE_TMA": True, "BLOCK_B": 32, "BLOCK_KC": 64, "SPLIT_K": 2, "FAST_GELU": 2}, 4, 2),
    ("splitk", {"D_POW2": 256, "USE_TMA": True, "BLOCK_B": 64, "BLOCK_KC": 64, "SPLIT_K": 4, "FAST_GELU": 2}, 4, 1),
]


def _compile(fn: Any, consts: dict[str, Any], num_warps: int, num_stages: int) -> Any:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(inspect.signature(fn.fn).parameters)
    consts = {**consts, **UNIT_STRIDES}
    sig = {}
    for n in names:
        if n in consts:
            sig[n] = "constexpr"
        elif n in ("part_ptr", "ss_ptr"):
            sig[n] = "*fp32"
        elif n == "ticket_ptr":
            sig[n] = "*i32"
        elif n.endswith("_ptr"):
            sig[n] = "*fp16"
        else:
            sig[n] = "fp32" if n == "eps" else "i32"
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names)
             if n not in consts and (n.endswith("_ptr") or "stride" in n or n in ("N", "B", "D", "K"))}
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})


def _cuobjdump(cubin: bytes, flag: str) -> str:
    import triton

    tool = glob.glob(os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump"))[0]
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, flag, f.name], capture_output=True, text=True, check=True).stdout


def resources(cubin: bytes) -> dict[str, int]:
    """Registers a thread and stack (spill) bytes, from `cuobjdump -res-usage`."""
    text = _cuobjdump(cubin, "-res-usage")
    return {k.lower(): int(v) for k, v in re.findall(r"(REG|STACK|LOCAL):(\d+)", text)}


def loop_stats(cubin: bytes) -> list[dict[str, Any]]:
    sass = _cuobjdump(cubin, "-sass")
    ins = [(int(m.group(1), 16), m.group(2)) for m in
           (re.match(r"\s+/\*([0-9a-f]+)\*/\s+(.*?);", line) for line in sass.splitlines()) if m]
    loops = []
    for addr, text in ins:
        tgt = re.search(r"0x([0-9a-f]+)", text) if "BRA" in text else None
        if tgt and int(tgt.group(1), 16) < addr - 64:       # a backward branch over more than a few slots
            lo = int(tgt.group(1), 16)
            ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0]
                                      for a, t in ins if lo <= a <= addr)
            loops.append({"instructions": sum(ops.values()), "top": dict(ops.most_common(12))})
    return loops


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    os.environ.pop("TRITON_INTERPRET", None)
    from case_studies.pffn.kernel import _pffn_kernel
    from case_studies.pffn.splitk import _pffn_splitk_kernel

    fns = {"fused": _pffn_kernel, "splitk": _pffn_splitk_kernel}
    res = []
    for name, consts, nw, ns in BUILDS:
        k = _compile(fns[name], {**BASE, **consts}, nw, ns)
        res.append({"kernel": name, "constexprs": consts, "num_warps": nw, "num_stages": ns,
                    "shared_bytes": k.metadata.shared, **resources(k.asm["cubin"]),
                    "loops": loop_stats(k.asm["cubin"])})
    Path(args.out).write_text(json.dumps({"note": __doc__.strip().splitlines()[0], "builds": res}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
