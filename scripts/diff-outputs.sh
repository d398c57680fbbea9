#!/usr/bin/env bash
# Byte-identity check for refactors: run two referee binaries on the same
# inputs (the real v5.0 corpus in ../shared, or CORPUS=DIR) and diff every
# output (stdout and exit code; stderr too for commands whose stderr holds
# no timings).
#
#   scripts/diff-outputs.sh BEFORE_BINARY AFTER_BINARY
#   KEEP=DIR scripts/diff-outputs.sh …   (also keeps every output in DIR)
#
# Commands compared: check (text, --json, --markdown) over the whole
# corpus under 5.0.0 and under 5.1.0 (its failure paths), summarize (text,
# --json, --csv, --markdown), package-check --json over every submitter, rcp (text and
# --json) over every benchmark directory of three submitters, compare
# --json, text, --markdown and --html of two systems' llama2_70b_lora results
# (and --html of two framework logs); perf
# (--json, text, --markdown, --html) of the perf fixtures (tests/fixtures/perf); and,
# with timestamps, digests, durations and paths masked, `run --exec --json`
# of the fake training program (tests/fixtures/exec/fake_lora.py, the 10 runs the benchmark needs)
# and `audit --rerun 1 --json` of those runs packaged and signed (the package and its
# signature made once, by BEFORE_BINARY). Exit 0 when every output is
# identical (elapsed times aside); otherwise prints the first differing
# lines of each and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
before=$(realpath "$1")
after=$(realpath "$2")
corpus=${CORPUS:-$(realpath ../shared/corpus/training_results_v5.0)}
export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

