#!/usr/bin/env bash
# Calibrate a referee benchmark: reference runs that follow the whole
# schedule (--keep-going), at the default batch size and at a second one,
# then choose the quality target and write the reference convergence
# points (RCP table) from their curves. Seeds are fixed, so the output is
# reproducible (convergence in samples does not depend on machine speed).
#
#   scripts/calibrate.sh mini_resnet|mini_llm [RUNS_PER_BATCH_SIZE] [PARALLEL]
#
# Writes workloads/rcps/calibration_BENCHMARK.json (all curves, the target
# rule and the chosen target) and workloads/rcps/rcps_BENCHMARK.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bench="$1"; runs="${2:-10}"; par="${3:-2}"
case "$bench" in
  mini_resnet) alt=(--set batch_size=256 --set base_lr=0.2 --set warmup_steps=23 --set total_steps=336) ;;
  mini_llm)    alt=(--set batch_size=32 --set base_lr=4e-3 --set end_lr=4e-4 --set warmup_steps=30 --set total_steps=480) ;;
  *) echo "unknown benchmark $bench" >&2; exit 2 ;;
esac
cargo build --release --quiet -p referee-harness
work=out/calibration/$bench
mkdir -p "$work"
# A private copy: rebuilding referee meanwhile must not change these runs.
bin="$work/referee"
[ -x "$bin" ] || cp target/release/referee "$bin"
jobs=()
for variant in default alt; do
  for i in $(seq 0 $((runs - 1))); do
    dir="$work/$variant-$i"
    [ -f "$dir/referee_run.json" ] && continue
    rm -rf "$dir"
    extra=(); [ "$variant" = alt ] && extra=("${alt[@]}")
    jobs+=("$bin run $bench --runs 1 --keep-going --seed $((1000 + i)) -j 1 --no-cache-clear --quiet --out $dir ${extra[*]}")
  done
done
# Runs that follow the whole schedule end `aborted` (exit 1); a run failed
# only when it left no record.
printf '%s\n' "${jobs[@]}" | xargs -P "$par" -I{} sh -c '{} > /dev/null 2>&1; d=$(echo "{}" | sed "s/.*--out \([^ ]*\).*/\1/"); [ -f "$d/referee_run.json" ] || echo "failed: {}" >&2'
exec python3 scripts/calibrate.py "$bench" "$work"
