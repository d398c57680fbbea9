#!/usr/bin/env bash
# Everything a session on an x86 machine measures for docs/performance.md's
# per-family figures (issue 34), in one run and one order: the register
# tiles against the core's FMA loop (`gemm_probe --tile`), the LLM's
# products beside `torch.mm` (scripts/bench-products.sh), where the LLM
# step spends its time (`bench_step --products --passes`), the step beside
# every fast PyTorch form (scripts/bench-train-step.sh), then time to train
# for both minis (scripts/bench-time-to-train.sh) against the PyTorch form
# that stepped fastest in that step run (each mini's first batch size).
# Each part's full output is kept under OUT; the products, step and
# time-to-train parts append their figures to the history
# (docs/bench-history.jsonl, each row naming this script under `via`), and
# at the end it prints (and writes to OUT/summary.md) the goal's cells, to
# check against the logs. NOT part of CI: about 20 minutes on a 2-core VM,
# twice that where the host is slow, and it installs torch from PyPI into a
# venv under /tmp.
#
# Usage: scripts/bench-family.sh
# Env:   OUT (out/family-FAMILY-MODEL-TIMESTAMP)  THREADS (2)  ROUNDS (2,
#        the step's)  RUNS (3, time to train's)  SEED (1)
#        PARTS ("tile products profile step ttt": the parts to run, in
#        this order whatever the list's)
#        BUILD (1; 0: use the binaries under target/release as they are)
#        ISA (unset: each side on its own best kernels; avx2: both
#        restricted to AVX2, see scripts/bench-machine.sh)
# Exits non-zero if a part fails (its log under OUT says why); the parts
# before it keep their output.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
RUNS=${RUNS:-3}
SEED=${SEED:-1}
PARTS=${PARTS:-tile products profile step ttt}
BUILD=${BUILD:-1}
. scripts/bench-machine.sh
OUT=${OUT:-out/family-$(bench_cpuinfo "cpu family")-$(bench_cpuinfo model)-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
for p in $PARTS; do
    case "$p" in
        tile|products|profile|step|ttt) ;;
        *) echo "PARTS: unknown part '$p' (expected tile, products, profile, step, ttt)" >&2; exit 2 ;;
    esac
done
wants() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# Runs part $1 (the rest: its command), its output into OUT/$1.txt and on
# to the terminal; a failure names the part and its log.
part() {
    local name=$1
    shift
    echo "== $name ($(date -u +%H:%M:%S) UTC)"
    if ! "$@" 2>&1 | tee "$OUT/$name.txt"; then
        echo "bench-family: part '$name' failed; its output is in $OUT/$name.txt" >&2
        exit 1
    fi
}

bench_machine_line | tee "$OUT/machine.txt"
# The parts' rows in the history say they ran as parts of this run.
export BENCH_VIA=$BENCH_COMMAND
git rev-parse --short HEAD >"$OUT/commit.txt"
git status --porcelain --untracked-files=no | grep -q . && echo "(with uncommitted changes)" >>"$OUT/commit.txt"
if [ "$BUILD" = 1 ]; then
    cargo build --release -q -p referee-harness
    cargo build --release -q -p referee-workloads --example bench_step --example gemm_probe
fi
if wants ttt; then
    for b in mini_llm mini_resnet; do
        target/release/referee data prepare "$b" >/dev/null
    done
fi
isa_flag=()
[ "${ISA:-}" = avx2 ] && isa_flag=(--isa avx2)

wants tile && part tile target/release/examples/gemm_probe --tile "${isa_flag[@]}"
wants products && part products env BUILD=0 THREADS="$THREADS" scripts/bench-products.sh
wants profile && part profile target/release/examples/bench_step --model llm --batch 16 \
    --steps 20 --threads "$THREADS" --passes --products
if wants step; then
    part step env THREADS="$THREADS" ROUNDS="$ROUNDS" VARIANTS="fast compiled compiled-step" \
        LLM_BATCHES=16 RESNET_BATCHES=128,256 BUILD=0 scripts/bench-train-step.sh
