#!/usr/bin/env bash
# Does the kernel set change convergence? The calibration's default seeds
# (scripts/calibrate.sh: base seeds 1000…, the reference batch size, the
# whole schedule) trained again with each other kernel set of the CPU
# engine that this CPU runs; scripts/kernel_sets.py then compares every
# evaluation with the calibration's curves and the samples to target.
#
#   scripts/calibrate-kernels.sh mini_resnet|mini_llm [RUNS] [PARALLEL] [KERNELS...]
#
# KERNELS default: avx2 portable (plus avx512 when the calibration ran on
# another kernel set and this CPU has it). Needs the calibration's runs in
# out/calibration/BENCHMARK (the same binary is used: out/calibration/BENCHMARK/referee).
# Writes workloads/rcps/kernels_BENCHMARK.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bench="$1"; runs="${2:-10}"; par="${3:-2}"; shift $(( $# < 3 ? $# : 3 ))
work=out/calibration/$bench
bin="$work/referee"
[ -x "$bin" ] || { echo "run scripts/calibrate.sh $bench first ($bin is missing)" >&2; exit 2; }
kernels=("$@")
if [ ${#kernels[@]} -eq 0 ]; then
  calibrated=$(python3 -c "import json; print(json.load(open('workloads/rcps/calibration_$bench.json'))['engine'])")
  for k in avx512 avx2 portable; do
    [ "cpu-$k" = "$calibrated" ] && continue
    [ "$k" = avx512 ] && ! grep -q avx512f /proc/cpuinfo && continue
    kernels+=("$k")
  done
fi
jobs=()
for k in "${kernels[@]}"; do
  for i in $(seq 0 $((runs - 1))); do
    dir="$work/kernels-$k-$i"
    # Done, unless the time budget stopped it (then it runs again).
    if [ -f "$dir/referee_run.json" ] && ! grep -q "time budget" "$dir/referee_run.json"; then continue; fi
    rm -rf "$dir"
    # A generous budget: on a loaded machine the default 30 min could stop
    # a run before an evaluation that would have reached the target.
    jobs+=("REFEREE_CPU_KERNELS=$k $bin run $bench --runs 1 --seed $((1000 + i)) -j 1 --no-cache-clear --quiet --budget-minutes 240 --out $dir")
  done
done
# A run that ends without reaching the target still writes its record.
printf '%s\n' "${jobs[@]}" | xargs -P "$par" -I{} sh -c '{} > /dev/null 2>&1; d=$(echo "{}" | sed "s/.*--out \([^ ]*\).*/\1/"); [ -f "$d/referee_run.json" ] || echo "failed: {}" >&2'
exec python3 scripts/kernel_sets.py "$bench" "$work"
