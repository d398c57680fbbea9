#!/usr/bin/env bash
# referee at two commits, alternating in one run: the check to make before a
# change lands that `referee check` and `referee run --exec` stay as fast and
# as small as they were (docs/performance.md, "Kept as fast and as small").
# NOT part of CI.
#
# Usage: scripts/bench-ab.sh OLD [NEW]
#   OLD, NEW: git revisions (NEW defaults to the working tree as it is, built
#   into target/). Each revision is checked out with `git worktree` under
#   target/ab/ and built there (referee, release), once per commit.
# Env: PAIRS (7)  CORPUS (../shared/corpus)  LINES (1000000)
# Measures, for each side, alternating which goes first: `referee check
# --json` of the v5.0 corpus, and `referee run --exec --runs 1` of
# tests/fixtures/exec/fake_lora.py printing LINES extra MLLOG lines (and that
# program alone); wall time and peak RSS of each command. Prints each pair,
# the medians and the ratios, checks that both sides print the same verdicts,
# and appends the medians to docs/bench-history.jsonl (BENCH_HISTORY=off: not).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 OLD [NEW] (git revisions; NEW: the working tree)" >&2; exit 2; }
scripts/setup.sh >/dev/null

. scripts/bench-machine.sh

# referee built at revision $1 ("" = the working tree); prints its path.
build() { bench_build_at "$1" referee -p referee-harness --bin referee; }

echo "building $1${2:+ and $2} (referee, release)" >&2
old=$(build "$1")
new=$(build "${2:-}")
BENCH_COMMAND="scripts/bench-ab.sh $*" OLD_REV="$1" NEW_REV="${2:-the working tree}" \
    exec .venv/bin/python scripts/bench_ab.py "$old" "$new"
