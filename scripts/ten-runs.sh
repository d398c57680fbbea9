#!/usr/bin/env bash
# The proof that the formerly flaky tests no longer depend on the machine:
# ten consecutive runs of them (compare's same-code gate, exec's stop at an
# init violation, system_cli), each iteration printing the exit codes, its
# duration and the load average. Run it while the machine is loaded, e.g.
# LOAD=1 adds a parallel debug `cargo build` loop in a separate target dir.
#
#   scripts/ten-runs.sh            # on a machine other work already loads
#   LOAD=1 RUNS=10 scripts/ten-runs.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH"
export REFEREE_DATA_DIR="${REFEREE_DATA_DIR:-$PWD/data}"
RUNS=${RUNS:-10}
echo "$(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); commit $(git rev-parse --short HEAD)"
if [ "${LOAD:-0}" = 1 ]; then
    load_dir=$(mktemp -d)
    ( while true; do CARGO_TARGET_DIR="$load_dir" nice -n 5 cargo build -q -p referee-harness >/dev/null 2>&1
      rm -rf "$load_dir"/debug/.fingerprint/referee-*; done ) &
    loader=$!
    trap 'kill $loader 2>/dev/null; rm -rf "$load_dir"' EXIT
fi
cargo test --release -p referee-tests --test compare --test exec --test system_cli --no-run -q
failed=0
for i in $(seq 1 "$RUNS"); do
    t0=$(date +%s)
    log=$(mktemp)
    cargo test --release -p referee-tests --test compare -- --exact same_code_is_no_significant_change >"$log" 2>&1; a=$?
    cargo test --release -p referee-tests --test exec -- --exact a_closed_division_violation_at_init_stops_the_run_at_once >>"$log" 2>&1; b=$?
    cargo test --release -p referee-tests --test system_cli >>"$log" 2>&1; c=$?
    echo "iteration $i: compare=$a exec=$b system_cli=$c $(( $(date +%s) - t0 )) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ $a -ne 0 ] || [ $b -ne 0 ] || [ $c -ne 0 ]; then failed=$((failed + 1)); cat "$log"; fi
    rm -f "$log"
done
echo "$failed of $RUNS iterations failed"
[ "$failed" -eq 0 ]
