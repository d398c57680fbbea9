#!/usr/bin/env bash
# Time to train, referee vs PyTorch: `referee run BENCH --runs 1 --seed S`
# and the PyTorch trainer (scripts/torch_train.py: same data files, same
# configuration and target as referee resolves them, same seeds, same
# cadence, metric and clock) alternately, RUNS times each, on the same
# threads; then per benchmark the run times, the olympic means (fastest and
# slowest dropped), the samples to target and the ratio referee ÷ PyTorch.
# NOT part of CI: it installs torch from PyPI into a venv under /tmp.
#
# Usage: scripts/bench-time-to-train.sh [BENCHMARK...] [--variant V] [--set KEY=VALUE ...]
#        (default: mini_resnet mini_llm; V: eager|fast|compiled|compiled-step, default fast)
# Env:   RUNS (5)  THREADS (2: what `referee run` uses on a 2-core machine)
#        SEED (base seed of round 1; round r uses SEED + r - 1, the same for both)
#        LOADER (worker|preload: how the trainer loads images)  WORKERS (1)
#        CACHE_CLEAR (1: both drop the page cache before each run, as `referee
#        run` does by default; 0: neither does)  OUT (out/ttt-TIMESTAMP)
#        REFEREE (target/release/referee)  VENV (/tmp/torchvenv)
#        ISA (unset: each side on its own best kernels; avx2: both restricted
#        to AVX2, see scripts/bench-machine.sh)
# Round r runs referee first when r is odd and PyTorch first when it is even.
# Each benchmark's result is appended to the history, docs/bench-history.jsonl
# (BENCH_HISTORY=off: not).
# Run seeds: both derive run seed from the base seed the same way, so a
# round's two runs start from the same initial weights and data order.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
THREADS=${THREADS:-2}
SEED=${SEED:-1}
LOADER=${LOADER:-worker}
WORKERS=${WORKERS:-1}
CACHE_CLEAR=${CACHE_CLEAR:-1}
REFEREE=${REFEREE:-$PWD/target/release/referee}
export REFEREE_DATA_DIR=${REFEREE_DATA_DIR:-$PWD/data}
OUT=${OUT:-out/ttt-$(date +%Y%m%d-%H%M%S)}
. scripts/bench-machine.sh

benches=() variant=fast sets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --variant) variant=$2; shift 2 ;;
        --variant=*) variant=${1#*=}; shift ;;
        --set) sets+=(--set "$2"); shift 2 ;;
        mini_resnet|mini_llm) benches+=("$1"); shift ;;
        *) echo "usage: $0 [mini_resnet] [mini_llm] [--variant eager|fast|compiled|compiled-step] [--set K=V]..." >&2; exit 2 ;;
    esac
