#!/usr/bin/env bash
# CI performance-regression gate on the CPU: a small bench, compared with the
# committed baseline reports/baselines/ci-cpu.csv in two passes.
#  1. Exact: what is counted, not timed (the cost model's FLOPs and bytes, the
#     reference's memory accounting, KV bytes per token, the batch) must not
#     change at all. A change here is a change of the models or of the cost
#     model: regenerate the baseline in the same commit (see README).
#  2. Timing ratios measured in one run (Transformer/YOCO prefill and decode
#     step, YOCO/Transformer throughput): within 35%. Run to run they move
#     about 4% on the machine that made the baseline; another CPU moves them
#     more, hence the band. A ratio cancels the machine's speed, which raw
#     latencies would not.
# Usage: scripts/ci-bench.sh [PRESET] [--update]   (PRESET: the build folder under build/, default cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-cpu}
yoco=build/$preset/bin/yoco
base=reports/baselines/ci-cpu.csv
new=build/$preset/ci/ci-cpu.csv
mkdir -p "$(dirname "$new")"
"$yoco" bench --model yoco-tiny,transformer-tiny --lengths 1K,4K --gen 256 --batch 2 --decode-sample 32 \
  --repeats 3 --warmup 1 --device-name ci-cpu --out "$new"
if [ "${2:-}" = --update ]; then
  cp "$new" "$base"
  echo "[ci-bench] baseline updated: $base"
  exit 0
fi
echo "[ci-bench] exact metrics vs $base"
"$yoco" compare "$base" "$new" --exact --hide-same \
  --metrics 'flops,bytes,mem_weights_bytes,mem_kv_cache_bytes,mem_state_bytes,mem_activations_bytes,mem_total_bytes,max_batch,memory_reduction'
echo "[ci-bench] timing ratios vs $base (band 35%)"
"$yoco" compare "$base" "$new" --threshold 35% --metrics 'prefill_speedup,decode_speedup,throughput_gain'
