"""Shape-aware dispatch from recorded results: use the Triton kernel only where the recorded benchmark
shows it beats PyTorch, the PyTorch path everywhere else (the paper deploys Optimized FM for N <= 64 and
falls back beyond; its conv1d kernel loses out of distribution, hence dispatch there too).

A subclass names the shape parameters that key a recorded row (`key_params`), the contender names of
the kernel and the baseline, and says which shapes the kernel supports at all (`supports`). A shape that
was not recorded takes the decision of the nearest recorded shape (log-distance over the key
parameters) when it is within `max_log_distance`. Farther away, a cost model fitted to the recorded
shapes decides (`cost_model`: launch cost plus a per-unit cost of `work(params)`, per contender and launch
mode), and only where the fit is trustworthy and the kernel's predicted win is clear; else PyTorch.

Why not PyTorch for everything unrecorded: MapId's spec shapes (620 ids) lie far from the recorded grid
(40,000-200,000 ids), and on the H200 the blanket fallback ran the four-operator chain at 25.7 and 45.0 us
where the one-launch kernel took 4.9 and 5.9 us: at small sizes both are launch-bound, which the
recorded intercepts already say.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from case_studies.common.results import read_rows


def launch_mode() -> str:
    """"graph" while the current CUDA stream is being captured into a graph, else "plain"."""
    return "graph" if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing() else "plain"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    use_kernel: bool
    reason: str
    matched: dict[str, Any] | None = None     # the recorded shape the decision came from
    kernel_us: float | None = None
    baseline_us: float | None = None


class ShapeDispatcher:
    key_params: tuple[str, ...] = ()
    exact_params: tuple[str, ...] = ()   # key params that must match exactly (kernel size, stride, ...)
    kernel_contender: str = "triton"
    baseline_contender: str = "eager"
    # Without a launch mode, the kernel must win in every mode recorded for the shape (a user may or may
    # not replay a CUDA graph; a dispatcher that helps one and hurts the other is not "never slower").
    modes: tuple[str, ...] = ("plain", "graph")
    margin: float = 1.0            # kernel_us * margin < baseline_us to pick the kernel
    max_log_distance: float = math.log(2.0)
    # the cost model, for shapes farther than max_log_distance from every recorded one
    work_params: tuple[str, ...] | None = None   # work(params) = their product; None: the non-exact key params
    model_min_points: int = 3      # distinct recorded work values a fit needs
    model_margin: float = 1.25     # predicted kernel_us * model_margin < predicted baseline_us, every mode
    max_extrapolation: float = 4.0  # no prediction past this multiple of the largest recorded work

    def __init__(self, results_csv: str | Path | None = None, rows: list[dict[str, Any]] | None = None):
        if rows is None:
            rows = read_rows(results_csv) if results_csv is not None and Path(results_csv).exists() else []
            if results_csv is not None and not rows:
                log.warning("no recorded results at %s: every shape falls back to PyTorch", results_csv)
        self._table: dict[tuple[str, tuple], dict[tuple[str, str], float]] = {}
        for r in rows:
            if not self.reads(r):
                continue
            params = json.loads(r["params"]) if isinstance(r["params"], str) else r["params"]
            key = tuple(params[k] for k in self.key_params)
            cell = self._table.setdefault((r["dtype"], key), {})
            prev = cell.get((r["contender"], r["mode"]))
            # a shape measured twice (two sweeps) keeps the slower kernel, the faster baseline: conservative
            med = float(r["median_us"])
            if prev is None:
                cell[(r["contender"], r["mode"])] = med
            elif r["contender"] == self.kernel_contender:
                cell[(r["contender"], r["mode"])] = max(prev, med)
            else:
                cell[(r["contender"], r["mode"])] = min(prev, med)

    @classmethod
    def reads(cls, row: dict[str, Any]) -> bool:
        """Whether a recorded row is one this dispatcher decides from (its contenders and launch modes, a
        measured median, every key parameter): the rows its shipped table (`dispatch.csv`) keeps."""
        if row.get("status") != "ok" or row.get("median_us") in (None, ""):
            return False
        if row.get("contender") not in (cls.kernel_contender, cls.baseline_contender) or \
                row.get("mode") not in cls.modes:
            return False
        params = json.loads(row["params"]) if isinstance(row["params"], str) else row["params"]
        return all(k in params for k in cls.key_params)

    # -- to override -------------------------------------------------------------------------------
    def supports(self, params: dict[str, Any], dtype: str) -> bool:
        """Whether the kernel handles this shape and dtype at all."""
        return True

    def work(self, params: dict[str, Any]) -> float:
        """The size the cost model scales with (elements moved, ids looked up, ...)."""
        names = self.work_params if self.work_params is not None else tuple(
            p for p in self.key_params if p not in self.exact_params)
        return float(math.prod(float(params[p]) for p in names))

    # ------------------------------------------------------------------------------------------------
    def recorded(self) -> list[tuple[str, dict[str, Any], bool]]:
        """(dtype, key params, kernel wins) for every recorded shape."""
        out = []
        for (dtype, key), cell in self._table.items():
            out.append((dtype, dict(zip(self.key_params, key, strict=True)), self._wins(cell)[0]))
        return out

    def _wins(self, cell: dict[tuple[str, str], float],
              modes: tuple[str, ...] | None = None) -> tuple[bool, float | None, float | None]:
        seen = [m for m in (modes or self.modes)
                if (self.kernel_contender, m) in cell and (self.baseline_contender, m) in cell]
        if not seen:
            return False, None, None
        wins = all(cell[(self.kernel_contender, m)] * self.margin < cell[(self.baseline_contender, m)]
                   for m in seen)
        m0 = seen[0]
        return wins, cell[(self.kernel_contender, m0)], cell[(self.baseline_contender, m0)]

    def decide(self, params: dict[str, Any], dtype: str, mode: str | None = None) -> Decision:
        """Kernel or PyTorch for this shape. `mode` ("plain" or "graph") compares only that launch mode's
        recorded medians: a call being captured into a CUDA graph is judged by graph replay, where a
        single fused kernel's launch cost vanishes; without `mode` the kernel must win in every mode."""
        if not self.supports(params, dtype):
            return Decision(False, "kernel does not support this shape/dtype")
        key = tuple(params[k] for k in self.key_params)
        best, best_d = None, math.inf
        for (dt, k), cell in self._table.items():
            if dt != dtype:
                continue
            if any(key[i] != k[i] for i, p in enumerate(self.key_params) if p in self.exact_params):
                continue
            d = math.sqrt(sum(math.log(max(a, 1) / max(b, 1)) ** 2 for a, b in zip(key, k, strict=True)))
            if d < best_d:
                best, best_d = (k, cell), d
        if best is None:
            return Decision(False, f"no recorded result for {dtype}")
        if best_d > self.max_log_distance:
            return self.cost_model(params, dtype, mode, best_d)
        wins, k_us, b_us = self._wins(best[1], (mode,) if mode else None)
        matched = dict(zip(self.key_params, best[0], strict=True))
        how = "recorded" if best_d == 0 else f"nearest recorded (log-distance {best_d:.2f})"
        return Decision(wins, f"{how}: kernel {'wins' if wins else 'loses'}", matched, k_us, b_us)


    def cost_model(self, params: dict[str, Any], dtype: str, mode: str | None = None,
                   nearest: float = math.inf) -> Decision:
        """Kernel or PyTorch for a shape far from every recorded one: per launch mode, `t = a + b * work`
        fitted by least squares to the recorded shapes of this dtype (and these exact params) for the
        kernel and for the baseline; the kernel only if every mode's fit has enough distinct points,
        non-negative a and b for both, `work` within the extrapolation bound, and the kernel's prediction
        beats the baseline's by `model_margin`. Anything else: PyTorch, with the reason."""
        far = f"nearest recorded shape is too far (log-distance {nearest:.2f})"
        key = tuple(params[k] for k in self.key_params)
        pts: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for (dt, k), cell in self._table.items():
            if dt != dtype or any(key[i] != k[i] for i, p in enumerate(self.key_params) if p in self.exact_params):
                continue
            w = self.work(dict(zip(self.key_params, k, strict=True)))
            for cm, us in cell.items():
                pts.setdefault(cm, []).append((w, us))
        w_q = self.work(params)
        preds: dict[str, tuple[float, float]] = {}
        for m in ((mode,) if mode else self.modes):
            fits = [_fit_line(pts.get((c, m), []), self.model_min_points)
                    for c in (self.kernel_contender, self.baseline_contender)]
            if None in fits:
                continue
            top = max(w for w, _ in pts[(self.kernel_contender, m)])
            if not 0 <= w_q <= self.max_extrapolation * top:
                return Decision(False, f"{far}; work {w_q:.3g} outside the cost model's range (max {top:.3g})")
            preds[m] = tuple(a + b * w_q for a, b in fits)   # type: ignore[misc]
        if not preds:
            return Decision(False, f"{far}; too few recorded shapes for a cost model")
        wins = all(k * self.model_margin < b for k, b in preds.values())
        m0 = next(iter(preds))
        detail = ", ".join(f"{m}: kernel {k:.1f} us vs {b:.1f}" for m, (k, b) in preds.items())
        return Decision(wins, f"{far}; cost model (launch + per-unit fit): {detail}: kernel "
                              f"{'wins' if wins else 'does not win clearly'}", None, preds[m0][0], preds[m0][1])


