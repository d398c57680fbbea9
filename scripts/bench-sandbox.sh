#!/usr/bin/env bash
# Benchmark: what the audit's bubblewrap sandbox costs a re-run of a
# package's program, against the same re-run with --sandbox none, in
# alternating pairs (scripts/bench_sandbox.py says what is measured).
# Usage: scripts/bench-sandbox.sh [PAIRS] [STEP_MS]   (default 7, 20)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --quiet -p referee-harness
BENCH_COMMAND="scripts/bench-sandbox.sh${*:+ $*}" exec .venv/bin/python scripts/bench_sandbox.py "$@"
