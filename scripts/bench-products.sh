#!/usr/bin/env bash
# The mini LLM's dense products alone, referee vs PyTorch: referee's
# `gemm_probe` (the engine's products with the hand-chosen blockings, on the
# rayon pool) and `torch.mm` (scripts/torch_products.py) at the same shapes
# (`gemm_probe --shapes`), warm (operands in the caches) and cold (64 MiB
# written elsewhere before each product, as a training step's products find
# their operands), alternating ROUNDS times; then per shape the median over
# the rounds of each side's best GFLOP/s and referee's time ÷ PyTorch's.
# Where the LLM step lags, this says which product lags and whether the
# caches are why. Each cell is appended to the history,
# docs/bench-history.jsonl (BENCH_HISTORY=off: not). NOT part of CI: it
# installs torch from PyPI into a venv.
#
# Usage: scripts/bench-products.sh
# Env:   ROUNDS (3)  REPS (20 warm, 10 cold: each side's best of REPS per
#        round)  THREADS (2)  ISA (see scripts/bench-machine.sh; avx2: both
#        restricted to AVX2)  BUILD (1; 0: use target/release/examples/gemm_probe)
#        OUT (out/products-TIMESTAMP: each run's lines and the table)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
BUILD=${BUILD:-1}
OUT=${OUT:-out/products-$(date +%Y%m%d-%H%M%S)}
. scripts/bench-machine.sh
PROBE=$PWD/target/release/examples/gemm_probe
if [ "$BUILD" = 1 ]; then
    cargo build --release -q -p referee-workloads --example gemm_probe
fi
[ -x "$PROBE" ] || { echo "no gemm_probe at $PROBE (cargo build --release -p referee-workloads --example gemm_probe)" >&2; exit 2; }
PY=$(scripts/torch-venv.sh)
isa=()
[ "${ISA:-}" = avx2 ] && isa=(--isa avx2)
mkdir -p "$OUT"
bench_machine_line | tee "$OUT/machine.txt"
"$PROBE" --shapes >"$OUT/shapes.txt"
c0=$(bench_cpu_sample)
for mode in warm cold; do
    if [ "$mode" = warm ]; then reps=${REPS:-20} cold=(); else reps=${REPS:-10} cold=(--cold); fi
    for r in $(seq "$ROUNDS"); do
        ref() { RAYON_NUM_THREADS=$THREADS "$PROBE" "${isa[@]}" --reps "$reps" "${cold[@]}" >"$OUT/referee-$mode-$r.txt"; }
        tor() {
            OMP_NUM_THREADS=$THREADS "$PY" scripts/torch_products.py --threads "$THREADS" --reps "$reps" "${cold[@]}" \
                <"$OUT/shapes.txt" >"$OUT/torch-$mode-$r.txt"
        }
        echo "$mode round $r" >&2
        # Alternating which side goes first, so that a slow spell hits both.
        if [ $((r % 2)) = 1 ]; then ref; tor; else tor; ref; fi
    done
done
echo "$(bench_steal_pct "$c0" "$(bench_cpu_sample)") % of the CPUs' time stolen by the hypervisor during the run; THREADS=$THREADS ROUNDS=$ROUNDS" | tee "$OUT/steal.txt"
"$PY" - "$OUT" "$BENCH_COMMAND" "$ROUNDS" "$THREADS" "$(cat "$OUT/steal.txt")" <<'PYEOF' | tee "$OUT/table.txt"
import glob, os, re, statistics, sys
sys.path.insert(0, "scripts")
import bench_history
out, command, rounds, threads, steal = sys.argv[1:6]
line = re.compile(r"^\S+ (\d+x\d+x\d+ \w+ \w+): ([0-9.]+) GFLOP/s")
rates = {}
for path in sorted(glob.glob(os.path.join(out, "*-*-*.txt"))):
    side, mode, _ = os.path.basename(path).rsplit(".", 1)[0].split("-")
    with open(path) as f:
        for l in f:
            m = line.match(l)
            if m:
                rates.setdefault((mode, m.group(1)), {}).setdefault(side, []).append(float(m.group(2)))
shapes = [l.split() for l in open(os.path.join(out, "shapes.txt"))]
names = {"N": "Normal", "T": "Transposed"}
missing, recorded = [], []
print(f"{'product (m x n x k, A, B)':34} {'warm: referee':>13} {'torch':>7} {'ratio':>6}   {'cold: referee':>13} {'torch':>7} {'ratio':>6}")
for m, n, k, la, lb in shapes:
    key = f"{m}x{n}x{k} {names[la]} {names[lb]}"
    cells = []
    for mode in ("warm", "cold"):
        r = rates.get((mode, key), {})
        if "referee" in r and "torch" in r:
            a, b = statistics.median(r["referee"]), statistics.median(r["torch"])
            cells.append(f"{a:13.1f} {b:7.1f} {b / a:6.2f}")
            recorded.append((f"{m} × {n} × {k}, {'Aᵀ' if la == 'T' else 'A'}, {'Bᵀ' if lb == 'T' else 'B'}, {mode}", a, b))
        else:
            missing.append(f"{key} ({mode})")
            cells.append(f"{'-':>13} {'-':>7} {'-':>6}")
    print(f"{key:34} {cells[0]}   {cells[1]}")
print("GFLOP/s, the median over the rounds of each side's best; ratio: referee's time / PyTorch's (below 1: referee faster)")
# Each cell into the history (docs/bench-history.jsonl); ratio as in the table.
for subject, a, b in recorded:
    bench_history.record("bench-products.sh", "gflops", "GFLOP/s", subject, round(a, 1), peer=round(b, 1),
                         peer_name="PyTorch torch.mm", ratio=round(b / a, 4), command=command,
                         params=dict(ROUNDS=int(rounds), THREADS=int(threads), REPS=int(os.environ.get("REPS") or (20 if subject.endswith("warm") else 10))),
                         load=steal.split(";")[0], note="ratio: referee's time ÷ PyTorch's")
if missing:
    sys.exit(f"no rate from one side or both for {', '.join(missing)}: see the runs' files in {out}")
PYEOF
