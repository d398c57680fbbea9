#!/usr/bin/env bash
# The test command (what CI runs): set-up (idempotent), then the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --for-tests
export VIRTUAL_ENV="$PWD/.venv"
export PATH="$PWD/.venv/bin:$PATH"
export REFEREE_DATA_DIR="${REFEREE_DATA_DIR:-$PWD/data}"
cargo build --release -p referee-harness
target/release/referee data prepare fashion_mnist
target/release/referee data prepare shakespeare
cargo test --release --workspace "$@"
# The real-data pipeline on the datasets prepared above (ignored by a plain
# `cargo test`, so that it never passes without running).
cargo test --release -p referee-datasets --test real_data "$@" -- --ignored
