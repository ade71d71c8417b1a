"""The MBDT kernel as a case of the profiling self-check, passed in from here (the profiling package
knows none of the case studies):

    python -m profiling.selfcheck --out results/profiling/h200 --cases-from case_studies.mbdt.profile:selfcheck_case
"""
from __future__ import annotations

from typing import Any


def selfcheck_case(device: str) -> dict[str, Any]:
    """`profiling.selfcheck.Case` fields: MergeBucketizedDense at 65536 x 256 features x 32 borders, 200 MB
    moved, the full launch and a 4096-row one for the chrome trace; exact output."""
    import torch

    from case_studies.mbdt import kernel as K
    from case_studies.mbdt import reference as R
    from case_studies.mbdt import spec as S

    torch.manual_seed(0)
    lengths = S.border_lengths(256, 32)
    borders = S.make_borders(lengths)
    x = S.make_x(65536, 256, False).to(device)
    xs = x[:4096]
    padded, counts, offsets, _ = K.pack_borders(borders.to(device), lengths)
    model = R.MergeBucketizedDense(borders, lengths).to(device)
    return {"name": "mbdt", "kernel": K._mbdt_kernel,
            "run": lambda p: K.mbdt(x, padded, counts, offsets, probes=p),
            "reference": lambda: model(x),
            "run_small": lambda p: K.mbdt(xs, padded, counts, offsets, probes=p),
            "bytes": (4 + 8) * x.numel(), "atol": 0, "rtol": 0}
