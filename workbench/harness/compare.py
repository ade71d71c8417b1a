"""Compare a candidate's outputs with the reference's and explain any mismatch."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.tolerances import dtype_name, is_exact_dtype, tolerance_for


@dataclass
class Comparison:
    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    problems: list[str] = field(default_factory=list)


def flatten_outputs(out: Any) -> list[Any]:
    """A forward may return a tensor or a (nested) tuple/list of tensors."""
    # The base types' own iterators: a subclass's `__iter__` (candidate code) never runs here, after `done`.
    if isinstance(out, tuple):
        items: list[Any] = []
        for o in tuple.__iter__(out):
            items.extend(flatten_outputs(o))
        return items
    if isinstance(out, list):
        items = []
        for o in list.__iter__(out):
            items.extend(flatten_outputs(o))
        return items
    return [out]


def _describe_mismatch(name: str, got: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> str:
    g = got.double() if got.dtype.is_floating_point else got.long()
    r = ref.double() if ref.dtype.is_floating_point else ref.long()
    bad = ~torch.isclose(g, r, atol=atol, rtol=rtol, equal_nan=True) if atol or rtol else g != r
    n_bad = int(bad.sum())
    idx = tuple(int(i) for i in torch.nonzero(bad)[0]) if n_bad else ()
    got_v, ref_v = (g[idx].item(), r[idx].item()) if n_bad else ("", "")
    msg = (f"{name}: {n_bad} of {bad.numel()} elements differ (atol={atol:g}, rtol={rtol:g}); "
           f"first at index {list(idx)}: got {got_v} expected {ref_v}")
    if got.dtype.is_floating_point:
        nan_g, nan_r = int(torch.isnan(got).sum()), int(torch.isnan(ref).sum())
        inf_g, inf_r = int(torch.isinf(got).sum()), int(torch.isinf(ref).sum())
        if nan_g != nan_r or inf_g != inf_r:
            msg += f"; NaN {nan_g} (ref {nan_r}), inf {inf_g} (ref {inf_r})"
        diff = (g - r)[torch.isfinite(g) & torch.isfinite(r)]
        denom = r[torch.isfinite(g) & torch.isfinite(r)].norm()
        if diff.numel() and float(denom) > 0:
            msg += f"; relative RMS error {float(diff.norm() / denom):.3g}"
    return msg


def compare_outputs(got: list[Any], ref: list[Any], *, tol_overrides: dict | None = None,
                    allow_tf32: bool = False, exact: bool = False) -> Comparison:
    """Shape, dtype, exact tensor type, then values within the dtype's tolerance."""
    cmp = Comparison(ok=True)
    if len(got) != len(ref):
        return Comparison(ok=False, problems=[f"forward returned {len(got)} outputs, expected {len(ref)}"])
    for i, (g, r) in enumerate(zip(got, ref)):
        name = f"output[{i}]"
        if not isinstance(r, torch.Tensor):
            if g != r:
                cmp.ok = False
                cmp.problems.append(f"{name}: got {g!r}, expected {r!r}")
            continue
        if type(g) is not torch.Tensor:
            cmp.ok = False
            cmp.problems.append(f"{name}: got an object of type {type(g).__name__}, expected exactly torch.Tensor")
            continue
        if g.shape != r.shape:
            cmp.ok = False
            cmp.problems.append(f"{name}: shape {list(g.shape)}, expected {list(r.shape)}")
            continue
        if g.dtype != r.dtype:
            cmp.ok = False
            cmp.problems.append(f"{name}: dtype {dtype_name(g.dtype)}, expected {dtype_name(r.dtype)}")
            continue
        # Compared where they live (on the GPU that is much faster than a float64 pass on the host).
        g = g.detach()
        r = r.detach().to(g.device)
        if exact or is_exact_dtype(r.dtype):
            atol, rtol = 0.0, 0.0
            same = torch.equal(g, r) if not r.dtype.is_floating_point else bool(
                torch.equal(torch.nan_to_num(g, nan=0.0), torch.nan_to_num(r, nan=0.0))
                and torch.equal(torch.isnan(g), torch.isnan(r)))
            gd = rd = None
        else:
            atol, rtol = tolerance_for(r.dtype, tol_overrides, allow_tf32)
            # one float64 copy of each, shared by the verdict and the error maxima (the judge's cost on a
            # host: every timed repetition judged goes through here)
            gd, rd = g.double(), r.double()
            same = bool(torch.allclose(gd, rd, atol=atol, rtol=rtol, equal_nan=True))
        if r.numel() and r.dtype.is_floating_point or (r.numel() and not is_exact_dtype(r.dtype)):
            if gd is None:
                gd, rd = g.double(), r.double()
            fin = torch.isfinite(gd) & torch.isfinite(rd)
            if fin.any():
                d = torch.where(fin, (gd - rd).abs(), 0.0)
                cmp.max_abs_err = max(cmp.max_abs_err, float(d.max()))
                cmp.max_rel_err = max(cmp.max_rel_err, float((d / rd.abs().clamp_min(1e-12)).max()))
        elif r.numel():
            d = (g.long() - r.long()).abs()
            cmp.max_abs_err = max(cmp.max_abs_err, float(d.max()))
        if not same:
            cmp.ok = False
            cmp.problems.append(_describe_mismatch(name, g, r, atol, rtol))
    return cmp