def _fit_line(points: list[tuple[float, float]], min_points: int) -> tuple[float, float] | None:
    """(a, b) of `t = a + b * w` by least squares, or None: fewer than `min_points` distinct w, or a fit
    with a negative launch cost or per-unit cost (a shape that would run faster for being larger)."""
    if len({w for w, _ in points}) < min_points:
        return None
    n = len(points)
    mw = sum(w for w, _ in points) / n
    mt = sum(t for _, t in points) / n
    sww = sum((w - mw) ** 2 for w, _ in points)
    b = sum((w - mw) * (t - mt) for w, t in points) / sww
    a = mt - b * mw
    return (a, b) if a >= 0 and b >= 0 else None


class CachedDecisions:
    """A case study's per-call dispatch: the dispatcher is built on first use (it reads the recorded
    CSV), and each decision is memoized by the call's shapes, dtype, device and launch mode, so the hot
    path pays one dict lookup."""

    def __init__(self, make_dispatcher: Callable[[], ShapeDispatcher]) -> None:
        self._make = make_dispatcher
        self._dispatcher: ShapeDispatcher | None = None
        self._decisions: dict[tuple, Decision] = {}

    @property
    def dispatcher(self) -> ShapeDispatcher:
        if self._dispatcher is None:
            self._dispatcher = self._make()
        return self._dispatcher

    def decide(self, x: Any, key: tuple, params: Callable[[], dict[str, Any]]) -> Decision:
        """`x` is the tensor whose device and dtype decide; `key` the shapes and scalars that matter;
        `params` builds the dispatcher's shape parameters (only on a cache miss)."""
        # hot path (every call): no torch.cuda.is_available() (a CUDA tensor proves it), no device object
        is_cuda = x.is_cuda
        mode = ("graph" if torch.cuda.is_current_stream_capturing() else "plain") if is_cuda else "plain"
        full = (*key, x.dtype, is_cuda, mode)
        if full not in self._decisions:
            if not is_cuda:
                self._decisions[full] = Decision(False, "not a CUDA tensor")
            else:
                self._decisions[full] = self.dispatcher.decide(params(), str(x.dtype).removeprefix("torch."), mode)
        return self._decisions[full]
