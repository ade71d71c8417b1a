#!/usr/bin/env bash
# One device call: a KernelBench slice at its published sizes on the H200, --draft lower --budget 0, fast_p against
# eager and torch.compile, candidates per hour. Run from the repository root on the GPU machine:
#   KB=.kb_carry LIMIT=200 bash benchmarks/suites_h200.sh     (writes to $OUT)
# KernelBench is never copied into the repository: the slice's files travel in an ignored folder the device call
# carries (.kb_carry/level<L>/<N>_<Name>.py, listed in .git/info/exclude), the slice being what that folder holds.
set -uo pipefail
export PYTHONPATH=.:${PYTHONPATH:-} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/suites_h200}; KB=${KB:-.kb_carry}; LIMIT=${LIMIT:-200}; RUNS=/tmp/suite_runs
mkdir -p "$OUT" "$RUNS"
# at most 8 files come back from a device call: env.txt, log.txt and the five report files
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/env.txt"
find "$KB" -name '*.py' | sort | tee -a "$OUT/env.txt"
# the suite stops at LIMIT seconds wherever it is: the store keeps every finished problem and the report is
# rewritten from it below (an incomplete run says so in report.json: "complete": false)
timeout "$LIMIT" python3 -m workbench.cli suite kernelbench --root "$KB" --levels "${LEVELS:-1,2}" --draft lower \
  --budget 0 --device cuda --workers 1 --run-dir "$RUNS" --timeout 60 --prepare-timeout 60 --no-progress \
  > "$OUT/log.txt" 2>&1
echo "suite exit $?"
run=$(ls "$RUNS" | head -1)
python3 -m workbench.cli suite report "$run" --run-dir "$RUNS"
for f in report.json report.md problems.csv fast_p.png speedups.png; do cp "$RUNS/$run/$f" "$OUT/" 2>/dev/null; done
tail -5 "$OUT/log.txt"