subs=()
for d in "$corpus"/*/; do subs+=("${d%/}"); done
rcp_dirs=()
for s in "${subs[@]:0:3}"; do
  while IFS= read -r d; do rcp_dirs+=("$d"); done < <(find "$s/results" -mindepth 2 -maxdepth 2 -type d | sort)
done

lora_a=$corpus/AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora
lora_b=$corpus/AMD/results/MI325X_EPYC_9575F_pytorch/llama2_70b_lora
perf=$PWD/tests/fixtures/perf
nemo=nemo/log-pretrain_llama3_8b_fp8_gpus8_tp1_pp1_cp2_vp1_mbs1_gbs128_4242.out

cases=(
  "check_5.0|check --ruleset 5.0.0 -j 2 $corpus"
  "check_5.0_json|check --ruleset 5.0.0 -j 2 --json $corpus"
  "check_5.0_md|check --ruleset 5.0.0 -j 2 --markdown $corpus"
  "check_5.1_json|check --ruleset 5.1.0 -j 2 --json $corpus"
  "summarize_json|summarize --ruleset 5.0.0 --json ${subs[*]}"
  "summarize_csv|summarize --ruleset 5.0.0 --csv ${subs[*]}"
  "summarize|summarize --ruleset 5.0.0 ${subs[*]}"
  "summarize_md|summarize --ruleset 5.0.0 --markdown ${subs[*]}"
  "package_check_json|package-check --ruleset 5.0.0 --json ${subs[*]}"
  "package_check|package-check --ruleset 5.0.0 ${subs[*]}"
  "rcp|rcp --ruleset 5.0.0 -v ${rcp_dirs[*]}"
  "rcp_json|rcp --ruleset 5.0.0 --json ${rcp_dirs[*]}"
  "compare_json|compare --json $lora_a $lora_b"
  "compare|compare $lora_a $lora_b --markdown $work/MD"
  "compare_html|compare $lora_a $lora_b --html $work/MD"
  "perf_json|perf --json --system DGX-H100 --seq-len 8192 --against published $perf/$nemo $perf/megatron/complete.out"
  "perf_scaling_json|perf --json $perf/scaling"
  "perf_status_json|perf --json $perf/status"
  "perf|perf --gpu H100 $perf/megatron/complete.out $perf/scaling"
  "perf_md|perf --markdown --gpu H100 --seq-len 8192 --against published $perf/$nemo"
  "perf_html|perf --gpu H100 $perf/megatron/complete.out $perf/scaling --html $work/MD"
  "compare_logs_html|compare --force $perf/scaling/run_08gpus.out $perf/scaling/run_16gpus.out --html $work/MD"
)

# What differs from one run of a program to the next: the work folder's
# path, the environment (it names the binary), clock readings, dates and
# durations, and the digests of files that hold them.
mask() {
  python3 - "$1" "$work" <<'PY'
import re, sys
path, work = sys.argv[1], sys.argv[2]
s = open(path, encoding="utf-8").read().replace(work, "WORK")
s = re.sub(r'"env": ?\{[^{}]*\}', '"env":ENV', s)
timed = r'[a-z_]*(?:_ms|_seconds|_minutes)|seconds|minutes'
s = re.sub(r'"(' + timed + r')": ?-?[0-9][0-9.eE+-]*', r'"\1":N', s)
s = re.sub(r'\b[0-9a-f]{64}\b', 'SHA256', s)
s = re.sub(r'\b[0-9a-f]{40}\b', 'COMMIT', s)
s = re.sub(r'\b20[0-9]{6}-[0-9]{6}\b', 'STAMP', s)
s = re.sub(r'\b20[0-9]{2}-[01][0-9]-[0-3][0-9][T ][0-9:.]+Z?', 'STAMP', s)
s = re.sub(r'\b[0-9]+(\.[0-9]+)? ?(s|ms|min)\b', r'N \2', s)
open(path, "w", encoding="utf-8").write(s)
PY
}

status=0
compare_sides() {
  local name=$1
  if cmp -s "$work/$name.before.out" "$work/$name.after.out"; then
    printf 'same    %-20s %s bytes\n' "$name" "$(wc -c <"$work/$name.after.out")"
  else
    printf 'DIFFERS %-20s\n' "$name"
    diff "$work/$name.before.out" "$work/$name.after.out" | head -20 || true
    status=1
  fi
}

for c in "${cases[@]}"; do
  name=${c%%|*}
  args=${c#*|}
  for side in before after; do
    bin=$before
    [ "$side" = after ] && bin=$after
    rm -f "$work/MD"
    set +e
    # shellcheck disable=SC2086
    "$bin" $args >"$work/$name.$side.out" 2>"$work/$name.$side.err"
    echo "exit $?" >>"$work/$name.$side.out"
    set -e
    if [ -f "$work/MD" ]; then cat "$work/MD" >>"$work/$name.$side.out"; fi
    # Elapsed times are the one thing allowed to differ.
    sed -i -E 's/[0-9]+\.[0-9]+ s([,)])/T s\1/g' "$work/$name.$side.out"
  done
  compare_sides "$name"
done

# A supervised run of the fake program, then an audit of it packaged and
# signed: the same folders on both sides (emptied in between), from a
# folder outside any git checkout.
python=$PWD/.venv/bin/python
fake=$PWD/tests/fixtures/exec/fake_lora.py
mkdir -p "$work/cwd"
for side in before after; do
  bin=$before
  [ "$side" = after ] && bin=$after
  rm -rf "$work/exec"
  set +e
  (cd "$work/cwd" && "$bin" run --exec --benchmark llama2_70b_lora --ruleset 5.0.0 --runs 10 \
    --seed 11 --cache-clear-cmd true --json -q --out "$work/exec" -- "$python" "$fake") \
    >"$work/exec_json.$side.out" 2>"$work/exec_json.$side.err"
  echo "exit $?" >>"$work/exec_json.$side.out"
  set -e
  mask "$work/exec_json.$side.out"
  if [ "$side" = before ]; then
    "$before" package "$work/exec" --out "$work/pkg" >/dev/null
    "$before" keygen --out "$work/key" >/dev/null
    "$before" sign "$work/pkg/referee" --key "$work/key" >/dev/null
  fi
done
compare_sides exec_json
for side in before after; do
  bin=$before
  [ "$side" = after ] && bin=$after
  rm -rf "$work/audit"
  set +e
  (cd "$work/cwd" && "$bin" audit "$work/pkg/referee" --rerun 1 --json --out "$work/audit") \
    >"$work/audit_json.$side.out" 2>"$work/audit_json.$side.err"
  echo "exit $?" >>"$work/audit_json.$side.out"
  set -e
  mask "$work/audit_json.$side.out"
done
compare_sides audit_json
# KEEP=DIR keeps every output (masked) for a later look.
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/*.out "$KEEP"/; fi
exit $status
