"""Trigger real Triton 3.6 error messages on this CPU machine, the source of the messages quoted in
retrieval/corpus/errors.md: each case runs in the interpreter and through the compiler front end
(`triton.compile(ASTSource, target=GPUTarget("cuda", 90, 32))`, which needs no GPU).

    .venv/bin/python benchmarks/retrieval_trigger_errors.py

Writes results/retrieval/triggered_errors.json: per case, the interpreter's and the compiler's
outcome (exception class and last message line, or "ok"). The unmasked out-of-bounds case runs in
a subprocess because it can abort the interpreter process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

CASES = {
    "arange_not_pow2": (
        "def k(x, N: tl.constexpr):\n    o = tl.arange(0, N)\n    tl.store(x + o, o)",
        {"x": "*fp32", "N": "constexpr"},
        {"N": 10},
        "k[(1,)](torch.zeros(16), N=10)",
    ),
    "arange_runtime_bound": (
        "def k(x, n):\n    o = tl.arange(0, n)\n    tl.store(x + o, o)",
        {"x": "*fp32", "n": "i32"},
        {},
        "k[(1,)](torch.zeros(16), 16)",
    ),
    "shape_mismatch": (
        "def k(x, y):\n    a = tl.load(x + tl.arange(0, 16))\n    b = tl.load(y + tl.arange(0, 32))\n"
        "    tl.store(x + tl.arange(0, 16), a + b)",
        {"x": "*fp32", "y": "*fp32"},
        {},
        "k[(1,)](torch.zeros(16), torch.zeros(32))",
    ),
    "dot_dtype_mismatch": (
        "def k(a, b, c):\n    r = tl.arange(0, 16)\n    A = tl.load(a + r[:, None] * 16 + r[None, :])\n"
        "    B = tl.load(b + r[:, None] * 16 + r[None, :])\n"
        "    tl.store(c + r[:, None] * 16 + r[None, :], tl.dot(A, B))",
        {"a": "*fp32", "b": "*i8", "c": "*fp32"},
        {},
        "k[(1,)](torch.randn(16, 16), torch.ones(16, 16, dtype=torch.int8), torch.empty(16, 16))",
    ),
    "dot_k_below_16": (
        "def k(a, c, K: tl.constexpr):\n    r = tl.arange(0, 16)\n    kk = tl.arange(0, K)\n"
        "    A = tl.load(a + r[:, None] * K + kk[None, :])\n"
        "    B = tl.load(a + kk[:, None] * 16 + r[None, :])\n"
        "    tl.store(c + r[:, None] * 16 + r[None, :], tl.dot(A, B))",
        {"a": "*fp16", "c": "*fp32", "K": "constexpr"},
        {"K": 8},
        "k[(1,)](torch.randn(16, 16).half(), torch.empty(16, 16), K=8)",
    ),
    "break_in_loop": (
        "def k(x, n):\n    for i in range(n):\n        if i > 2:\n            break\n    tl.store(x, 1.0)",
        {"x": "*fp32", "n": "i32"},
        {},
        "k[(1,)](torch.zeros(1), 5)",
    ),
    "python_global": ("def k(x):\n    tl.store(x, G)", {"x": "*fp32"}, {}, "k[(1,)](torch.zeros(1))"),
    "loop_carried_type": (
        "def k(x, n):\n    acc = 0\n    for i in range(n):\n        acc += tl.load(x + i)\n    tl.store(x, acc)",
        {"x": "*fp32", "n": "i32"},
        {},
        "k[(1,)](torch.zeros(4), 4)",
    ),
    "if_on_block": (
        "def k(x):\n    v = tl.load(x + tl.arange(0, 16))\n    if v > 0:\n        tl.store(x, 1.0)",
        {"x": "*fp32"},
        {},
        "k[(1,)](torch.ones(16))",
    ),
    "tensor_int_index": (
        "def k(x):\n    v = tl.load(x + tl.arange(0, 16))\n    tl.store(x, v[3])",
        {"x": "*fp32"},
        {},
        "k[(1,)](torch.ones(16))",
    ),
    "atomic_int16": (
        "def k(x):\n    tl.atomic_add(x + tl.arange(0, 4), tl.full((4,), 1, tl.int16))",
        {"x": "*i16"},
        {},
        "k[(1,)](torch.zeros(4, dtype=torch.int16))",
    ),
    "reshape_not_pow2": (
        "def k(x):\n    a = tl.load(x + tl.arange(0, 16))\n    b = tl.reshape(a, (3, 5))\n"
        "    tl.store(x + tl.arange(0, 16), a)",
        {"x": "*fp32"},
        {},
        "k[(1,)](torch.zeros(16))",
    ),
}

RUNNER = textwrap.dedent("""\
    import importlib.util, os, sys, json, tempfile
    if sys.argv[1] == "interp":
        os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl
    src, sig, consts, launch = json.loads(sys.argv[2])
    # @triton.jit needs the kernel's source in a file
    path = os.path.join(tempfile.mkdtemp(), "case_kernel.py")
    with open(path, "w") as f:
        f.write("import triton\\nimport triton.language as tl\\nG = 3\\n\\n@triton.jit\\n" + src + "\\n")
    spec = importlib.util.spec_from_file_location("case_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    k = mod.k
    ns = {"k": k, "torch": torch}
    try:
        if sys.argv[1] == "interp":
            exec(launch, ns)
        else:
            from triton.compiler import ASTSource
            from triton.backends.compiler import GPUTarget
            src = ASTSource(fn=k, signature=sig, constexprs=consts)
            triton.compile(src, target=GPUTarget("cuda", 90, 32))
        print(json.dumps({"outcome": "ok"}))
    except Exception as e:
        lines = [l for l in str(e).splitlines() if l.strip()]
        outcome = type(e).__module__ + "." + type(e).__name__
        print(json.dumps({"outcome": outcome, "message": lines[-1] if lines else ""}))
""")

OOB = textwrap.dedent("""\
    import os
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl
    @triton.jit
    def k(x, y, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(y + o, tl.load(x + o))
    k[(1,)](torch.randn(5), torch.empty(5), 5, B=1024 * 1024)
    print("no crash")
""")


def run(mode: str, case: tuple) -> dict:
    p = subprocess.run(
        [sys.executable, "-c", RUNNER, mode, json.dumps(case)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
    )
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or [""])[-1]
        return {"outcome": f"process exited {p.returncode}", "message": tail}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    if __package__ in (None, ""):   # run as a script: the repository root on the path, as with PYTHONPATH=.
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks import common

    args = common.parser(__doc__, out_default="results/retrieval").parse_args(argv)
    results = {}
    for name, case in CASES.items():
        results[name] = {"interpreter": run("interp", case), "compiler_sm90": run("compile", case)}
        print(name, json.dumps(results[name]))
    p = subprocess.run([sys.executable, "-c", OOB], capture_output=True, text=True, timeout=300)
    results["unmasked_out_of_bounds"] = {
        "interpreter": {
            "outcome": f"process exited {p.returncode}",
            "message": (p.stderr.strip().splitlines() or [p.stdout.strip()])[-1],
        }
    }
    print("unmasked_out_of_bounds", results["unmasked_out_of_bounds"])
    common.write_json(args.out / "triggered_errors.json",
                      {"provenance": common.provenance(args.commit), "cases": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
