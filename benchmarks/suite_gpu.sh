#!/usr/bin/env bash
# A `workbench suite` run on the GPU, resumable across device calls (a call lasts at most 10 minutes):
#   bash benchmarks/suite_gpu.sh NAME SECONDS SUITE [workbench suite flags...]
#   e.g. bash benchmarks/suite_gpu.sh kb_all 480 kernelbench --root .kernelbench --draft lower --budget 8
# Starts run NAME under .runs/ (ignored), or resumes it when an earlier call's copy came along in .runs/NAME
# (carry [".runs"]); no problem starts after SECONDS (--stop-after); HARD_S=N interrupts it after N s. The run comes back as one file,
# $OUT/NAME.tar.gz (unpack it here with `tar xzf NAME.tar.gz -C .runs`), beside the command's log and the
# machine's provenance. The numbers are the suite's own: its report.json (fast_p, throughput) is the result.
set -uo pipefail
if [ $# -lt 3 ]; then sed -n 2,8p "$0"; exit 2; fi
name=$1 secs=$2 suite=$3; shift 3
OUT=${OUT:-/tmp/suite_gpu}; mkdir -p "$OUT" .runs
if ls .whl/*.whl >/dev/null 2>&1; then  # expecttest: the OpInfo database needs it, the image lacks it
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || echo "wheel install failed"
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
  date -u; nproc; } > "$OUT/provenance.txt" 2>&1
if [ -f ".runs/$name/suite.sqlite" ]; then
  how=(--resume "$name")
else
  how=(--run-id "$name")
fi
t0=$(date +%s)
# HARD_S (optional): interrupt the run then (as Ctrl-C does: finished problems kept), so the tar below still runs;
# killed 30 s later if it has not ended (the store keeps every finished problem either way)
env -u TRITON_INTERPRET ${HARD_S:+timeout -s INT -k 30 $HARD_S} python3 -m workbench.cli suite "$suite" --run-dir .runs "${how[@]}" --stop-after "$secs" "$@" > "$OUT/$name.out" 2> "$OUT/$name.log"
rc=$?
echo "exit $rc after $(( $(date +%s) - t0 )) s" >> "$OUT/$name.out"
tail -c 3000 "$OUT/$name.log"; cat "$OUT/$name.out"
tar czf "$OUT/$name.tar.gz" -C .runs "$name" && ls -la "$OUT"
exit $rc
