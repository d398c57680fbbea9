#!/usr/bin/env bash
# Benchmark `referee sign` / `referee verify` on a ~1 GB synthetic package.
#
#   scripts/bench-sign.sh            # 8 x 100 MB + 2000 x 100 kB + 500 tiny files
#   BIG_FILES=4 BIG_MB=50 scripts/bench-sign.sh
#
# Uses the real CLI (target/release/referee) once `sign` is wired into the
# harness, otherwise the library's stand-in example `referee-sign`.
# Numbers are for a warm page cache (the package was just written): they
# measure hashing + signing, not the disk. Prints, for each step: package
# size, seconds, MB/s, threads; and a reference line with the single-core
# SHA-256 speed of this machine. Each step's MB/s is appended to the history,
# docs/bench-history.jsonl (BENCH_HISTORY=off: not).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. scripts/bench-machine.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target-submission}
BIG_FILES=${BIG_FILES:-8}
BIG_MB=${BIG_MB:-100}
SMALL_FILES=${SMALL_FILES:-2000}
SMALL_BYTES=${SMALL_BYTES:-100000}
TINY_FILES=${TINY_FILES:-500}

if grep -q 'run_sign' harness/src/cli/mod.rs 2>/dev/null; then
    MODE=cli
    cargo build --release --quiet -p referee-harness --bin referee
    BIN="$CARGO_TARGET_DIR/release/referee"
else
    MODE=example
    cargo build --release --quiet -p referee-submission --example referee-sign
    BIN="$CARGO_TARGET_DIR/release/examples/referee-sign"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/bench-sign.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PKG="$TMP/pkg"
mkdir -p "$PKG/data" "$PKG/small" "$PKG/results/sys/bench" "$PKG/code/bench"

echo "== building the package under $PKG"
for i in $(seq 0 $((BIG_FILES - 1))); do
    head -c "$((BIG_MB * 1000 * 1000))" /dev/urandom >"$PKG/data/shard_$i.bin"
done
if [ "$SMALL_FILES" -gt 0 ]; then
    head -c "$((SMALL_FILES * SMALL_BYTES))" /dev/urandom >"$TMP/small.bin"
    (cd "$PKG/small" && split -a 5 -d -b "$SMALL_BYTES" "$TMP/small.bin" part_)
    rm "$TMP/small.bin"
fi
for i in $(seq 0 $((TINY_FILES - 1))); do
    printf ':::MLLOG {"key": "eval_accuracy", "value": 0.%d}\n' "$i" \
        >"$PKG/results/sys/bench/result_$i.txt"
done
NFILES=$(find "$PKG" -type f | wc -l)
BYTES=$(du -sb "$PKG" | cut -f1)
MB=$(awk -v b="$BYTES" 'BEGIN { printf "%.1f", b / 1e6 }')
echo "package: $NFILES files, $MB MB"

KEY="$TMP/key"
if [ "$MODE" = cli ]; then
    "$BIN" keygen --out "$KEY" --comment bench >/dev/null
else
    "$BIN" keygen "$KEY" bench >/dev/null
fi
printf 'bench %s\n' "$(cat "$KEY.pub")" >"$TMP/allowed_signers"

NPROC=$(nproc)
now() { date +%s.%N; }
rate() { awk -v b="$BYTES" -v s="$1" 'BEGIN { printf "%.0f", b / 1e6 / s }'; }

# run_step NAME THREADS COMMAND...
run_step() {
    local name=$1 threads=$2
    shift 2
    local t0 t1 secs
    t0=$(now)
    RAYON_NUM_THREADS=$threads "$@" >"$TMP/out.txt" 2>&1 || {
        cat "$TMP/out.txt"
        echo "$name failed" >&2
        exit 1
    }
    t1=$(now)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    printf '%-8s %8s MB  %7s s  %6s MB/s  threads=%s\n' \
        "$name" "$MB" "$secs" "$(rate "$secs")" "$threads"
    bench_record metric="${name}_mb_s" unit=MB/s subject="$name, $MB MB package ($NFILES files), warm page cache" \
        referee="$(rate "$secs")" params.threads="$threads" params.mode="$MODE" params.BIG_FILES="$BIG_FILES" \
        params.BIG_MB="$BIG_MB" params.SMALL_FILES="$SMALL_FILES" params.SMALL_BYTES="$SMALL_BYTES" \
        params.TINY_FILES="$TINY_FILES" extra.seconds="$secs"
}

if [ "$MODE" = cli ]; then
    SIGN=("$BIN" sign "$PKG" --key "$KEY")
    VERIFY=("$BIN" verify "$PKG" --allowed-signers "$TMP/allowed_signers")
else
    SIGN=("$BIN" sign "$PKG" "$KEY")
    VERIFY=("$BIN" verify "$PKG" "$TMP/allowed_signers")
fi

echo "== $MODE: $BIN ($NPROC cores)"
# Warm the page cache once so the first timing is not a disk read.
cat "$PKG"/data/* "$PKG"/small/* >/dev/null
run_step sign "$NPROC" "${SIGN[@]}"
grep -q 'SIGNED\|wrote' "$TMP/out.txt"
run_step verify "$NPROC" "${VERIFY[@]}"
grep -q '^VERIFIED' "$TMP/out.txt" || { cat "$TMP/out.txt"; exit 1; }
run_step sign "1" "${SIGN[@]}"
run_step verify "1" "${VERIFY[@]}"

echo "== reference: single-core SHA-256 on this machine"
if grep -qm1 -o sha_ni /proc/cpuinfo 2>/dev/null; then
    echo "cpu: SHA-NI present (sha2 uses it automatically)"
else
    echo "cpu: no SHA-NI"
fi
ONE="$PKG/data/shard_0.bin"
if [ -f "$ONE" ]; then
    t0=$(now)
    for _ in 1 2 3; do sha256sum "$ONE" >/dev/null; done
    t1=$(now)
    SZ=$(stat -c %s "$ONE")
    awk -v b="$SZ" -v a="$t0" -v c="$t1" \
        'BEGIN { printf "sha256sum: %.0f MB/s (1 core, 3 x %.0f MB)\n", 3 * b / 1e6 / (c - a), b / 1e6 }'
fi
if command -v openssl >/dev/null; then
    openssl speed -seconds 2 -bytes 1048576 sha256 2>/dev/null |
        awk '/^sha256/ { printf "openssl speed sha256 (1 MiB blocks, 1 core): %.0f MB/s\n", $2 / 1000 }' || true
fi
