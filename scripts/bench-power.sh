#!/usr/bin/env bash
# Benchmark `referee power sample`: sessions at 1 Hz and at 10 Hz, run side
# by side, each for SECONDS_ seconds (default 600, the 10 minutes of issue
# 29). Prints, per session: readings, missed, median and largest interval
# between readings, and referee's CPU time per reading (user + system of
# the sampler process and any children, from GNU time).
#
#   scripts/bench-power.sh                  # rapl (a simulated powercap folder) at 1 and 10 Hz + cmd at 1 Hz
#   SECONDS_=60 scripts/bench-power.sh      # a one-minute smoke run
#
# The simulated powercap folder has one package domain whose counter a shell
# loop advances by 5 J every 50 ms (100 W): the sampler does the same reads
# and wrap arithmetic as on a real /sys/class/powercap. `cmd:echo 250`
# forks a shell per reading (the cost of any `cmd:` source). Each session's
# figures are appended to the history, docs/bench-history.jsonl
# (BENCH_HISTORY=off: not).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-machine.sh
SECS=${SECONDS_:-600}
BIN=${REFEREE:-target/release/referee}
[ -x "$BIN" ] || cargo build --release -q -p referee-harness
WORK=$(mktemp -d)
trap 'kill $ADV 2>/dev/null || true; rm -rf "$WORK"' EXIT

pc="$WORK/powercap/intel-rapl:0"
mkdir -p "$pc"
echo package-0 > "$pc/name"
echo 262143328850 > "$pc/max_energy_range_uj"
echo 0 > "$pc/energy_uj"
( e=0; while :; do e=$(( (e + 5000000) % 262143328850 )); echo $e > "$pc/energy_uj.tmp"; mv "$pc/energy_uj.tmp" "$pc/energy_uj"; sleep 0.05; done ) &
ADV=$!

echo "referee power sample, ${SECS} s per session, sessions run at the same time"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%dT%H:%MZ)"

session() { # name source interval_ms
    REFEREE_POWERCAP_ROOT="$WORK/powercap" /usr/bin/time -f '%U %S' -o "$WORK/$1.time" \
        "$BIN" power sample --source "$2" --power-interval-ms "$3" --seconds "$SECS" \
        --out "$WORK/$1.txt" --json > "$WORK/$1.json"
}
session rapl_1hz rapl 1000 &
A=$!
session rapl_10hz rapl 100 &
B=$!
session cmd_1hz "cmd:echo 250" 1000 &
C=$!
wait $A $B $C

printf '\n%-10s %-13s %9s %7s %10s %11s %15s\n' session source readings missed "median ms" "largest ms" "CPU ms/reading"
for s in rapl_1hz rapl_10hz cmd_1hz; do
    python3 - "$WORK/$s.txt" "$WORK/$s.time" "$s" "$BENCH_COMMAND" "$SECS" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, sys, statistics
sys.path.insert(0, "scripts")
import bench_history
log, tm, name, command, secs, load = sys.argv[1:7]
times, missed = [], 0
for line in open(log):
    if not line.startswith(":::MLLOG "):
        if "missed" in line:
            missed += 1
        continue
    r = json.loads(line[len(":::MLLOG "):])
    if r.get("key") == "power_reading":
        times.append(r["time_ms"])
gaps = [b - a for a, b in zip(times, times[1:])]
u, s = (float(x) for x in open(tm).read().split()[:2])
src = {"rapl_1hz": "rapl", "rapl_10hz": "rapl", "cmd_1hz": "cmd:echo 250"}[name]
per = (u + s) * 1000 / max(len(times), 1)
print(f"{name:<10} {src:<13} {len(times):>9} {missed:>7} {statistics.median(gaps):>10.1f} {max(gaps):>11.1f} {per:>15.3f}")
bench_history.record("bench-power.sh", "power_cpu_ms_per_reading", "ms", f"{src}, {name.split('_')[1]}", round(per, 3),
                     command=command, params={"SECONDS_": int(secs)}, load=f"load average {load} at the end",
                     extra={"readings": len(times), "missed": missed, "median_interval_ms": round(statistics.median(gaps), 1),
                            "largest_interval_ms": round(max(gaps), 1)},
                     note="sessions run at the same time; CPU = user + system of the sampler and its children")
EOF
done
