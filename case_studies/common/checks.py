"""Correctness checks of the case-study kernels on the device at hand, declared as data in each `bench.py`.

Two kinds, as the case studies differ:
- float kernels (conv1d, Optimized FM, PFFN): `bench.CHECKS` lists small odd shapes, dtypes and the
  configs to run (`{}` pins the module's fixed tiles; `{"path": "gather"}` picks a conv1d path); each runs
  against `bench.check_reference` at the dtype's tolerance (`bench.TOLERANCES`), plus, on a GPU, the
  probe-instrumented build of the first config (the interpreter cannot run Proton's probe ops);
- exact kernels (MapId, MBDT, Event Truncate): `kernel.ModelNew` against the spec's `Model`, bit for bit,
  on every named shape of the spec and on fresh random draws.

One record per check: what ran, `ok`, and the reason when not. An exception in one check is that check's
result (its traceback tail kept), never the end of the others.
"""
from __future__ import annotations

import importlib
import logging
import time
import traceback
from typing import Any

import torch

from case_studies.common.contenders import torch_dtype
from case_studies.common.preprocessing import outputs_identical

log = logging.getLogger(__name__)


def float_check_jobs(case: str) -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """The `(case, params, dtype, config)` compile jobs the float checks of `case` will run (for
    `launch.warm_compile_cache`, so the checks find their binaries in Triton's cache)."""
    decl = importlib.import_module(f"case_studies.{case}.bench").CHECKS
    return [(case, _params(shape), dt, dict(cfg)) for shape in decl["shapes"] for dt in decl["dtypes"]
            for cfg in decl["configs"].values()]


def _params(shape: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in shape.items() if k != "name"}


def float_checks(case: str, device: str = "cuda", limit: int | None = None) -> list[dict[str, Any]]:
    """Every (shape, dtype, config) of `bench.CHECKS` against `bench.check_reference`; `limit` keeps only
    the first shapes and dtypes (the interpreter's plumbing check)."""
    bench = importlib.import_module(f"case_studies.{case}.bench")
    decl = bench.CHECKS
    out = []
    for shape in decl["shapes"][:limit]:
        params = _params(shape)
        for dt in decl["dtypes"][:limit]:
            inputs = bench.make_inputs(params, torch_dtype(dt), device)
            ref = bench.check_reference(inputs).float()
            atol, rtol = bench.TOLERANCES[dt]
            runs = [(name, cfg, False) for name, cfg in decl["configs"].items()]
            if device == "cuda":
                first = next(iter(decl["configs"].items()))
                runs.append((f"{first[0]}+probes", first[1], True))
            for name, cfg, probes in runs:
                rec: dict[str, Any] = {"case": case, "shape": shape["name"], "params": params, "dtype": dt,
                                       "config": name}
                try:
                    got = bench.check_kernel(inputs, dict(cfg), probes).float()
                    err = (got - ref).abs()
                    rec.update(ok=got.shape == ref.shape and bool(torch.allclose(got, ref, atol=atol, rtol=rtol)),
                               max_abs_err=float(err.max()) if err.numel() else 0.0,
                               max_ref=float(ref.abs().max()) if ref.numel() else 0.0, atol=atol, rtol=rtol)
                except Exception as e:  # one broken build is that check's result, not the end of the run
                    rec.update(ok=False, error=f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}")
                out.append(rec)
                log.log(logging.INFO if rec["ok"] else logging.ERROR, "check %s %s %s %s: %s", case,
                        shape["name"], dt, name, "ok" if rec["ok"] else rec.get("error", rec))
    return out


def exact_checks(case: str, device: str = "cuda", fuzz: int = 2,
                 shapes: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """`kernel.ModelNew` against the spec's `Model`, bit for bit, on the spec's default and every named
    shape (or only `shapes`), each with `fuzz` fresh random draws besides the first. The spec's module
    constants are restored afterwards."""
    spec = importlib.import_module(f"case_studies.{case}.spec")
    kernel = importlib.import_module(f"case_studies.{case}.kernel")
    base = {k: getattr(spec, k) for k in dir(spec) if k.isupper() and k not in ("SHAPES", "EXACT")}
    named = [(k, v) for k, v in spec.SHAPES.items() if shapes is None or k in shapes]
    out = []
    try:
        for shape_name, over in [("default", {}), *named]:
            for k, v in {**base, **over}.items():
                setattr(spec, k, v)
            for draw in range(1 + fuzz):
                torch.manual_seed(100 + draw)
                init = [a.to(device) if isinstance(a, torch.Tensor) else a for a in spec.get_init_inputs()]
                inputs = [a.to(device) if isinstance(a, torch.Tensor) else a for a in spec.get_inputs()]
                t0 = time.perf_counter()
                try:
                    ref = spec.Model(*init).to(device)(*inputs)
                    got = kernel.ModelNew(*init).to(device)(*inputs)
                    same, why = outputs_identical(got, ref)
                except Exception as e:  # keep the reason: a crash on one shape must not hide the others
                    same, why = False, f"{type(e).__name__}: {e}"
                out.append({"case": case, "shape": shape_name, "draw": draw, "ok": same, "why": why,
                            "seconds": round(time.perf_counter() - t0, 3)})
                log.log(logging.INFO if same else logging.ERROR, "check %s %s draw %d: %s %s", case,
                        shape_name, draw, "identical" if same else "MISMATCH", why)
    finally:
        for k, v in base.items():
            setattr(spec, k, v)
    return out
