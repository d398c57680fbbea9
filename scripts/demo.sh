#!/usr/bin/env bash
# The main job on a fresh machine: set-up, the training data, then one
# mini benchmark trained to its quality target on CPU (N runs under MLPerf
# timing rules), its logs checked. The benchmark is the first argument
# (default mini_llm); the other arguments go to `referee run`, e.g.
# `scripts/demo.sh mini_resnet --runs 1` or `scripts/demo.sh --runs 1`.
set -euo pipefail
cd "$(dirname "$0")/.."
bench=mini_llm
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    bench="$1"
    shift
fi
scripts/setup.sh
cargo build --release -p referee-harness
target/release/referee data prepare "$bench"
exec target/release/referee run "$bench" "$@"
