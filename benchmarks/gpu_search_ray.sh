#!/usr/bin/env bash
# One device call on a 2-GPU host (nvidia-h200-x2): the offline search on two case-study specs, the harness
# checks, then the Ray evaluator across both GPUs. Run from the repository root; results go to $OUT/run.tgz.
#   needs Ray as wheels in .whl/ (the GPU image has none): see docs/scaling.md
set -uo pipefail
W=/tmp/o; mkdir -p $W/fm $W/pffn $W/harness $W/ray
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "ray install failed"; exit 3; }
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv,noheader
python3 -c "import torch, triton, ray; print('torch', torch.__version__, 'triton', triton.__version__, 'ray', ray.__version__, 'gpus', torch.cuda.device_count())"
# phase A: two searches side by side, one GPU each; the harness checks after the second one's search
(CUDA_VISIBLE_DEVICES=0 timeout 250 python3 benchmarks/search_offline_gpu.py --spec case_studies/optimized_fm/spec.py \
   --budget ${FM_BUDGET:-20} --out $W/fm > $W/fm/log.txt 2>&1; echo "fm search rc=$?") &
(export CUDA_VISIBLE_DEVICES=1
 OUT=$W/harness timeout 120 bash benchmarks/gpu_harness.sh > $W/harness/log.txt 2>&1; echo "harness rc=$?"
 for e in frame_walk traceback_walk gc_walk; do
   timeout 40 python3 -m workbench.cli eval examples/vector_add/spec.py tests/harness/exploits/$e.py --device cuda \
     >> $W/harness/exploits.txt 2>&1; echo "$e exit=$?" >> $W/harness/exploits.txt
 done
 timeout 120 python3 benchmarks/search_offline_gpu.py --spec case_studies/pffn/spec.py --budget ${PFFN_BUDGET:-10} \
   --out $W/pffn > $W/pffn/log.txt 2>&1; echo "pffn search rc=$?") &
wait
# phase B: Ray across every GPU
timeout 260 python3 benchmarks/ray_gpu_bench.py --n ${RAY_N:-12} --out $W/ray/ray_bench_gpu.json > $W/ray/log.txt 2>&1
echo "ray rc=$?"; tail -8 $W/ray/log.txt; tail -3 $W/fm/log.txt $W/pffn/log.txt; cat $W/harness/exploits.txt | tail -12
tar czf "$OUT/run.tgz" -C $W .
