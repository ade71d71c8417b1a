"""Run a lowered candidate in-process against its spec's Model (the primitive tests' comparator)."""
from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from workbench.tolerances import tolerance_for


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def flat(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return [o for x in out for o in flat(x)]
    return [out]


def check_candidate(spec_path: Path, source: str, tmp: Path, seed: int = 0) -> None:
    """ModelNew (from `source`) equals Model on seeded inputs, within the dtype's tolerance."""
    ref = load_module(spec_path, f"ref_{spec_path.stem}")
    cand_path = tmp / f"cand_{spec_path.stem}.py"
    cand_path.write_text(source)
    cand = load_module(cand_path, f"cand_{spec_path.stem}")
    torch.manual_seed(seed)
    model = ref.Model(*ref.get_init_inputs())
    torch.manual_seed(seed)
    model_new = cand.ModelNew(*ref.get_init_inputs())
    for (k, a), (k2, b) in zip(model.state_dict().items(), model_new.state_dict().items()):
        assert k == k2 and torch.equal(a, b), f"init differs at {k}"
    torch.manual_seed(seed + 1)
    inputs = ref.get_inputs()
    with torch.no_grad():
        want = flat(model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
        got = flat(model_new(*inputs))
    assert len(want) == len(got)
    for i, (w, g) in enumerate(zip(want, got)):
        if not isinstance(w, torch.Tensor):
            assert w == g
            continue
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {i}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        atol, rtol = tolerance_for(w.dtype)
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g.float(), w.float(), atol=atol, rtol=rtol, equal_nan=True,
                                       msg=lambda m, i=i: f"output {i}: {m}")
        else:
            assert torch.equal(g, w), f"output {i}: integer mismatch"


def lowers_within_a_minute(spec_path: Path):  # noqa: ANN201 - a LoweringResult
    """lower_spec(spec_path), asserting it lowered in under 60 s (the issue's bound for a large level-3 model
    on the 2-core CPU)."""
    from workbench.lowering import lower_spec

    t0 = time.monotonic()
    res = lower_spec(spec_path)
    elapsed = time.monotonic() - t0
    assert res.source is not None, res.diagnosis
    assert elapsed < 60, f"lowering {spec_path.stem} took {elapsed:.0f} s"
    return res
