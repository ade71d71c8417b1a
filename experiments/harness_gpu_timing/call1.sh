#!/usr/bin/env bash
# Device call 1 of the session of 2026-12-01 afternoon (frozen): the harness timing diagnosis, then the
# lowered KernelBench candidates at full size (benchmarks/lowering_gpu.py run; .cache/lowering_gpu carried).
# Results: results/harness/gpu_timing_diag/ and results/lowering/gpu/.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1 WB_INPUT_CACHE_MB=20000
W=/tmp/call1; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$W/nvidia_smi.csv" 2>&1
python3 -c 'import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)' > "$W/versions.txt"
timeout 290 python3 experiments/harness_gpu_timing/diag.py --out "$W/diag" --budget-s 150 > "$W/diag.log" 2>&1
echo "diag rc=$?" >> "$W/rc.txt"
timeout 230 python3 benchmarks/lowering_gpu.py run --dir .cache/lowering_gpu --out "$W/lowering/gpu.csv" \
    --budget-s 200 --compile-budget-s 70 > "$W/lowering.log" 2>&1
echo "lowering rc=$?" >> "$W/rc.txt"
tar czf "$OUT/call1.tar.gz" -C "$W" .
cat "$W/rc.txt"; grep -h '^{' "$W/diag.log" | cut -c1-260; tail -4 "$W/lowering.log"
