#!/usr/bin/env bash
# The GPU test suite in one device call, its logs under $OUT (results/gpu_ci/ keeps them):
#   bash benchmarks/gpu_ci.sh [pytest folders...]     (default: tests)
# Run from the repository root on the GPU machine, with the H200 image's Python. Wheels the image lacks
# travel in .whl/ (expecttest for the OpInfo database; Ray, slimmed by benchmarks/slim_ray_wheel.py, and its
# four small dependencies) and KernelBench as published in .kernelbench/ (ignored, never committed).
set -uo pipefail
OUT=${OUT:-/tmp/gpu_ci}; mkdir -p "$OUT"
# Two of these may run side by side (the exploit suites beside the user paths): the first installs, under a lock.
if ls .whl/*.whl >/dev/null 2>&1; then
  ( flock 9; [ -e /tmp/site/.installed ] || {
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && touch /tmp/site/.installed || echo "wheel install failed: the tests that need them skip"; }
  ) 9>/tmp/site.lock
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PIP_NO_INDEX=1 PYTHONUNBUFFERED=1 WB_GPU_CI_TIMES=$OUT/paths.jsonl WB_GPU_CI_LOGS=$OUT/logs
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
  python3 -c "import ray; print('ray', ray.__version__)" 2>&1 | tail -1
  date -u; nproc; } > "$OUT/provenance.txt" 2>&1
# -q (the Makefile's) and -v cancel: -vv names each test in the log; --timeout fails a hung test alone
make test-gpu PYTHON="$(command -v python3)" GPU_TESTS="${*:-tests}" GPU_TEST_ARGS="${GPU_TEST_ARGS:--vv --timeout=300}" 2>&1 \
  | tee "$OUT/test_gpu.log" | grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|error" | tail -60