done
[ ${#benches[@]} -gt 0 ] || benches=(mini_resnet mini_llm)
[ -x "$REFEREE" ] || { echo "no referee binary at $REFEREE (cargo build --release -p referee-harness)" >&2; exit 2; }
PY=$(scripts/torch-venv.sh)
mkdir -p "$OUT"
cc_ref=() cc_torch=()
if [ "$CACHE_CLEAR" != 1 ]; then cc_ref=(--no-cache-clear); cc_torch=(--no-cache-clear); fi
echo "writing $OUT (RUNS=$RUNS THREADS=$THREADS SEED=$SEED variant=$variant loader=$LOADER/$WORKERS)" >&2
bench_machine_line | tee "$OUT/machine.txt"

for bench in "${benches[@]}"; do
    # The configuration and target as referee resolves them (a one-step
    # throughput run), given to the trainer: one source of the values.
    "$REFEREE" run "$bench" --mode throughput --steps 1 --window 1..2 --runs 1 --seed 1 -j 1 \
        --no-cache-clear --quiet "${sets[@]}" --out "$OUT/$bench-config" >/dev/null 2>&1 || true
    [ -f "$OUT/$bench-config/referee_run.json" ] || { echo "referee could not resolve $bench's configuration" >&2; exit 1; }
    for r in $(seq "$RUNS"); do
        seed=$((SEED + r - 1))
        ref() {
            echo "$bench round $r: referee (seed $seed)" >&2
            "$REFEREE" run "$bench" --runs 1 --seed "$seed" -j "$THREADS" --quiet --json "${cc_ref[@]}" "${sets[@]}" \
                --out "$OUT/$bench-referee-$r" >"$OUT/$bench-referee-$r.json" 2>"$OUT/$bench-referee-$r.err" || true
        }
        tor() {
            echo "$bench round $r: torch $variant (seed $seed)" >&2
            OMP_NUM_THREADS=$THREADS "$PY" -W ignore scripts/torch_train.py "$bench" --seed "$seed" --threads "$THREADS" \
                --variant "$variant" --loader "$LOADER" --workers "$WORKERS" --referee "$REFEREE" \
                --referee-run "$OUT/$bench-config/referee_run.json" "${cc_torch[@]}" \
                >"$OUT/$bench-torch-$r.json" 2>"$OUT/$bench-torch-$r.err" || true
        }
        # Each run's share of the CPUs' time the hypervisor stole.
        timed() { # impl function
            local c0
            c0=$(bench_cpu_sample)
            "$2"
            bench_steal_pct "$c0" "$(bench_cpu_sample)" >"$OUT/$bench-$1-$r.steal"
        }
        if [ $((r % 2)) = 1 ]; then timed referee ref; timed torch tor; else timed torch tor; timed referee ref; fi
    done
done

echo "at the end: load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 - "$OUT" "$RUNS" "$variant" "$BENCH_COMMAND" "$THREADS" "$SEED" "$LOADER/$WORKERS" "$CACHE_CLEAR" "${benches[@]}" <<'PY'
import json, os, sys
sys.path.insert(0, "scripts")
import bench_history
out, runs, variant, benches = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[9:]
command, threads, base_seed, loader, cache_clear = sys.argv[4:9]


def olympic(v):
    if len(v) >= 3:
        v = sorted(v)[1:-1]
    return sum(v) / len(v) if v else None


def steal(bench, impl, r):
    try:
        return f"{float(open(os.path.join(out, f'{bench}-{impl}-{r}.steal')).read()):>6.1f}"
    except (OSError, ValueError):
        return f"{'-':>6}"


def load(path, impl):
    """(status, minutes, samples, seed) of one run, or None."""
    try:
        lines = [l for l in open(path) if l.strip().startswith("{")]
        d = json.loads(lines[-1])
    except (OSError, IndexError, ValueError):
        return None
    r = d["runs"][0] if impl == "referee" else d
    return r["status"], r["time_to_train_minutes"], r["samples"], r["seed"]


report = {}
for bench in benches:
    print(f"\n{bench}: {runs} runs each, alternating; PyTorch variant {variant}")
    print(f"{'round':>5} {'seed':>11} {'referee min':>11} {'samples':>8} {'steal%':>6} {'torch min':>11} {'samples':>8} {'steal%':>6}")
    res = {"referee": [], "torch": []}
    for r in range(1, runs + 1):
        row = []
        for impl in ("referee", "torch"):
            x = load(os.path.join(out, f"{bench}-{impl}-{r}.json"), impl)
            res[impl].append(x)
            if x is None:
                row.append((f"{'no result':>11}", f"{'':>8}"))
            elif x[0] != "success":
                row.append((f"{x[0]:>11}", f"{x[2]:>8}"))
            else:
                row.append((f"{x[1]:>11.3f}", f"{x[2]:>8}"))
        seed = next((x[3] for x in (res["referee"][-1], res["torch"][-1]) if x), "")
        print(f"{r:>5} {seed:>11} {row[0][0]} {row[0][1]} {steal(bench, 'referee', r)} {row[1][0]} {row[1][1]} {steal(bench, 'torch', r)}")
    summary = {}
    for impl in ("referee", "torch"):
        ok = [x for x in res[impl] if x and x[0] == "success"]
        summary[impl] = dict(olympic_min=olympic([x[1] for x in ok]), successes=len(ok),
                             samples=sorted(x[2] for x in ok))
    ro, to = summary["referee"]["olympic_min"], summary["torch"]["olympic_min"]
    kind = "olympic mean" if runs >= 3 else "mean (fewer than 3 runs: nothing dropped)"
    for impl, name in (("referee", "referee"), ("torch", f"PyTorch ({variant})")):
        s = summary[impl]
        m = f"{s['olympic_min']:.3f} min" if s["olympic_min"] is not None else "-"
        print(f"  {name:<22} {kind}: {m}; {s['successes']}/{runs} reached the target; samples to target {s['samples']}")
    if ro and to:
        print(f"  referee / PyTorch: {ro / to:.2f}x  (below 1: referee trains to the target faster)")
        steals = [float(s) for s in (steal(bench, impl, r).strip() for impl in ("referee", "torch") for r in range(1, runs + 1))
                  if s not in ("-", "")]
        bench_history.record(
            "bench-time-to-train.sh", "time_to_train_min", "min", bench, round(ro, 4), peer=round(to, 4),
            peer_name=f"PyTorch {variant}", command=command,
            params=dict(RUNS=runs, THREADS=int(threads), SEED=int(base_seed), LOADER=loader, CACHE_CLEAR=int(cache_clear)),
            load=f"≤ {max(steals, default=0):.1f} % steal",
            runs_referee=[x[1] if x and x[0] == "success" else None for x in res["referee"]],
            runs_peer=[x[1] if x and x[0] == "success" else None for x in res["torch"]],
            extra={"samples_referee": summary["referee"]["samples"], "samples_peer": summary["torch"]["samples"],
                   "olympic": runs >= 3})
    if any(s["successes"] < runs for s in summary.values()):
        print("  note: a run that did not reach the target has no time to train (see its .json/.err)")
    report[bench] = summary
json.dump(report, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(f"\nper-run outputs and summary.json in {out}")
PY
