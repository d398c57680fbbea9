#!/usr/bin/env bash
# Benchmark (not a test): `referee perf` parsing a large multi-rank Slurm
# output file, beside a peer — a straightforward Python parser of the same
# lines, the DGX Cloud recipes' way (line by line, `re.search`), in one
# process. Both run on the same file in one invocation; medians of a few
# repetitions, referee at 1 and 2 threads.
#
#   scripts/bench-perf.sh [SIZE_MB] [REPS]      # default 1024 MB, 3 reps
#
# The file is generated in /tmp (and removed afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p referee-harness
BENCH_COMMAND="scripts/bench-perf.sh${*:+ $*}" exec python3 scripts/bench_perf.py --size-mb "${1:-1024}" --reps "${2:-3}" --referee target/release/referee
