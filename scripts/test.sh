#!/usr/bin/env bash
# The test command: set-up (idempotent), then the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export VIRTUAL_ENV="$PWD/.venv"
export PATH="$PWD/.venv/bin:$PATH"
cargo test --release --workspace "$@"
