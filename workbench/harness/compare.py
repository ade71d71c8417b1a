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


# Elements per step of a value comparison: its wide (float64) temporaries stay near 0.5 GB however large
# the output (a KernelBench level-1 output of 7.5 GB in fp32 needed 30 GB of float64 copies at once).
CHUNK = 1 << 25


def _wide(x: torch.Tensor) -> torch.Tensor:
    if x.dtype.is_complex:
        return x.to(torch.complex128)
    return x.double() if x.dtype.is_floating_point else x.long()


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1)  # a view when contiguous, else one copy in the output's own dtype


@dataclass
class _Stats:
    """One output's comparison, accumulated chunk by chunk."""
    same: bool = True
    n_bad: int = 0
    first_bad: int = -1  # flat index
    got_v: Any = ""
    ref_v: Any = ""
    max_abs: float | None = None
    max_rel: float | None = None
    nan_g: int = 0
    nan_r: int = 0
    inf_g: int = 0
    inf_r: int = 0
    diff_sq: float = 0.0
    ref_sq: float = 0.0


def _scan(g: torch.Tensor, r: torch.Tensor, atol: float, rtol: float, exact: bool, describe: bool) -> _Stats:
    """Verdict and error maxima of `g` against `r` (same shape and dtype) in chunks of `CHUNK` elements;
    with `describe`, also what the mismatch message reports (only on a mismatch: a second pass)."""
    st = _Stats()
    gf, rf = _flat(g), _flat(r)
    floating = r.dtype.is_floating_point or r.dtype.is_complex
    for lo in range(0, rf.numel(), CHUNK):
        gc, rc = gf[lo:lo + CHUNK], rf[lo:lo + CHUNK]
        gd, rd = _wide(gc), _wide(rc)
        if exact or not floating:
            bad = (gd != rd) & ~(torch.isnan(gd) & torch.isnan(rd)) if floating else gd != rd
        else:
            bad = ~torch.isclose(gd, rd, atol=atol, rtol=rtol, equal_nan=True)
        nb = int(bad.sum())
        st.same = st.same and nb == 0
        if floating:
            fin = torch.isfinite(gd) & torch.isfinite(rd)
            if fin.any():
                d = torch.where(fin, (gd - rd).abs(), 0.0)
                st.max_abs = max(st.max_abs or 0.0, float(d.max()))
                st.max_rel = max(st.max_rel or 0.0, float((d / rd.abs().clamp_min(1e-12)).max()))
        elif rc.numel():
            st.max_abs = max(st.max_abs or 0.0, float((gd - rd).abs().max()))
        if not describe:
            continue
        st.n_bad += nb
        if nb and st.first_bad < 0:
            i = int(torch.nonzero(bad)[0, 0])
            st.first_bad, st.got_v, st.ref_v = lo + i, gd[i].item(), rd[i].item()
        if floating:
            st.nan_g += int(torch.isnan(gc).sum())
            st.nan_r += int(torch.isnan(rc).sum())
            st.inf_g += int(torch.isinf(gc).sum())
            st.inf_r += int(torch.isinf(rc).sum())
            fin = torch.isfinite(gd) & torch.isfinite(rd)
            st.diff_sq += float(((gd - rd)[fin].abs() ** 2).sum())
            st.ref_sq += float((rd[fin].abs() ** 2).sum())
    return st


def _describe_mismatch(name: str, got: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
                       exact: bool) -> str:
    st = _scan(got, ref, atol, rtol, exact, describe=True)
    idx = [int(i) for i in torch.unravel_index(torch.tensor(st.first_bad), tuple(ref.shape))] \
        if st.n_bad and ref.dim() else []
    msg = (f"{name}: {st.n_bad} of {ref.numel()} elements differ (atol={atol:g}, rtol={rtol:g}); "
           f"first at index {idx}: got {st.got_v} expected {st.ref_v}")
    if got.dtype.is_floating_point or got.dtype.is_complex:
        if st.nan_g != st.nan_r or st.inf_g != st.inf_r:
            msg += f"; NaN {st.nan_g} (ref {st.nan_r}), inf {st.inf_g} (ref {st.inf_r})"
        if st.ref_sq > 0:
            msg += f"; relative RMS error {(st.diff_sq / st.ref_sq) ** 0.5:.3g}"
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
        # Compared where they live (on the GPU that is much faster than a float64 pass on the host), in chunks.
        g = g.detach()
        r = r.detach().to(g.device)
        exact_here = exact or is_exact_dtype(r.dtype)
        atol, rtol = (0.0, 0.0) if exact_here else tolerance_for(r.dtype, tol_overrides, allow_tf32)
        st = _scan(g, r, atol, rtol, exact_here, describe=False)
        if st.max_abs is not None:
            cmp.max_abs_err = max(cmp.max_abs_err, st.max_abs)
        if st.max_rel is not None:
            cmp.max_rel_err = max(cmp.max_rel_err, st.max_rel)
        if not st.same:
            cmp.ok = False
            cmp.problems.append(_describe_mismatch(name, g, r, atol, rtol, exact_here))
    return cmp
