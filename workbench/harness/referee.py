"""The fp64 referee: when a candidate's output misses the reference's, is the reference itself any closer?

KernelBench's reference is eager PyTorch in the problem's precision (fp32). For an ill-conditioned problem
(a long cancelling sum, a deep network) eager's own fp32 output sits as far from the exact result as a
correct kernel's, so a mismatch against eager says nothing about which of the two is wrong. The referee runs
the same model on the same inputs in fp64 (the IEEE reference, a copy of the model's parameters in float64),
in the trusted reference process, and measures both errors against it. The verdict stays what it was at the
harness's tolerances; the report shows the referee beside it and counts "matches fp64 as well as eager does"
apart from "correct".
"""
from __future__ import annotations

import copy
import logging
from typing import Any, Callable

import torch

log = logging.getLogger(__name__)

# The candidate matches fp64 as well as eager does when its error is no larger than eager's, with this
# slack for the rounding of the comparison itself (both errors are max-abs over the same elements).
SLACK = 1.05


def _double(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
        return x.detach().double()
    if isinstance(x, (list, tuple)):
        return type(x)(_double(v) for v in x)
    return x


def _max_abs(got: list[Any], exact: list[Any]) -> float | None:
    worst = 0.0
    for g, e in zip(got, exact):
        if not (isinstance(g, torch.Tensor) and isinstance(e, torch.Tensor) and e.dtype.is_floating_point):
            continue
        if g.shape != e.shape:
            return None
        d = (g.double() - e.to(g.device)).abs()
        d = d[torch.isfinite(d)]
        if d.numel():
            worst = max(worst, float(d.max()))
    return worst


def fp64_referee(model: torch.nn.Module, inputs: list[Any], got: list[Any], ref: list[Any],
                 flatten: Callable[[Any], list[Any]],
                 select: Callable[[list[Any]], list[Any]] | None = None) -> dict[str, Any]:
    """Eager's and the candidate's max-abs errors against the model in fp64 on the same `inputs`.

    `select` takes the fp64 outputs to the form `got` and `ref` were compared in (the judge's sampled
    positions of a large output); none: whole outputs. Never raises: a model that cannot run in fp64 (an
    integer-only op, a dtype check) gives `error`."""
    try:
        model64 = copy.deepcopy(model).double()
        with torch.no_grad():
            exact = flatten(model64(*_double(list(inputs))))
        if select is not None:
            exact = select(exact)
        eager_err = _max_abs(ref, exact)
        cand_err = _max_abs(got, exact)
        if eager_err is None or cand_err is None:
            return {"error": "output shapes differ from the fp64 model's"}
        return {"eager_fp64_err": eager_err, "candidate_fp64_err": cand_err,
                "as_good_as_eager": bool(cand_err <= eager_err * SLACK + 1e-12)}
    except Exception as exc:  # noqa: BLE001 - the referee informs; it never decides or fails a job
        log.debug("fp64 referee failed", exc_info=True)
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:200]}
