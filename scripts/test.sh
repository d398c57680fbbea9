#!/usr/bin/env bash
# The test command (what CI runs): set-up (idempotent), then the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --for-tests
export VIRTUAL_ENV="$PWD/.venv"
export PATH="$PWD/.venv/bin:$PATH"
export REFEREE_DATA_DIR="${REFEREE_DATA_DIR:-$PWD/data}"
# The CPU planner's measured choices (docs/running.md): the tests keep
# theirs under target/, not in the user's ~/.cache.
export REFEREE_CPU_PLAN_FILE="${REFEREE_CPU_PLAN_FILE:-$PWD/target/test-cpu-plans.json}"
cargo build --release -p referee-harness
target/release/referee data prepare fashion_mnist
target/release/referee data prepare shakespeare
# The CPU kernel sets the engine's tests compare here (a set the CPU lacks
# is skipped by those tests: this line says which ran).
sets="portable"
grep -qw avx2 /proc/cpuinfo && sets="avx2 $sets"
grep -qw avx512f /proc/cpuinfo && sets="avx512 $sets"
echo "test.sh: CPU kernel sets tested on this machine: $sets" >&2
# Every test binary runs even when an earlier one fails; the exit code is
# still non-zero if any test failed.
status=0
# Commit messages after the base commit as the rule wants (skipped, with a
# note, in a shallow clone).
scripts/check-commits.sh || status=1
cargo test --release --workspace --no-fail-fast "$@" || status=1
# The real-data pipeline on the datasets prepared above (ignored by a plain
# `cargo test`, so that it never passes without running).
cargo test --release -p referee-datasets --test real_data --no-fail-fast "$@" -- --ignored || status=1
# The harness's unit tests with the MPI and GPU code compiled in (they need
# neither MPI ranks nor a GPU to run).
cargo test --release -p referee-harness --features mpi,gpu --lib --no-fail-fast "$@" || status=1
# The fast unit tests once more in the debug profile: overflow checks on.
cargo test -p referee-rules -p referee-submission -p referee-datasets --lib --no-fail-fast "$@" || status=1
# The wheel as users install it: built with maturin (reusing target/'s
# release build: only the binary is linked again), installed into a fresh
# venv with its mlperf-logging, three commands run from it.
scripts/wheel-test.sh || status=1
exit $status
