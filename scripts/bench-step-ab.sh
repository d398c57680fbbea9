#!/usr/bin/env bash
# referee's training step at two commits, alternating in one run: the check
# to make before and after a change to the workloads crate. The step's speed
# moves with more than the code a change touches: a change to the planner,
# which the step never runs, has made the compiler lay out the model's
# products into slower code (541fe02; docs/bench-history.jsonl). NOT part
# of CI.
#
# Usage: scripts/bench-step-ab.sh OLD [NEW]
#   OLD, NEW: git revisions (NEW defaults to the working tree as it is, built
#   into target/). Each revision is checked out with `git worktree` under
#   target/ab/ and built there (bench_step, release), once per commit.
# Env: PAIRS (6)  MODEL (llm | resnet; llm)  BATCH (16 for llm, 128 for
#   resnet)  STEPS (20)  WARMUP (2)  THREADS (2)  PLAN (fixed | measure;
#   fixed: the hand-chosen blockings, no planner timing in the way)
#   ISA (see scripts/bench-machine.sh; avx2: REFEREE_CPU_KERNELS=avx2)
# Prints each pair (old, new, new ÷ old), then the medians, their ratio and
# the parameters' digest of each side (the same digest: the same training),
# and appends the medians to the history, docs/bench-history.jsonl
# (BENCH_HISTORY=off: not). A change tried and not kept is recorded as such:
#   BENCH_KEPT=false BENCH_NOTE="what was tried" scripts/bench-step-ab.sh OLD
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 OLD [NEW] (git revisions; NEW: the working tree)" >&2; exit 2; }
PAIRS=${PAIRS:-6}
MODEL=${MODEL:-llm}
case "$MODEL" in
    llm) BATCH=${BATCH:-16} ;;
    resnet) BATCH=${BATCH:-128} ;;
    *) echo "MODEL=$MODEL: expected llm or resnet" >&2; exit 2 ;;
esac
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-2}
THREADS=${THREADS:-2}
PLAN=${PLAN:-fixed}
. scripts/bench-machine.sh

# bench_step built at revision $1 ("" = the working tree); prints its path.
build() { bench_build_at "$1" examples/bench_step -p referee-workloads --example bench_step; }

echo "building $1${2:+ and $2} (bench_step, release)" >&2
old=$(build "$1")
new=$(build "${2:-}")
bench_machine_line

run() { # binary → "median_ms digest"
    local out
    out=$("$1" --model "$MODEL" --batch "$BATCH" --steps "$STEPS" --warmup "$WARMUP" \
        --threads "$THREADS" --plan "$PLAN" --digest 2>&1) || { echo "$1 failed: $out" >&2; exit 1; }
    echo "$(grep -o '"median_ms":[0-9.]*' <<<"$out" | cut -d: -f2) $(grep -o 'after [0-9]* steps: [0-9a-f]*' <<<"$out" | awk '{print substr($4, 1, 12)}')"
}

c0=$(bench_cpu_sample)
olds=() news=() digests=()
printf '%5s %10s %10s %9s\n' pair "old ms" "new ms" "new/old"
for p in $(seq "$PAIRS"); do
    # Alternating which side goes first, so that a slow spell hits both.
    if [ $((p % 2)) = 1 ]; then a=$(run "$old"); b=$(run "$new"); else b=$(run "$new"); a=$(run "$old"); fi
    olds+=("${a% *}") news+=("${b% *}") digests+=("${a#* }/${b#* }")
    printf '%5d %10s %10s %9s\n' "$p" "${a% *}" "${b% *}" "$(awk -v o="${a% *}" -v n="${b% *}" 'BEGIN {printf "%.3f", n / o}')"
done
echo "at the end: load average $(cut -d' ' -f1-3 /proc/loadavg); $(bench_steal_pct "$c0" "$(bench_cpu_sample)") % of the CPUs' time stolen by the hypervisor during the run"
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
mo=$(median "${olds[@]}") mn=$(median "${news[@]}")
echo "$MODEL b$BATCH, $THREADS threads, --plan $PLAN: median old $mo ms, new $mn ms, new/old $(awk -v o="$mo" -v n="$mn" 'BEGIN {printf "%.3f", n / o}')"
printf '%s\n' "${digests[@]}" | sort -u | while IFS=/ read -r a b; do
    if [ "$a" = "$b" ]; then echo "digest (both): $a…"; else echo "digests differ: old $a…, new $b… (other training, not only other speed)"; fi
done
pairs_json=$(for i in "${!olds[@]}"; do printf '[%s,%s]\n' "${olds[$i]}" "${news[$i]}"; done | paste -sd, -)
bench_record metric=step_ms unit=ms subject="mini_$MODEL b$BATCH, new against old" referee="$mn" peer="$mo" \
    peer_name="referee at $1" params.OLD="$1" params.NEW="${2:-the working tree}" params.PAIRS="$PAIRS" \
    params.STEPS="$STEPS" params.WARMUP="$WARMUP" params.THREADS="$THREADS" params.PLAN="$PLAN" \
    threads="$THREADS" extra.pairs_ms:="[$pairs_json]" extra.digests="$(printf '%s\n' "${digests[@]}" | sort -u | paste -sd' ' -)"
