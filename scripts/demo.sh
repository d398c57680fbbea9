#!/usr/bin/env bash
# The main job on a fresh machine: set-up, the training data, then one
# mini benchmark trained to its quality target on CPU (N runs under MLPerf
# timing rules), its logs checked. Extra arguments go to `referee run`,
# e.g. `scripts/demo.sh mini_resnet --runs 1`.
set -euo pipefail
cd "$(dirname "$0")/.."
bench="${1:-mini_llm}"; shift || true
scripts/setup.sh
cargo build --release -p referee-harness
target/release/referee data prepare "$bench"
exec target/release/referee run "$bench" "$@"
