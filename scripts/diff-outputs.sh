#!/usr/bin/env bash
# Byte-identity check for refactors: run two referee binaries on the same
# inputs (the real v5.0 corpus in ../shared, or CORPUS=DIR) and diff every
# output (stdout and exit code; stderr too for commands whose stderr holds
# no timings).
#
#   scripts/diff-outputs.sh BEFORE_BINARY AFTER_BINARY
#
# Commands compared: check (text, --json, --markdown) over the whole
# corpus under 5.0.0 and under 5.1.0 (its failure paths), summarize (text,
# --json, --csv, --markdown), package-check --json over every submitter, rcp (text and
# --json) over every benchmark directory of three submitters, compare
# --json, text and --markdown of two systems' llama2_70b_lora results. Exit 0 when every output is
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
)

status=0
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
  if cmp -s "$work/$name.before.out" "$work/$name.after.out"; then
    printf 'same    %-20s %s bytes\n' "$name" "$(wc -c <"$work/$name.after.out")"
  else
    printf 'DIFFERS %-20s\n' "$name"
    diff "$work/$name.before.out" "$work/$name.after.out" | head -20 || true
    status=1
  fi
done
exit $status
