"""Compile every convolution config the tuner may choose for sm_90, at a spec's own channels and kernels.

`survey(spec_path)` lowers a KernelBench spec, records its launches once under the interpreter at a shrunk
size (batch 1, spatial dims at most 16, a 1-D length at most 64: the kernel's constexprs, the channel
blocks and the taps are the published spec's; only the sizes that are runtime arguments change), then
recompiles the conv kernels for `GPUTarget("cuda", 90, 32)` with each point of the tuner's conv space
(`tune.configs`) and reads, per launch: registers, shared memory, spilled bytes and the SASS instruction
mix (`cuobjdump -sass` with Triton's bundled tool): FFMA (FMA-path dot), HGMMA (wgmma), LDS/LDSM (shared
loads feeding the FMA path), LDGSTS (cp.async), BAR. The ratio FFMA : LDS is the FMA-path dot's cost per
useful multiply-add; HGMMA present means the tile went to Hopper's tensor cores.

    python -m workbench.lowering.conv_sm90 ../shared/kernelbench/level1/63_conv_standard_2D_*.py

Published sizes are not recorded (the interpreter would take hours); `IDX64` (64-bit index math past 2**31
elements) is set to what the published sizes need: a spec whose output or input passes 2**31 elements would
take the int64 path on the GPU, which this survey then compiles.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SPATIAL = ("height", "width", "depth", "length")
OPS = ("FFMA", "HGMMA", "HMMA", "LDS", "LDS.128", "LDS.64", "LDSM", "LDGSTS", "LDG", "STS", "BAR", "SHFL", "IMAD",
       "STG")


@dataclass
class ConfigFit:
    """One conv launch compiled under one config."""

    config: dict[str, Any]
    kernel: str
    num_warps: int
    num_stages: int
    n_regs: int = 0
    shared: int = 0
    spills: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    error: str = ""

    @property
    def ok(self) -> bool:
        from workbench.lowering.sm90_check import fits

        return not self.error and fits(self.n_regs, self.shared, self.num_warps) and self.spills == 0


def shrink_overrides(module: Any) -> dict[str, int]:
    """Module-level sizes to shrink: the batch to 1, spatial dims to 16 (a 1-D length to 64)."""
    out: dict[str, int] = {}
    for name, v in vars(module).items():
        if not isinstance(v, int) or isinstance(v, bool):
            continue
        low = name.lower()
        if low == "batch_size":
            out[name] = 1
        elif any(s in low for s in SPATIAL):
            out[name] = min(v, 64 if "length" in low else 16)
    return out


def _record(spec_path: Path) -> tuple[str, list, bool]:
    """(draft source, launches at the shrunk size, whether the published sizes need IDX64)."""
    import torch

    from workbench.lowering import lower_spec
    from workbench.lowering import sm90_check as sc
    from workbench.spec import load_spec

    full = load_spec(spec_path, {}, module_name="wb_conv_sm90_full").module
    over = shrink_overrides(full)
    with torch.device("meta"):
        xs = full.get_inputs()
        model = full.Model(*full.get_init_inputs())
        ys = model(*xs)
    ys = ys if isinstance(ys, (tuple, list)) else [ys]
    big = max(t.numel() for t in [*xs, *ys] if isinstance(t, torch.Tensor)) >= 2**31
    res = lower_spec(spec_path, over)
    if res.source is None:
        raise RuntimeError(f"{spec_path.name}: {res.diagnosis}")
    small = load_spec(spec_path, over, module_name="wb_conv_sm90_small").module
    from workbench.tunables import apply_config, parse_tunables

    # a draft with both forms (CONV_DIRECT) launches one: record the other too, the tuner's points 0 and 4
    # switch to it
    texts = [res.source]
    if "CONV_DIRECT" in parse_tunables(res.source).current:
        texts.append(apply_config(res.source, parse_tunables(res.source), {"CONV_DIRECT": 0}))
    launches: list = []
    with tempfile.TemporaryDirectory(prefix="conv_sm90_") as d:
        import importlib.util

        for k, text in enumerate(texts):
            path = Path(d) / f"cand_conv_sm90_{k}.py"
            path.write_text(text)
            spec = importlib.util.spec_from_file_location(f"cand_conv_sm90_{k}", path)
            cand = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            sys.modules[f"cand_conv_sm90_{k}"] = cand
            spec.loader.exec_module(cand)  # type: ignore[union-attr]
            torch.manual_seed(0)
            model_new = cand.ModelNew(*small.get_init_inputs())
            torch.manual_seed(1)
            launches += sc.record_launches(model_new, small.get_inputs())
    return res.source, launches, big


def survey(spec_path: str | Path, n: int = 8, timeout_s: float = 900.0,
           extra: list[dict[str, Any]] | None = None) -> list[ConfigFit]:
    """Every conv launch of the spec's draft compiled for sm_90 under the draft's defaults, each of the
    tuner's first n configs and the `extra` configs (TUNABLES values, e.g. a candidate default)."""
    from workbench.lowering import sm90_check as sc
    from workbench.lowering import tune

    spec_path = Path(spec_path)
    source, launches, big = _record(spec_path)
    conv = [ln for ln in launches if ln.kernel.startswith("conv")]
    for ln in conv:
        if "IDX64" in ln.constexprs:
            ln.constexprs["IDX64"] = big
    cfgs: list[dict[str, Any]] = [{}] + tune.configs(source, n) + list(extra or [])
    from workbench.tunables import parse_tunables

    current = dict(parse_tunables(source).current)
    twins = {ln.kernel[: -len("_flat")] for ln in conv if ln.kernel.endswith("_flat")}
    req = []
    for cfg in cfgs:
        flat = not {**current, **cfg}.get("CONV_DIRECT", 0)
        for rec, ln in zip(conv, sc.apply_config(source, conv, cfg)):
            # the launch clamps the output-channel block to the group (`_BCO`): a recorded block below the
            # default was clamped, and stays the most any config gets (a group of 8 or 16 channels)
            co = rec.constexprs.get("CONV_BLOCK_CO")
            if isinstance(co, int) and co < int(current.get("CONV_BLOCK_CO", co)):
                ln.constexprs["CONV_BLOCK_CO"] = min(int(ln.constexprs["CONV_BLOCK_CO"]), co)
            # of a direct/flat pair only the form CONV_DIRECT launches
            if ln.kernel in twins and flat or ln.kernel.endswith("_flat") and not flat:
                continue
            req.append({"config": cfg, "launch": asdict(ln)})
    with tempfile.TemporaryDirectory(prefix="conv_sm90_") as d:
        src = Path(d) / "candidate_sm90.py"
        src.write_text(source)
        rq = Path(d) / "req.json"
        rq.write_text(json.dumps(req, default=sc._jsonable))
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["TRITON_CACHE_DIR"] = str(Path(d) / "cache")
        proc = subprocess.run([sys.executable, "-m", "workbench.lowering.conv_sm90", "--child", str(src), str(rq)],
                              capture_output=True, text=True, env=env, timeout=timeout_s,
                              cwd=str(Path(__file__).resolve().parents[2]))
        if proc.returncode != 0:
            raise RuntimeError(f"sm_90 child failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        return [ConfigFit(**r) for r in json.loads(proc.stdout.strip().splitlines()[-1])]


def sass_ops(cubin: bytes) -> dict[str, int]:
    """The SASS opcode histogram of a cubin (OPS only), from Triton's bundled cuobjdump."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([str(tool), "-sass", f.name], capture_output=True, text=True, check=True).stdout
    ops: Counter = Counter()
    for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9.]*)", text):
        op = m.group(1)
        ops[op.split(".")[0]] += 1
        width = re.search(r"\.(64|128)\b", op)
        if op.startswith("LDS.") and width:  # vector shared loads: the FMA path's operand traffic
            ops[f"LDS.{width.group(1)}"] += 1
    return {k: ops.get(k, 0) for k in OPS}


def _child(src: str, req: str) -> None:
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from workbench.lowering.sm90_check import _resources

    spec = importlib.util.spec_from_file_location("candidate_sm90", src)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["candidate_sm90"] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    out = []
    for r in json.loads(Path(req).read_text()):
        ln = r["launch"]
        fit = ConfigFit(r["config"], ln["kernel"], ln["num_warps"], ln["num_stages"])
        try:
            names = list(ln["signature"])
            attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in ln.get("divisible", []) if a in names}
            c = triton.compile(ASTSource(getattr(mod, ln["kernel"]), ln["signature"], ln["constexprs"], attrs),
                               target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": ln["num_warps"], "num_stages": ln["num_stages"]})
            regs, static_shared, spills = _resources(c.asm["cubin"])
            fit.n_regs, fit.shared, fit.spills = regs, int(c.metadata.shared) + static_shared, spills
            fit.ops = sass_ops(c.asm["cubin"])
        except Exception as e:  # noqa: BLE001 - the compile error is the result
            fit.error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        out.append(asdict(fit))
    sys.stdout.write("\n" + json.dumps(out) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("specs", nargs="+")
    p.add_argument("--configs", type=int, default=8, help="the tuner's first N configs (default 8)")
    p.add_argument("--config", action="append", default=[], metavar="JSON",
                   help='an extra config to compile, e.g. \'{"CONV_BLOCK_P": 128, "CONV_NUM_WARPS": 8}\'')
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        _child(*a.specs)
        return 0
    bad = 0
    for s in a.specs:
        for f in survey(s, a.configs, extra=[json.loads(c) for c in a.config]):
            cfg = ",".join(f"{k.replace('CONV_', '')}={v}" for k, v in sorted(f.config.items())) or "defaults"
            ops = " ".join(f"{k}={v}" for k, v in f.ops.items() if v)
            print(f"{Path(s).stem[:28]:28} {f.kernel[:22]:22} w{f.num_warps} s{f.num_stages} regs={f.n_regs:3} "
                  f"smem={f.shared:6} spill={f.spills:4} {'ok ' if f.ok else 'BAD'} {cfg} | {ops} {f.error}",
                  flush=True)
            bad += not f.ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
