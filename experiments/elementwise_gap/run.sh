#!/usr/bin/env bash
# One-off (issue 35): why level 1's Tanh/GELU/HardSigmoid/Softplus/ELU drafts time ~0.87x of eager while ReLU is
# ~1.0x. Lowers each spec, then `workbench eval --json` (the product's clock) of the draft at several
# BLOCK/NUM_WARPS points, alone on the machine. Usage: bash run.sh DEVICE OUTDIR [--set NAME=VALUE ...]
set -uo pipefail
dev=$1 out=$2; shift 2; extra=("$@"); mkdir -p "$out"
for p in 19_ReLU 22_Tanh 28_HardSigmoid 21_Sigmoid 26_GELU_ 23_Softmax 36_RMSNorm_; do
  spec=.kernelbench/level1/$p.py
  python3 -m workbench.cli lower "$spec" "${extra[@]}" --out "$out/$p.py" 2>>"$out/lower.log" || { echo "$p lower failed"; continue; }
  cfgs="1024:4 4096:8"; grep -q '^BLOCK = ' "$out/$p.py" || cfgs=draft:0
  for cfg in $cfgs; do
    b=${cfg%:*} w=${cfg#*:}
    sed -e "/^BLOCK = /s/.*/BLOCK = $b/" -e "/^NUM_WARPS = /s/.*/NUM_WARPS = $w/" "$out/$p.py" > "$out/${p}_b${b}_w$w.py"
    python3 -m workbench.cli eval "$spec" "$out/${p}_b${b}_w$w.py" --device "$dev" --json "${extra[@]}" \
      > "$out/${p}_b${b}_w$w.json" 2>>"$out/eval.log"
    python3 - "$out/${p}_b${b}_w$w.json" "$p" "$b" "$w" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], sys.argv[3], sys.argv[4], "no json", e); raise SystemExit
print(sys.argv[2], "BLOCK", sys.argv[3], "warps", sys.argv[4], r.get("status"),
      "runtime_us", r.get("runtime_us"), "baseline_us", r.get("baseline_runtime_us"), "p20", r.get("runtime_p20_us"), "p80", r.get("runtime_p80_us"), "fitness", r.get("fitness"))
PY
  done
done | tee "$out/summary.txt"
