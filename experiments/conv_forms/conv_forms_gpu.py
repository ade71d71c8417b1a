"""Time a lowered draft's convolution forms on the GPU: the direct FMA form (CONV_DIRECT 1, the default for
fewer than 16 input channels a group), the flat implicit GEMM in tf32x3 and in ieee (CONV_DIRECT 0), against
eager and torch.compile, each checked against eager first; with the roofline share of each.

One-off (lab book, nothing imports it): it times with CUDA events of its own, so its numbers inform the
lowering's defaults and are never a published result (those come from `workbench suite`).

    PYTHONPATH=. python experiments/conv_forms/conv_forms_gpu.py --out $OUT \\
        ../shared/kernelbench/level2/48_Conv3d_Scaling_Tanh_Multiply_Sigmoid.py ...

Writes conv_forms.csv (problem, contender, correct, us, share, bound) and prints it. TF32 off (the suite's
condition). Nothing here runs without CUDA.
"""
from __future__ import annotations

import csv
import importlib.util
import logging
import sys
from pathlib import Path

import torch

from benchmarks import common
from workbench.lowering import lower_spec
from workbench.lowering.roofline import achieved_share, estimate_work
from workbench.tolerances import tolerance_for
from workbench.tunables import apply_config, parse_tunables

log = logging.getLogger("conv_forms_gpu")

FORMS = {"direct": {"CONV_DIRECT": 1},
         "direct_128x32": {"CONV_DIRECT": 1, "DIRECT_BLOCK_P": 128, "DIRECT_BLOCK_CO": 32},
         "direct_512x16": {"CONV_DIRECT": 1, "DIRECT_BLOCK_P": 512},
         "flat_tf32x3": {"CONV_DIRECT": 0, "MM_PRECISION": "tf32x3", "CONV_BLOCK_P": 128, "CONV_BLOCK_CO": 64,
                         "CONV_BLOCK_R": 16},
         "flat_ieee": {"CONV_DIRECT": 0}}


def _load(path: Path, name: str):  # noqa: ANN202 - a module
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _time_us(fn, reps: int = 20) -> float:  # noqa: ANN001
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    return sorted(times)[len(times) // 2]


def _close(got, want) -> bool:  # noqa: ANN001
    got, want = (got if isinstance(got, (tuple, list)) else [got]), (want if isinstance(want, (tuple, list))
                                                                       else [want])
    atol, rtol = tolerance_for(want[0].dtype)
    return all(torch.allclose(g.float(), w.float(), atol=atol, rtol=rtol) for g, w in zip(got, want))


def run(spec_path: Path, out_dir: Path, compile_too: bool) -> list[dict]:
    res = lower_spec(spec_path)
    if res.source is None:
        return [{"problem": spec_path.stem, "contender": "draft", "correct": False, "us": "", "share": "",
                 "bound": res.diagnosis}]
    space = parse_tunables(res.source)
    ref = _load(spec_path, f"ref_{spec_path.stem}")
    work = estimate_work(spec_path)
    torch.manual_seed(0)
    model = ref.Model(*ref.get_init_inputs()).cuda().eval()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    rows = []
    with torch.no_grad():
        want = model(*inputs)
        contenders = {"eager": model}
        if compile_too:
            contenders["torch.compile"] = torch.compile(model)
        for form, cfg in FORMS.items():
            cfg = {k: v for k, v in cfg.items() if k in space.choices}
            if "CONV_DIRECT" not in cfg and form != "direct":
                continue       # no direct-form convolution in this draft: one form only
            path = out_dir / f"cand_{spec_path.stem}_{form}.py"
            path.write_text(apply_config(res.source, space, cfg))
            cand = _load(path, f"cand_{spec_path.stem}_{form}")
            torch.manual_seed(0)
            contenders[form] = cand.ModelNew(*ref.get_init_inputs()).cuda().eval()
        for name, m in contenders.items():
            try:
                ok = _close(m(*inputs), want)
                us = _time_us(lambda m=m: m(*inputs))
            except Exception as e:  # noqa: BLE001 - one contender's failure is a row, not the end of the run
                rows.append({"problem": spec_path.stem, "contender": name, "correct": False, "us": "",
                             "share": "", "bound": f"{type(e).__name__}: {str(e)[:120]}"})
                continue
            s = achieved_share(work, us)
            rows.append({"problem": spec_path.stem, "contender": name, "correct": ok, "us": round(us, 1),
                         "share": round(s.share, 3), "bound": s.bound})
    return rows


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    ap = common.parser(__doc__, out_default="runs/conv_forms")
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        log.error("no CUDA device")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for s in args.specs:
        rows += run(Path(s), out, not args.no_compile)
        for r in rows[-7:]:
            log.info("%s", r)
    with (out / "conv_forms.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["problem", "contender", "correct", "us", "share", "bound"])
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
