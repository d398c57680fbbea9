#!/usr/bin/env bash
# Benchmark: `referee summarize` and `referee package-check` over the whole
# MLPerf Training v5.0 corpus, beside the official result_summarizer and
# package_checker (recorded totals of the corpus, plus a live same-machine
# run on one submitter).
# Usage: scripts/bench-summarize.sh [CORPUS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --quiet -p referee-harness
BENCH_COMMAND="scripts/bench-summarize.sh${*:+ $*}" exec .venv/bin/python scripts/bench_summarize.py "${1:-../shared/corpus}"
