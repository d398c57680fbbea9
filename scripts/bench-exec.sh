#!/usr/bin/env bash
# Benchmark: the cost of running a training program under `referee run
# --exec` (supervision, live rules, witness, closing check) against the same
# program run alone, and the live-check delay from a closed-division
# violation at init_stop to the stop. See scripts/bench_exec.py.
# Usage: scripts/bench-exec.sh [REPS]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --quiet -p referee-harness
BENCH_COMMAND="scripts/bench-exec.sh${*:+ $*}" exec .venv/bin/python scripts/bench_exec.py "${1:-5}"