fi
# The PyTorch form that stepped fastest for mini $1 at batch $2 (the step
# table's "best torch" column), or compiled-step where the table has none.
best_form() {
    local f=""
    [ -f "$OUT/step.txt" ] && f=$(awk -v m="$1" -v b="$2" '$1 == m && $2 == b { print $(NF - 2) }' "$OUT/step.txt")
    case "$f" in
        fast|compiled|compiled-step) echo "$f" ;;
        *) echo compiled-step ;;
    esac
}
if wants ttt; then
    for b in mini_llm mini_resnet; do
        case $b in mini_llm) batch=16 ;; *) batch=128 ;; esac
        form=$(best_form "$b" "$batch")
        part "ttt-$b" env OUT="$OUT/ttt-$b" RUNS="$RUNS" THREADS="$THREADS" SEED="$SEED" \
            scripts/bench-time-to-train.sh "$b" --variant "$form"
    done
fi

python3 - "$OUT" "$THREADS" <<'PY' | tee "$OUT/summary.md"
import json, os, re, sys, datetime

out, threads = sys.argv[1], sys.argv[2]
def read(name):
    p = os.path.join(out, name)
    return open(p).read() if os.path.exists(p) else ""

machine = read("machine.txt")
m = re.search(r"machine: (.*) \(family (\d+) model (\d+); ([^;]*);", machine)
cpu, fam, mod, flags = m.groups() if m else ("?", "?", "?", "")
restricted = "ISA restriction: avx2" in machine
kernels = "cpu-avx512" if "avx512f" in flags and not restricted else "cpu-avx2"
label = f"{cpu} (family {fam} model {mod}{', both sides AVX2 only' if restricted else ''})"
commit = read("commit.txt").split("\n")[0] or "?"
date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()

def load(text):
    a = re.search(r"load average ([\d.]+)", text)
    b = re.search(r"at the end: load average ([\d.]+)", text)
    s = re.search(r"([\d.]+) % of the CPUs' time stolen", text)
    span = f"{a.group(1)} → {b.group(1)}" if a and b else "not recorded"
    return span + (f"; {s.group(1)} % steal" if s else "")

step = read("step.txt")
if step:
    print("Step rows (| CPU | kernels | thr | date | referee at | load avg | cell | referee ms | eager | fast | compiled | compiled-step | ratio |):")
    cells = 0
    for line in step.splitlines():
        f = line.split()
        if len(f) == 10 and f[0] in ("mini_llm", "mini_resnet") and f[9].endswith("x"):
            name, batch, _, ref, fast, comp, cstep, _, _, ratio = f
            cell = f"`{name}` b{batch}" + (" (planned)" if name == "mini_llm" else "")
            print(f"| {label} | {kernels} | {threads} | {date} | {commit} | {load(step)} | {cell} | {ref} | – | {fast} | {comp} | {cstep} | **{ratio[:-1]}** |")
            cells += 1
    if not cells:
        # A form that failed leaves its cell (and the line's shape) otherwise.
        print(f"(no complete cell in {out}/step.txt: a form failed or the table changed; see the log)")
    print()

rows = []
for b in ("mini_llm", "mini_resnet"):
    text = read(f"ttt-{b}.txt")
    summary = os.path.join(out, f"ttt-{b}", "summary.json")
    if not text or not os.path.exists(summary):
        continue
    s = json.load(open(summary))[b]
    v = re.search(r"variant=(\S+)", text)
    # Each round's line: round, seed, referee min, samples, steal %, PyTorch min, samples, steal %.
    pairs = re.findall(r"^\s*\d+\s+\d+\s+[\d.]+\s+\d+\s+([\d.]+)\s+[\d.]+\s+\d+\s+([\d.]+)\s*$", text, re.M)
    steal = [float(v) for pair in pairs for v in pair]
    ref, torch = s["referee"]["olympic_min"], s["torch"]["olympic_min"]
    span = load(text).split(";")[0]
    rows.append(f"| {label} | {date} | {commit} | {span}; ≤ {max(steal, default=0):.1f} % steal | `{b}` | {v.group(1) if v else '?'} | "
                f"{len(s['referee']['samples'])} | {ref:.3f} | {torch:.3f} | **{ref / torch:.2f}** |")
if rows:
    print("Time-to-train rows (| CPU | date | referee at | load avg | benchmark | PyTorch form | runs | referee min | PyTorch min | ratio |):")
    print("\n".join(rows))
    print()
print(f"Logs: {out}/ (machine.txt, tile.txt, products.txt, profile.txt, step.txt, ttt-*.txt)")
PY
