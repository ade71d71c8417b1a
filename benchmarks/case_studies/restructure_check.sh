#!/usr/bin/env bash
# The restructure check (issue 18) in one device call of about four minutes: every case study through the
# one driver (device checks, the production shapes of the declared benchmark, the dispatch pass), each row
# next to the recorded one, then a subset of `pytest -m gpu`. Results: results/case_studies/restructure_check/.
#
#   COMMIT=<sha> bash benchmarks/case_studies/restructure_check.sh      # on the GPU machine, $OUT set
#
# Budgets: torch.compile contenders are left out (tens of seconds of compilation a shape); the exact cases run
# their production-like shapes (MapId's 10 % unknown-rate grid, MBDT's paper range and production shape,
# Event Truncate at T 50 around production); rows past a case's budget are recorded as skipped.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1 WB_COMMIT="${COMMIT:-unknown}"
W=/tmp/restructure_check
rm -rf "$W" && mkdir -p "$W"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu \
    --format=csv > "$W/nvidia_smi.csv" 2>&1
python3 -c 'import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)' \
    > "$W/versions.txt" 2>&1

timeout 140 python3 benchmarks/case_studies/run.py --case optimized_fm,pffn,conv1d --shapes production \
    --out "$W/float" --commit "$WB_COMMIT" --budget-s 40 --warm-timeout-s 30
echo "float cases rc=$?" | tee -a "$W/rc.txt"

EXACT_SHAPES=v100k_b10000_u10,v100k_b5000_u10,v100k_b2000_u10,v1000k_b10000_u10,v1000k_b5000_u10,v1000k_b2000_u10
EXACT_SHAPES=$EXACT_SHAPES,paper_range,2048x64x16,f8_b1024_t50,f16_b1024_t50,f32_b1024_t50,f32_b4096_t50
timeout 85 python3 benchmarks/case_studies/run.py --case mapid,mbdt,event_truncate --shapes "$EXACT_SHAPES" \
    --out "$W/exact" --commit "$WB_COMMIT" --budget-s 25 --dispatch-budget-s 15 --fuzz 1
echo "exact cases rc=$?" | tee -a "$W/rc.txt"

timeout 25 python3 -m pytest -m gpu tests/case_studies/test_gpu.py -q -p no:cacheprovider \
    -k "float_kernels and pffn or exact_kernels and mbdt" > "$W/pytest_gpu.txt" 2>&1
echo "pytest -m gpu rc=$?" | tee -a "$W/rc.txt"
tail -3 "$W/pytest_gpu.txt"

tar czf "$OUT/restructure_check.tar.gz" -C "$W" .
for part in float exact; do
    cp "$W/$part/summary.md" "$OUT/summary_$part.md" 2>/dev/null
    cp "$W/$part/checks.json" "$OUT/checks_$part.json" 2>/dev/null
done
cat "$W/float/summary.md" "$W/exact/summary.md" 2>/dev/null | cut -c1-200 | tail -120
