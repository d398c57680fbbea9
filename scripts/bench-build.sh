#!/usr/bin/env bash
# Benchmark: the cold release build of the `referee` binary, before and after,
# in one run on this machine. Each side is a clean checkout of a git ref
# (`git worktree add --detach` in a scratch directory) built into an empty
# target directory with
#   cargo build --release --locked --offline -p referee-harness --bin referee --timings
# after the crates are fetched (downloads are not timed). Prints the CPU, the
# load average around each build, and both wall and CPU times side by side
# (appended to the history, docs/bench-history.jsonl; BENCH_HISTORY=off:
# not); each side's cargo-timings HTML is kept under the scratch directory.
# Usage: scripts/bench-build.sh BEFORE_REF [AFTER_REF]   (AFTER_REF: HEAD)
#   BENCH_BUILD_DIR: scratch directory (default: a new /tmp/referee-bench-build.*)
#   BENCH_BUILD_NICE=1: build under `nice` (a shared machine)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-machine.sh
before=${1:?usage: scripts/bench-build.sh BEFORE_REF [AFTER_REF]}
after=${2:-HEAD}
scratch=${BENCH_BUILD_DIR:-$(mktemp -d /tmp/referee-bench-build.XXXXXX)}
mkdir -p "$scratch"
nice_cmd=()
[ "${BENCH_BUILD_NICE:-0}" = 1 ] && nice_cmd=(nice)

added=()
cleanup() {
  for wt in "${added[@]}"; do git worktree remove --force "$wt" 2>/dev/null || true; done
}
trap cleanup EXIT

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "machine: $cpu, $(nproc) cores, $(free -g | awk '/^Mem:/{print $2}') GiB; $(cargo --version)"

declare -A wall cpu_s load_before load_after commit
for side in before after; do
  ref=$before; [ "$side" = after ] && ref=$after
  wt="$scratch/$side"
  rm -rf "$wt"
  git worktree add --quiet --detach "$wt" "$ref"
  added+=("$wt")
  commit[$side]=$(git -C "$wt" rev-parse --short HEAD)
  (cd "$wt" && cargo fetch --locked --quiet)
  load_before[$side]=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "building $side (${commit[$side]}) in $wt ..." >&2
  tf="$scratch/$side.time"
  (cd "$wt" && CARGO_TARGET_DIR="$wt/target" /usr/bin/time -f '%e %U %S' -o "$tf" \
    "${nice_cmd[@]}" cargo build --release --locked --offline --quiet \
    -p referee-harness --bin referee --timings) >&2
  load_after[$side]=$(cut -d' ' -f1-3 /proc/loadavg)
  read -r e u s <"$tf"
  wall[$side]=$e
  cpu_s[$side]=$(echo "$u + $s" | bc)
  mkdir -p "$scratch/timings-$side"
  cp "$wt"/target/cargo-timings/cargo-timing.html "$scratch/timings-$side/" 2>/dev/null || true
  rm -rf "$wt/target"
done

printf '\n%-8s %-10s %10s %10s   %s\n' side commit wall_s cpu_s "load average (1, 5, 15 min) before -> after"
for side in before after; do
  printf '%-8s %-10s %10.1f %10.1f   %s -> %s\n' "$side" "${commit[$side]}" "${wall[$side]}" \
    "${cpu_s[$side]}" "${load_before[$side]}" "${load_after[$side]}"
done
printf 'after/before: wall %.2f, cpu %.2f\n' \
  "$(echo "${wall[after]} / ${wall[before]}" | bc -l)" \
  "$(echo "${cpu_s[after]} / ${cpu_s[before]}" | bc -l)"
echo "cargo --timings reports: $scratch/timings-before/, $scratch/timings-after/"
for m in wall cpu; do
  if [ $m = wall ]; then b=${wall[before]} a=${wall[after]}; else b=${cpu_s[before]} a=${cpu_s[after]}; fi
  bench_record metric="build_${m}_s" unit=s subject="cold release build of referee (${commit[after]} against ${commit[before]})" \
    referee="$a" peer="$b" peer_name="referee at ${commit[before]}" params.BEFORE="$before" params.AFTER="$after" \
    params.BENCH_BUILD_NICE="${BENCH_BUILD_NICE:-0}" extra.rustc="$(rustc --version)" \
    load="before ${load_before[before]} / ${load_before[after]}, after ${load_after[before]} / ${load_after[after]}"
done
