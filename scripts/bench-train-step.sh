#!/usr/bin/env bash
# Side-by-side training-step benchmark: referee (workloads crate, CPU engine)
# vs the PyTorch twin (scripts/torch_twin.py) with the same models, initial
# weights, batch and optimisers, in each PyTorch form: eager (the naive
# twin), fast (channels_last, F.rms_norm, SDPA causal, fused optimisers),
# compiled (torch.compile of model+loss and of the optimiser step) and
# compiled-step (the whole step compiled, compiled autograd). NOT part of
# CI: it installs torch from PyPI into a venv under /tmp.
#
# Usage: scripts/bench-train-step.sh
# Env:   THREADS (2: what `referee run` uses on a 2-core machine)  STEPS (20)
#        WARMUP (3)  ROUNDS (3)  RESNET_BATCHES ("128,256")  LLM_BATCHES ("16,32";
#        either set to "" skips that model)
#        VARIANTS ("eager fast compiled compiled-step")  VENV (/tmp/torchvenv)
#        BUILD (1; 0: do not run cargo, use STEP_BIN if it exists)
#        STEP_BIN (target/release/examples/bench_step)
#        COMPILE_MODE (torch.compile mode; default inductor's default)
#        ISA (unset: each side on its own best kernels; avx2: both restricted
#        to AVX2, see scripts/bench-machine.sh)
# Each round runs referee, then every PyTorch variant, one process each, per
# (model, batch); the table shows per cell the median over rounds of the
# median ms/step of STEPS steps after WARMUP steps (compiled forms: after
# their compile, which is reported apart), the best PyTorch form and
# referee ÷ best (below 1: referee is faster). A form that fails (e.g.
# torch.compile without a C++ compiler) is shown as failed with the reason.
# Without the bench_step example (BUILD=0 and no STEP_BIN), referee's column
# comes from `referee run --mode throughput` (real data, mean step time of
# the window) and is marked so. Each cell is appended to the history,
# docs/bench-history.jsonl (BENCH_HISTORY=off: not).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
ROUNDS=${ROUNDS:-3}
RESNET_BATCHES=${RESNET_BATCHES-128,256}
LLM_BATCHES=${LLM_BATCHES-16,32}
VARIANTS=${VARIANTS:-eager fast compiled compiled-step}
BUILD=${BUILD:-1}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
STEP_BIN=${STEP_BIN:-$CARGO_TARGET_DIR/release/examples/bench_step}
REFEREE=${REFEREE:-$CARGO_TARGET_DIR/release/referee}
export REFEREE_DATA_DIR=${REFEREE_DATA_DIR:-$PWD/data}
. scripts/bench-machine.sh

if [ "$BUILD" = 1 ]; then
    cargo build -q -p referee-workloads --release --example bench_step
fi
REF_SRC=bench_step
if [ ! -x "$STEP_BIN" ]; then
    REF_SRC=throughput
    echo "no $STEP_BIN: referee's column from \`referee run --mode throughput\` (real data, window mean)" >&2
    [ -x "$REFEREE" ] || { echo "no $REFEREE either" >&2; exit 2; }
fi
PY=$(scripts/torch-venv.sh)

OUT=$(mktemp)
TMPD=$(mktemp -d)
trap 'rm -rf "$OUT" "$TMPD"' EXIT
bench_machine_line
load0=$(cut -d' ' -f1 /proc/loadavg)
cpu0=$(bench_cpu_sample)

referee_step() { # model batch
    if [ "$REF_SRC" = bench_step ]; then
        "$STEP_BIN" --model "$1" --batch "$2" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS"
        return
    fi
    local bench=mini_$1 d="$TMPD/tp-$1-$2-$RANDOM"
    "$REFEREE" run "$bench" --mode throughput --steps $((WARMUP + STEPS)) --window "$((WARMUP + 1))..$((WARMUP + STEPS + 1))" \
        --runs 1 --seed 1 --set batch_size="$2" -j "$THREADS" --no-cache-clear --quiet --out "$d" >/dev/null 2>&1 || true
    python3 - "$d/referee_run.json" "$bench" "$2" "$THREADS" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]["throughput"]
ms = r["step_seconds"] * 1e3
print(json.dumps(dict(impl="referee", model=sys.argv[2], batch=int(sys.argv[3]), threads=int(sys.argv[4]),
                      median_ms=round(ms, 2), source="throughput mode (window mean)")))
PY
}

