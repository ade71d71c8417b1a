"""Random odd shapes for the compute case studies' kernels on a GPU, every config they may run.

    PYTHONPATH=. python benchmarks/case_studies/gpu_fuzz.py --out "$OUT/fuzz.json" --shapes 12 --seed 0

The CPU tests run Triton's interpreter, which computes some things right that a GPU build gets wrong (the
conv1d padding-0 bug: results/case_studies/conv1d/pad0_bug/). Here, per case study (conv1d, Optimized FM,
PFFN), `--shapes` random shapes (odd sizes, sizes below and just past the tiles) in every supported dtype;
per shape every config the kernel may run pinned (its autotune list as fitted to the shape, the special
paths), the autotuned call and the dispatcher. Each output is compared with an fp32 reference: a result
fails when it is outside the benchmark's tolerance and also more than twice as far from the reference as
eager PyTorch in the same dtype (so a dtype's own rounding is never blamed on the kernel).

Every (case, dtype, shape) runs in a process of its own (a CUDA illegal-address error poisons the rest of
its process); a process that dies is resumed from the next config in a new one.

A benchmark driver, not library code: its users are this command line and the `pytest -m gpu` checks
(tests/case_studies/test_gpu.py); nothing in the packages imports it (it lived in case_studies/ until
issue 18; results/case_studies/gpu_fuzz/ was recorded with it there, under the logger name
`case_studies.gpu_fuzz`).
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import random
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):   # run as a script: the repository root on the path, as with PYTHONPATH=.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common  # noqa: E402

log = logging.getLogger("benchmarks.case_studies.gpu_fuzz")
DEVICE = os.environ.get("FUZZ_DEVICE", "cuda")   # "cpu" with TRITON_INTERPRET=1: a dry run of the plumbing


# -- random shapes ------------------------------------------------------------------------------------
def conv1d_shape(r: random.Random) -> dict[str, int]:
    while True:
        k = r.choice([1, 2, 3, 3, 4, 5, 7])
        p = {"B": r.randint(1, 9), "C_in": r.choice([r.randint(1, 40), r.choice([16, 32, 48, 64, 96])]),
             "C_out": r.choice([r.randint(1, 40), r.choice([16, 24, 32, 96, 100])]), "L": r.randint(1, 160),
             "K": k, "stride": r.choice([1, 1, 1, 2, 3]), "padding": r.randint(0, k)}
        if (p["L"] + 2 * p["padding"] - k) // p["stride"] + 1 >= 1:
            return p


def fm_shape(r: random.Random) -> dict[str, int]:
    return {"B": r.randint(1, 300), "N": r.choice([r.randint(1, 40), r.randint(41, 130)]),
            "D": r.choice([r.randint(1, 64), r.randint(65, 300), 224]),
            "K": r.choice([r.randint(1, 20), 16, 32, 64, 70])}


def pffn_shape(r: random.Random) -> dict[str, int]:
    return {"N": r.randint(1, 18), "B": r.choice([r.randint(1, 40), r.randint(41, 300)]),
            "D": r.choice([r.randint(1, 96), r.randint(97, 300), 128, 256, 512]),
            "K": r.choice([r.randint(1, 64), r.randint(65, 300), 256])}


# -- configs and calls ----------------------------------------------------------------------------------
def conv1d_configs(p: dict[str, int], dtype: str) -> dict[str, dict[str, Any] | None]:
    from case_studies.conv1d import kernel as ck
    from case_studies.conv1d import tma

    out: dict[str, dict[str, Any] | None] = {"auto": None}
    for i, (*tiles, nw, ns) in enumerate(ck.AUTOTUNE_SPACE):
        out[f"gather{i}"] = {"path": "gather", **dict(zip(ck.CONFIG_KEYS, tiles)), "num_warps": nw, "num_stages": ns}
    out["gather_loop"] = {"path": "gather", "UNROLL_CI": 0}
    elem = {"float16": 2, "bfloat16": 2, "float32": 4}[dtype]
    if tma.cl_applies(p["B"], p["C_in"], p["L"], p["C_out"], p["K"], p["stride"], p["padding"], elem):
        for i, row in enumerate(tma.CL_AUTOTUNE_SPACE):
            out[f"cl{i}"] = {"path": "cl", **dict(zip(tma.TMA_CONFIG_KEYS, row[:-1])), "num_warps": row[-1]}
    return out


def conv1d_run(p: dict[str, int], dtype: str, name: str, cfg: dict[str, Any] | None) -> tuple[Any, Any, Any]:
    import torch

    from case_studies.conv1d import dispatch
    from case_studies.conv1d import kernel as ck
    from case_studies.conv1d.reference import conv1d_exact, conv1d_reference

    g = torch.Generator().manual_seed(hash(tuple(p.values())) % 2**31)
    dt = getattr(torch, dtype)
    x = torch.randn(p["B"], p["C_in"], p["L"], generator=g).to(DEVICE, dt)
    w = (torch.randn(p["C_out"], p["C_in"], p["K"], generator=g) / (p["C_in"] * p["K"]) ** 0.5).to(DEVICE, dt)
    b = (torch.randn(p["C_out"], generator=g) * 0.1).to(DEVICE, dt)
    s, pad = p["stride"], p["padding"]
    if name == "dispatch":
        out = dispatch.conv1d(x, w, b, s, pad)
    else:
        out = ck.triton_conv1d(x, w, b, s, pad, config=dict(cfg) if cfg is not None else None)
    return out, conv1d_reference(x, w, b, s, pad), conv1d_exact(x, w, b, s, pad)


def fm_configs(p: dict[str, int], dtype: str) -> dict[str, dict[str, Any] | None]:
    from case_studies.optimized_fm import kernel as fk

    out: dict[str, dict[str, Any] | None] = {"auto": None}
    for c in fk.configs_for(p, dtype):
        out["cfg_" + "_".join(str(v) for v in c.values())] = c
    return out


def fm_run(p: dict[str, int], dtype: str, name: str, cfg: dict[str, Any] | None) -> tuple[Any, Any, Any]:
    import torch

    from case_studies.optimized_fm import dispatch
    from case_studies.optimized_fm import kernel as fk
    from case_studies.optimized_fm.bench import make_inputs
    from case_studies.optimized_fm.reference import optimized_fm_reference

    x, y = make_inputs(p, getattr(torch, dtype), DEVICE)
    out = dispatch.optimized_fm(x, y) if name == "dispatch" else fk.triton_optimized_fm(x, y, config=cfg)
    return out, optimized_fm_reference(x, y), optimized_fm_reference(x.float(), y.float())


def pffn_configs(p: dict[str, int], dtype: str) -> dict[str, dict[str, Any] | None]:
    from case_studies.pffn import kernel as pk

    out: dict[str, dict[str, Any] | None] = {"auto": None}
    for c in pk.configs_for(p, dtype):
        out["cfg_" + "_".join(str(v) for v in c.values())] = c
    if p["D"] <= 256:   # the split-K kernel (small B) and the host-descriptor weights (B <= 256 rule)
        out["splitk2"] = {"BLOCK_B": 16, "BLOCK_KC": 128, "SPLIT_K": 2, "num_warps": 4, "num_stages": 1, "TMA": 0}
        out["splitk4_tma"] = {"BLOCK_B": 16, "BLOCK_KC": 64, "SPLIT_K": 4, "num_warps": 4, "num_stages": 1}
        out["host_tma"] = {"BLOCK_B": 16, "BLOCK_KC": 64, "num_warps": 4, "num_stages": 2, "HOST_TMA": 1}
        out["splitk2_host_tma"] = dict(out["splitk2"], TMA=1, HOST_TMA=1)
    return out


def pffn_run(p: dict[str, int], dtype: str, name: str, cfg: dict[str, Any] | None) -> tuple[Any, Any, Any]:
    import torch

    from case_studies.pffn import dispatch
    from case_studies.pffn import kernel as pk
    from case_studies.pffn.bench import make_inputs
    from case_studies.pffn.reference import pffn_reference

    ins = make_inputs(p, getattr(torch, dtype), DEVICE)
    out = dispatch.pffn(*ins) if name == "dispatch" else pk.triton_pffn(*ins, config=cfg)
    return out, pffn_reference(*ins), pffn_reference(*(t.float() for t in ins))


# -- the exact-output case studies (bit-identical to eager): their benchmarks' contender factories --------
def mapid_shape(r: random.Random) -> dict[str, Any]:
    return {"VOCAB_SIZE": r.choice([1, 2, 7, 1000, r.randint(2, 50_000), 100_000]),
            "NUM_SAMPLES": r.choice([1, r.randint(1, 100), r.randint(100, 3000)]),
            "IDS_PER_SAMPLE": r.randint(1, 40), "UNKNOWN_RATE": r.choice([0.0, 0.1, 0.5, 1.0])}


def mbdt_shape(r: random.Random) -> dict[str, Any]:
    return {"BATCH": r.choice([1, r.randint(1, 100), r.randint(100, 3000)]), "FEATURES": r.randint(1, 40),
            "BORDERS": r.choice([1, 2, r.randint(1, 64), r.randint(64, 300)])}


def truncate_shape(r: random.Random) -> dict[str, Any]:
    return {"NUM_FEATURES": r.randint(1, 12), "BATCH": r.choice([1, r.randint(1, 100), r.randint(100, 2000)]),
            "MAX_LEN": r.choice([0, 1, r.randint(1, 50), r.randint(50, 300)]),
            "MAX_EVENTS": r.choice([0, 1, r.randint(1, 300)])}


def exact_configs(bench: str) -> Callable[[dict[str, Any], str], dict[str, None]]:
    def configs(p: dict[str, Any], dtype: str) -> dict[str, None]:
        return {k: None for k in importlib.import_module(bench).KERNELS}
    return configs


def exact_run(bench: str) -> Callable[..., tuple[Any, Any, Any]]:
    def run(p: dict[str, Any], dtype: str, name: str, cfg: None) -> tuple[Any, Any, Any]:
        mod = importlib.import_module(bench)
        case = mod.case()
        inputs = mod.make_inputs(p, DEVICE)
        ref = case.contenders[case.reference](p, inputs)()
        return case.contenders[name](p, inputs)(), ref, None
    return run


CASES: dict[str, dict[str, Any]] = {
    "conv1d": {"shape": conv1d_shape, "configs": conv1d_configs, "run": conv1d_run,
               "dtypes": ["float16", "bfloat16", "float32"], "tolerances": "case_studies.conv1d.bench"},
    "optimized_fm": {"shape": fm_shape, "configs": fm_configs, "run": fm_run, "dtypes": ["float16", "bfloat16"],
                     "tolerances": "case_studies.optimized_fm.bench"},
    "pffn": {"shape": pffn_shape, "configs": pffn_configs, "run": pffn_run, "dtypes": ["float16", "bfloat16"],
             "tolerances": "case_studies.pffn.bench"},
    **{name: {"shape": shape, "configs": exact_configs(f"case_studies.{name}.bench"),
              "run": exact_run(f"case_studies.{name}.bench"), "dtypes": ["exact"], "tolerances": None}
       for name, shape in (("mapid", mapid_shape), ("mbdt", mbdt_shape), ("event_truncate", truncate_shape))},
}


def judge(out: Any, eager: Any, exact: Any, atol: float, rtol: float) -> dict[str, Any]:
    """Outside the tolerance around the fp32 reference and more than twice eager's own distance: a fail."""
    import torch

    if out.shape != exact.shape:
        return {"ok": False, "error": f"shape {tuple(out.shape)} != {tuple(exact.shape)}"}
    o, e, x = out.float(), eager.float(), exact.float()
    err = float((o - x).abs().max()) if o.numel() else 0.0
    eager_err = float((e - x).abs().max()) if e.numel() else 0.0
    close = bool(torch.allclose(o, x, atol=atol, rtol=rtol))
    nan = bool(o.isnan().any() and not x.isnan().any())
    ok = not nan and (close or err <= 2 * eager_err + 1e-3)
    return {"ok": ok, "max_abs_err": err, "eager_max_abs_err": eager_err, "within_tol": close, "nan": nan}


