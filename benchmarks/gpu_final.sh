#!/usr/bin/env bash
# One device call on a 2-GPU host (nvidia-h200-x2): the offline search on conv1d (GPU 0) while the harness
# overhead is measured with the input cache off, then on (GPU 1). Results: $OUT/run.tgz.
set -uo pipefail
W=/tmp/o2; mkdir -p $W/conv1d $W/harness_nocache $W/harness_cache
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
(CUDA_VISIBLE_DEVICES=0 timeout ${SEARCH_S:-170} python3 benchmarks/search_offline_gpu.py \
   --spec case_studies/conv1d/spec.py --budget ${BUDGET:-12} --shapes production,odd \
   --max-wall-s $(( ${SEARCH_S:-170} - 70 )) --out $W/conv1d > $W/conv1d/log.txt 2>&1; echo "conv1d search rc=$?") &
(export CUDA_VISIBLE_DEVICES=1
 WB_INPUT_CACHE=off timeout 140 python3 benchmarks/harness_overhead.py --device cuda --repeat 2 \
   --out $W/harness_nocache > $W/harness_nocache/log.txt 2>&1; echo "overhead (cache off) rc=$?"
 WB_INPUT_CACHE=/dev/shm/wb_bench_inputs timeout 140 python3 benchmarks/harness_overhead.py --device cuda \
   --repeat 3 --out $W/harness_cache > $W/harness_cache/log.txt 2>&1; echo "overhead (cache on) rc=$?") &
wait
tail -4 $W/harness_nocache/log.txt $W/harness_cache/log.txt $W/conv1d/log.txt
tar czf "$OUT/run.tgz" -C $W .
