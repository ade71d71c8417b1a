#!/usr/bin/env bash
# One device call: harness overhead on the GPU + `workbench eval --json` of every bundled example.
# Run from the repository root on the GPU machine: bash benchmarks/gpu_harness.sh  (writes to $OUT)
set -uo pipefail
export PYTHONPATH=.:${PYTHONPATH:-} PYTHONUNBUFFERED=1
OUT=${OUT:-results/harness}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
python3 benchmarks/harness_overhead.py --device cuda --repeat 3 --eval-json --out "$OUT" 2>&1 | tail -20
for ex in examples/*/; do
  n=$(basename "$ex")
  python3 -m workbench.cli eval "$ex/spec.py" "$ex/candidate.py" --device cuda --json > "$OUT/eval_cli_$n.json"
  echo "$n exit=$? $(python3 -c "import json,sys; d=json.load(open('$OUT/eval_cli_$n.json')); print(d['status'], d['speedup'], d['runtime_us'], d['baseline_runtime_us'])")"
done
python3 -m workbench.cli eval examples/vector_add/spec.py tests/harness/exploits/torch_compute.py --device cuda
python3 -m workbench.cli eval examples/vector_add/spec.py tests/harness/exploits/side_stream.py --device cuda
python3 -m workbench.cli eval examples/vector_add/spec.py tests/harness/exploits/patches_timer.py --device cuda
