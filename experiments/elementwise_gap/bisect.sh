#!/usr/bin/env bash
# One-off (issue 35), for the next device call: the lowered ReLU draft times 4,228 us in a second process on
# the imported shelf and eager 4,238 (bench.py, call 13), yet `workbench eval` reports 5,272 against 4,348
# (call 11). Which of the harness's settings makes the difference: `workbench eval --json` of the same draft
# at the published size with each setting off in turn, one job at a time, nothing else on the GPU.
#   bash experiments/elementwise_gap/bisect.sh OUTDIR [PROBLEM]      (default 19_ReLU)
set -uo pipefail
out=$1 p=${2:-19_ReLU}; mkdir -p "$out"
spec=.kernelbench/level1/$p.py
python3 -m workbench.cli lower "$spec" --out "$out/$p.py" 2>>"$out/lower.log" || { echo "$p lower failed"; exit 1; }
for knob in default WB_GUARDS=off WB_SANDBOX=off WB_DEVICE_OUTBOX=off WB_DEVICE_INPUTS=off WB_WARM_MS=20 \
            WB_DEVICE_TIME=off; do
  envs=(); [ "$knob" != default ] && envs=("$knob")
  env "${envs[@]}" python3 -m workbench.cli eval "$spec" "$out/$p.py" --device cuda --json \
    > "$out/$p.$knob.json" 2>>"$out/eval.log"
  python3 - "$out/$p.$knob.json" "$knob" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no json", e); raise SystemExit
d = r.get("details") or {}
print(sys.argv[2].ljust(22), r.get("status"), "candidate_us", round(r.get("runtime_us") or 0, 1), "eager_us",
      round(r.get("baseline_runtime_us") or 0, 1), "fitness", round(r.get("fitness") or 0, 3), "basis",
      r.get("timing_basis"), "slots", (d.get("device") or {}).get("slots"), "own_null_us",
      round(d.get("own_null_round_us") or 0, 1), flush=True)
PY
done | tee "$out/summary.txt"
