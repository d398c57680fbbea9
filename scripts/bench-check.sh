#!/usr/bin/env bash
# Benchmark: `referee check` on the whole MLPerf Training v5.0 corpus against
# the official compliance checker (mlperf-logging 4.1.68), side by side.
#   * the official total recorded in the corpus (one process per log, 2-core machine)
#   * the official checker live in ONE Python process over the whole corpus (its best)
#   * a live same-machine ratio on a sample of 20 logs (one process per log, both tools)
# Usage: scripts/bench-check.sh [CORPUS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --quiet -p referee-harness
BENCH_COMMAND="scripts/bench-check.sh${*:+ $*}" exec .venv/bin/python scripts/bench_check.py "${1:-../shared/corpus}"
