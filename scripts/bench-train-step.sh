#!/usr/bin/env bash
# Side-by-side training-step benchmark: referee (candle, workloads crate) vs a
# PyTorch twin (scripts/torch_twin.py) with the same models, shapes, batch and
# optimizer. NOT part of CI: it installs torch from PyPI into a venv under /tmp.
#
# Usage: scripts/bench-train-step.sh
# Env:   THREADS (default: nproc)  STEPS (20)  WARMUP (3)  ROUNDS (3)
#        RESNET_BATCHES ("128,256")  LLM_BATCHES ("16,32")  VENV (/tmp/torchvenv)
# Both implementations run alternately, ROUNDS times per configuration (the
# machine may be noisy); the table shows the median over rounds of the median
# ms/step of STEPS steps after WARMUP steps.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-$(nproc)}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
ROUNDS=${ROUNDS:-3}
RESNET_BATCHES=${RESNET_BATCHES:-128,256}
LLM_BATCHES=${LLM_BATCHES:-16,32}
VENV=${VENV:-/tmp/torchvenv}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}

cargo build -q -p referee-workloads --release --example bench_step
BIN="$CARGO_TARGET_DIR/release/examples/bench_step"

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    echo "creating $VENV with torch (large download, once)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q torch
fi

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
for round in $(seq "$ROUNDS"); do
    for spec in "resnet:$RESNET_BATCHES" "llm:$LLM_BATCHES"; do
        model=${spec%%:*}
        for b in ${spec#*:}; do
            b=${b//,/ }
            for bb in $b; do
                "$BIN" --model "$model" --batch "$bb" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" >>"$OUT"
                OMP_NUM_THREADS=$THREADS "$VENV/bin/python" -W ignore scripts/torch_twin.py --model "$model" --batch "$bb" \
                    --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" >>"$OUT"
            done
        done
    done
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
keys = sorted({(r["model"], r["batch"]) for r in rows})
print(f"rounds per cell: {sys.argv[2]}; cell = median over rounds of median ms/step")
hdr = f"{'model':<12} {'batch':>5} {'thr ref':>7} {'thr torch':>9} {'referee ms':>10} {'torch ms':>9} {'ref/torch':>9} {'ref samples/s':>13}"
print(hdr)
print("-" * len(hdr))
for m, b in keys:
    ref = [r for r in rows if r["impl"] == "referee" and r["model"] == m and r["batch"] == b]
    tor = [r for r in rows if r["impl"] == "torch" and r["model"] == m and r["batch"] == b]
    rm = statistics.median(r["median_ms"] for r in ref)
    tm = statistics.median(r["median_ms"] for r in tor)
    print(f"{m:<12} {b:>5} {ref[0]['threads']:>7} {tor[0]['threads']:>9} {rm:>10.1f} {tm:>9.1f} {rm / tm:>8.2f}x {b * 1e3 / rm:>13.1f}")
print("ref/torch < 1 means referee is faster.")
PY
