#!/usr/bin/env bash
# The wheel as its users get it: `maturin build --release` (pyproject.toml),
# the wheel installed with pip into a fresh virtual environment (which pulls
# in its pinned mlperf-logging), then three commands run from that venv with
# no environment set up: not activated, outside the checkout, no
# REFEREE_MLPERF_LOGGING. The binary must find the official rules in its own
# venv.
#   referee --version, referee check CORPUS_LOG, referee system
# Usage: scripts/wheel-test.sh [CORPUS_DIR]   (default ../shared/corpus, or $REFEREE_CORPUS)
# Needs python3 and access to PyPI (maturin, mlperf-logging). The wheel is
# compiled in ./target (or $CARGO_TARGET_DIR): after `cargo build --release`
# only the referee binary is linked again.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
corpus=${1:-${REFEREE_CORPUS:-$root/../shared/corpus}}
log="$corpus/training_results_v5.0/AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora/result_0.txt"
[ -f "$log" ] || { echo "wheel-test: no corpus log at $log (give CORPUS_DIR)" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}

# maturin in a build venv of its own, kept between runs.
tools="$CARGO_TARGET_DIR/wheel-tools"
if [ ! -x "$tools/bin/maturin" ]; then
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check 'maturin>=1.5,<2'
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/referee-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "wheel-test: maturin build --release" >&2
"$tools/bin/maturin" build --release --quiet --out "$work/wheels" >&2
wheel=$(ls "$work"/wheels/referee_mlperf-*.whl)
echo "wheel-test: built $(basename "$wheel")" >&2

python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"

# As a user would: a bare environment, a working directory of their own.
mkdir "$work/home"
cd "$work/home"
referee() {
  env -i PATH=/usr/bin:/bin HOME="$work/home" "$work/venv/bin/referee" "$@"
}
fail=0
echo "wheel-test: referee --version" >&2
version=$(referee --version) || fail=1
echo "$version"
case "$version" in
  "referee "*"(commit "*"features: "*) ;;
  *) echo "wheel-test: unexpected --version: $version" >&2; fail=1 ;;
esac

echo "wheel-test: referee check --ruleset 5.0.0 $log" >&2
if ! referee check --ruleset 5.0.0 "$log"; then
  echo "wheel-test: referee check failed on a passing corpus log" >&2
  fail=1
fi

echo "wheel-test: referee system --json" >&2
# Exit 1 is expected here: the fields no machine can tell (submitter, …)
# are listed as missing; 2 would mean the command could not run.
set +e
referee system --json >"$work/system.json"
rc=$?
set -e
if [ "$rc" -gt 1 ] || ! "$work/venv/bin/python" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["system"]) == 33, len(d["system"])
print("system:", d["system"]["host_processor_model_name"], "|", d["system"]["host_processor_core_count"], "cores")
' "$work/system.json"; then
  echo "wheel-test: referee system failed (exit $rc)" >&2
  fail=1
fi

if [ "$fail" -eq 0 ]; then
  echo "wheel-test: ok ($(basename "$wheel"))" >&2
fi
exit "$fail"