def run_child(case: str, dtype: str, p: dict[str, int], names: list[str]) -> None:
    """Every named config of one shape, one JSON line each on stdout (so a crash loses only the rest)."""
    import torch

    from case_studies.common.preprocessing import outputs_identical

    spec = CASES[case]
    atol, rtol = importlib.import_module(spec["tolerances"]).TOLERANCES[dtype] if spec["tolerances"] else (0, 0)
    configs = {**spec["configs"](p, dtype), "dispatch": None}
    for name in names:
        rec: dict[str, Any] = {"case": case, "dtype": dtype, "shape": p, "config": name}
        try:
            out, eager, exact = spec["run"](p, dtype, name, configs[name])
            if DEVICE == "cuda":
                torch.cuda.synchronize()
            if exact is None:       # an exact case: bit for bit against eager
                same, why = outputs_identical(out, eager)
                rec.update(ok=same, **({} if same else {"mismatch": why}))
            else:
                rec.update(judge(out, eager, exact, atol, rtol))
        except Exception as e:      # the failure is the result
            rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
        print(json.dumps(rec, default=str), flush=True)
        if "error" in rec and "CUDA" in rec["error"]:
            return                  # sticky: the parent resumes the rest in a new process


def run_job(case: str, dtype: str, p: dict[str, int]) -> list[dict[str, Any]]:
    """Every config of one (case, dtype, shape), in child processes (a crash costs only its own config)."""
    names = [*CASES[case]["configs"](p, dtype), "dispatch"]
    done: list[dict[str, Any]] = []
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
    while len(done) < len(names):
        todo = names[len(done):]
        proc = subprocess.run([sys.executable, "-m", "benchmarks.case_studies.gpu_fuzz", "--child",
                               json.dumps([case, dtype, p, todo])], capture_output=True, text=True, env=env,
                              cwd=common.REPO, timeout=600)
        recs = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if not recs:   # died before its first result: blame that config and go on
            recs = [{"case": case, "dtype": dtype, "shape": p, "config": todo[0], "ok": False,
                     "error": f"process died: {proc.stderr[-400:]}"}]
        done.extend(recs)
    return done


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_required=False, out_file=True)
    ap.add_argument("--shapes", type=int, default=12, help="random shapes per case study")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--jobs", type=int, default=14)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run_child(*json.loads(args.child))
        return 0
    common.setup_logging()
    r = random.Random(args.seed)
    shapes = [(case, CASES[case]["shape"](r)) for case in common.split_list(args.cases) for _ in range(args.shapes)]
    jobs = [(case, dtype, p) for case, p in shapes for dtype in CASES[case]["dtypes"]]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:      # processes share the GPU
        results = [rec for recs in pool.map(lambda j: run_job(*j), jobs) for rec in recs]
    fails = [x for x in results if not x.get("ok")]
    for f in fails:
        log.error("FAIL %s %s %s %s: %s", f["case"], f["dtype"], f["shape"], f["config"],
                  f.get("error") or f.get("mismatch")
                  or {k: f.get(k) for k in ("max_abs_err", "eager_max_abs_err", "nan")})
    summary: dict[str, Any] = {}
    for x in results:
        s = summary.setdefault(x["case"], {"runs": 0, "fails": 0})
        s["runs"] += 1
        s["fails"] += 0 if x.get("ok") else 1
    log.info("summary: %s", summary)
    if args.out:
        common.write_json(args.out, {"provenance": common.provenance(args.commit), "seed": args.seed,
                                     "summary": summary, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

