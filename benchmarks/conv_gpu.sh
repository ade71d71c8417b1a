#!/usr/bin/env bash
# The convolutions of KernelBench level 1 through the product, in one device call:
#   bash benchmarks/conv_gpu.sh [BUDGET] [SECONDS] [extra workbench suite flags...]
#   e.g. bash benchmarks/conv_gpu.sh 8 540            (the lead's measurement: the tuner's 8 points a problem;
#        on the device machine: run(command="bash benchmarks/conv_gpu.sh 8 540", carry=[".kernelbench"]), and
#        carry [".kernelbench", ".runs"] on a later call to resume what 540 s did not reach)
#        DRY=1 bash benchmarks/conv_gpu.sh 0 60       (CPU dry run: prints the command, lowers nothing)
# Problems 54-59, 61-69, 71-79, 81-87 of level 1 (every *conv* file there: 2-D/3-D, transposed, strided,
# dilated, grouped, depthwise, pointwise), drafts lowered (--draft lower) and tuned (--budget N), timed by the
# harness against eager and torch.compile (fp32, TF32 off as the references are). A run name per commit,
# resumable across calls through benchmarks/suite_gpu.sh (carry [".runs"]); its report.json is the result.
# KB: the KernelBench root (default: the first of .kernelbench, shared/kernelbench, ../shared/kernelbench that
# holds all 31; stage it as .kernelbench, ignored, when the device copy lacks ../shared).
set -uo pipefail
budget=${1:-8} secs=${2:-540}; shift $(( $# < 2 ? $# : 2 ))
here=$(cd "$(dirname "$0")/.." && pwd)
CONV=54-59,61-69,71-79,81-87
# the problem numbers must be exactly the level's conv files (a renumbered copy would time other problems)
nconv() { ls "$1/level1" 2>/dev/null | grep -cE '^(5[4-9]|6[1-9]|7[1-9]|8[1-7])_.*conv'; }
KB=${KB:-}
if [ -z "$KB" ]; then
  for c in "$here/.kernelbench" "$here/shared/kernelbench" "$here/../shared/kernelbench"; do
    [ "$(nconv "$c")" -eq 31 ] && KB=$c && break
  done
fi
[ -n "$KB" ] || { echo "no KernelBench root with the 31 conv problems: set KB=/path/to/kernelbench"; exit 2; }
name=${NAME:-conv_l1_b${budget}_$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo nogit)}
n=$(nconv "$KB")
[ "$n" -eq 31 ] || { echo "expected 31 conv problems at $CONV in $KB/level1, found $n"; exit 2; }
cmd=(bash "$here/benchmarks/suite_gpu.sh" "$name" "$secs" kernelbench --root "$KB" --levels 1 --problems "$CONV"
     --device cuda --draft lower --budget "$budget" "$@")
echo "${cmd[*]}"
[ -n "${DRY:-}" ] && exit 0
cd "$here" && "${cmd[@]}"