for round in $(seq "$ROUNDS"); do
    for spec in "resnet:$RESNET_BATCHES" "llm:$LLM_BATCHES"; do
        model=${spec%%:*}
        for bb in ${spec#*:}; do
            for b in ${bb//,/ }; do
                echo "round $round: $model b$b referee" >&2
                referee_step "$model" "$b" >>"$OUT"
                for v in $VARIANTS; do
                    echo "round $round: $model b$b torch $v" >&2
                    OMP_NUM_THREADS=$THREADS "$PY" -W ignore scripts/torch_twin.py --model "$model" --batch "$b" \
                        --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" --variant "$v" \
                        ${COMPILE_MODE:+--compile-mode "$COMPILE_MODE"} >>"$OUT" 2>>"$TMPD/torch.err" ||
                        echo "{\"impl\":\"torch\",\"variant\":\"$v\",\"model\":\"mini_$model\",\"batch\":$b,\"ok\":false,\"error\":\"the process failed (exit $?)\"}" >>"$OUT"
                done
            done
        done
    done
done

steal=$(bench_steal_pct "$cpu0" "$(bench_cpu_sample)")
echo "at the end: load average $(cut -d' ' -f1-3 /proc/loadavg); $steal % of the CPUs' time stolen by the hypervisor during the run"
python3 - "$OUT" "$ROUNDS" "$VARIANTS" "$REF_SRC" "$BENCH_COMMAND" "$load0 → $(cut -d' ' -f1 /proc/loadavg); $steal % steal" \
    "$THREADS" "$STEPS" "$WARMUP" <<'PY'
import json, sys, statistics
sys.path.insert(0, "scripts")
import bench_history
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
variants = sys.argv[3].split()
keys = sorted({(r["model"], r["batch"]) for r in rows})
print(f"rounds: {sys.argv[2]}; cell = median over rounds of the median ms/step; referee from {sys.argv[4]}")
w = 16
hdr = f"{'model':<12} {'batch':>5} {'thr':>3} {'referee ms':>10} " + " ".join(f"{v + ' ms':>{w}}" for v in variants) \
      + f" {'best torch':>13} {'ref/best':>8}"
print(hdr)
print("-" * len(hdr))
failures, compile_s, recorded = [], {}, []
for m, b in keys:
    ref = [r["median_ms"] for r in rows if r["impl"] == "referee" and r["model"] == m and r["batch"] == b]
    rm = statistics.median(ref) if ref else None
    cells, best, forms = [], None, {}
    for v in variants:
        ok = [r for r in rows if r["impl"] == "torch" and r.get("variant") == v and r["model"] == m
              and r["batch"] == b and r.get("ok")]
        bad = [r for r in rows if r["impl"] == "torch" and r.get("variant") == v and r["model"] == m
               and r["batch"] == b and not r.get("ok")]
        for r in bad:
            failures.append(f"{m} b{b} {v}: {r.get('error')}")
        if ok:
            t = statistics.median(r["median_ms"] for r in ok)
            forms[v] = round(t, 2)
            cells.append(f"{t:>{w}.1f}")
            if best is None or t < best[1]:
                best = (v, t)
            cs = [r["compile_s"] for r in ok if r.get("compile_s")]
            if cs:
                compile_s[(m, b, v)] = statistics.median(cs)
        else:
            forms[v] = None
            cells.append(f"{'failed' if bad else '-':>{w}}")
    thr = next((r["threads"] for r in rows if r["model"] == m and r.get("threads")), "")
    best_s = f"{best[0]} {best[1]:.1f}" if best else "-"
    ratio = f"{rm / best[1]:>7.2f}x" if (best and rm) else f"{'-':>8}"
    print(f"{m:<12} {b:>5} {thr:>3} {rm if rm is None else round(rm, 1):>10} " + " ".join(cells)
          + f" {best_s:>13} {ratio}")
    if best and rm:
        recorded.append(dict(subject=f"{m} b{b}", referee=round(rm, 2), peer=round(best[1], 2), peer_name=f"PyTorch {best[0]}",
                             peer_forms=forms, threads=thr or None))
print("ref/best < 1 means referee is faster than the fastest PyTorch form of that cell.")
caps = sorted({r["cpu_capability"] for r in rows if r.get("cpu_capability")})
if caps:
    print("PyTorch's ATen CPU capability: " + ", ".join(caps))
if compile_s:
    print("compile time (s, excluded above): " + ", ".join(f"{m} b{b} {v} {s:.0f}" for (m, b, v), s in compile_s.items()))
for f in sorted(set(failures)):
    print("FAILED " + f)
# Each cell into the history (docs/bench-history.jsonl).
params = dict(THREADS=int(sys.argv[7]), STEPS=int(sys.argv[8]), WARMUP=int(sys.argv[9]), ROUNDS=int(sys.argv[2]),
              VARIANTS=sys.argv[3])
for cell in recorded:
    bench_history.record("bench-train-step.sh", "step_ms", "ms", cell.pop("subject"), cell.pop("referee"), params=params,
                         command=sys.argv[5], load=sys.argv[6],
                         extra={"referee_source": sys.argv[4], "aten_capability": ", ".join(caps) or None}, **cell)
PY
