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
# Each suite run makes the trained fixtures the end-to-end tests share once
# (tests/src/lib.rs, shared_fixture), and the tests use the binary built
# above instead of asking cargo again in each test process.
export REFEREE_TEST_RUN="$(date +%s)-$$"
export REFEREE_TESTS_BUILT=1
# cargo-nextest runs the tests (one process per test, a report of slow
# tests, JUnit reports; settings in .config/nextest.toml), cargo test where
# it is not installed. Every test binary runs even when an earlier one
# fails; the exit code is still non-zero if any test failed.
reports=target/nextest/reports
rm -rf "$reports"
mkdir -p "$reports"
runs=0
if cargo nextest --version >/dev/null 2>&1; then
    # tests [--ignored] CARGO-ARGS…: one run of the suite's tests.
    tests() {
        local ignored=()
        if [ "$1" = --ignored ]; then ignored=(--run-ignored only); shift; fi
        local rc=0
        cargo nextest run --no-fail-fast "${ignored[@]}" "$@" || rc=$?
        runs=$((runs + 1))
        cp target/nextest/default/junit.xml "$reports/run-$runs.xml" 2>/dev/null || true
        return $rc
    }
else
    echo "test.sh: cargo-nextest is not installed: running cargo test (no slow-test report)" >&2
    tests() {
        local ignored=()
        if [ "$1" = --ignored ]; then ignored=(-- --ignored); shift; fi
        cargo test --no-fail-fast "$@" "${ignored[@]}"
    }
fi
# The test binaries, built before any test runs. The workspace's build
# links target/release/referee with the features the tests turn on
# (`graph`): that binary is kept for the tests of the graph engine
# (REFEREE_GRAPH_BIN, instead of a build of its own); the first test that
# needs the default binary links it again (its crates are built already).
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --release --workspace --no-run "$@"
else
    cargo test --release --workspace --no-run "$@"
fi
if grep -q "features: graph" target/release/referee; then
    mkdir -p target/release/test-bin
    cp target/release/referee target/release/test-bin/referee-graph-workspace
    export REFEREE_GRAPH_BIN="$PWD/target/release/test-bin/referee-graph-workspace"
fi
status=0
# Commit messages after the base commit as the rule wants (skipped, with a
# note, in a shallow clone).
scripts/check-commits.sh || status=1
tests --release --workspace "$@" || status=1
# The real-data pipeline on the datasets prepared above (ignored by a plain
# `cargo test`, so that it never passes without running).
tests --ignored --release -p referee-datasets --test real_data "$@" || status=1
# The harness's unit tests with the MPI and GPU code compiled in (they need
# neither MPI ranks nor a GPU to run).
tests --release -p referee-harness --features mpi,gpu --lib "$@" || status=1
# The fast unit tests once more in the debug profile: overflow checks on.
tests -p referee-rules -p referee-submission -p referee-datasets --lib "$@" || status=1
if [ "$runs" -gt 0 ]; then
    python3 scripts/slowest-tests.py 10 "$reports"/run-*.xml || true
fi
# The wheel as users install it: built with maturin (reusing target/'s
# release build: only the binary is linked again), installed into a fresh
# venv with its mlperf-logging, three commands run from it.
scripts/wheel-test.sh || status=1
exit $status
