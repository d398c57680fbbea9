#!/usr/bin/env bash
# The GPU proof, on a machine with an NVIDIA GPU and its driver, of a referee
# built with `--features cuda` (docs/clusters-and-gpus.md says how to build
# one without a GPU):
#   1. the GPU as nvidia-smi and referee's own probe (cudarc) see it;
#   2. NCCL: a communicator over every GPU of the node, a checked
#      all-reduce and its bandwidth (`referee system --nccl`);
#   3. a mini benchmark trained to its quality target on cuda:0 and its log
#      checked (`referee run mini_llm --device cuda:0`);
#   4. step time, throughput and MFU over a window (`--mode throughput`);
#   5. the GPU's board power through NVML (`referee power sample --source
#      nvml`), and the training run of 3. measured with `--power nvml`.
#
#   scripts/gpu-proof.sh [BIN] [OUT]     (default target-cuda/release/referee, out/gpu-proof)
#
# The CUDA libraries the binary links (cuBLAS, cuRAND, NVRTC, NCCL) are taken
# from the library path, else from the NVIDIA wheels of the machine's Python
# (PyTorch's), which this script finds. Every step runs even when one fails;
# the exit code is the number of steps that failed.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target-cuda/release/referee}
OUT=${2:-out/gpu-proof}
mkdir -p "$OUT"
export REFEREE_DATA_DIR=${REFEREE_DATA_DIR:-$PWD/data}

libs=""
for name in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13 libnccl.so.2; do
  if ! ldconfig -p | grep -q "$name"; then
    d=$(find /usr /opt /root -xdev -name "$name" -print -quit 2>/dev/null | xargs -r dirname)
    [ -n "$d" ] && libs="$libs:$d"
  fi
done
export LD_LIBRARY_PATH="${libs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

failed=0
# step NAME [--exit-1-ok] CMD…: run CMD, keep its output in $OUT/NAME.txt.
# Throughput-mode logs fail the time-to-train rules by design (no
# evaluation): those steps pass with exit 1 too.
step() {
  local name=$1 ok1=0
  shift
  if [ "$1" = --exit-1-ok ]; then
    ok1=1
    shift
  fi
  echo
  echo "=== $name: $*"
  local t0 t1
  t0=$(date +%s%N)
  "$@" 2>&1 | tee "$OUT/$name.txt"
  local rc=${PIPESTATUS[0]}
  t1=$(date +%s%N)
  echo "=== $name: exit $rc, $(((t1 - t0) / 1000000)) ms"
  [ "$rc" = 0 ] || { [ "$ok1" = 1 ] && [ "$rc" = 1 ]; } || failed=$((failed + 1))
}

step gpu nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
step version "$BIN" --version
step ldd sh -c "ldd '$BIN' | grep -E 'cuda|cublas|curand|nvrtc|nccl|not found'"
step nccl "$BIN" system --nccl
step nccl-json "$BIN" system --nccl --nccl-mib 1024 --json
step power "$BIN" power sample --source nvml --seconds 5 --out "$OUT/power/node_0.txt"
step train "$BIN" run mini_llm --device cuda:0 --runs 1 --seed 1 --quiet --out "$OUT/train" --no-cache-clear --budget-minutes 4 --power nvml
step check sh -c "'$BIN' check '$OUT'/train/result_*.txt"
step throughput --exit-1-ok "$BIN" run mini_llm --device cuda:0 --mode throughput --runs 1 --steps 300 --window 101..301 \
  --seed 1 --quiet --json --out "$OUT/throughput" --no-cache-clear
step throughput-b128 --exit-1-ok "$BIN" run mini_llm --device cuda:0 --mode throughput --runs 1 --steps 300 --window 101..301 \
  --set batch_size=128 --seed 1 --quiet --json --out "$OUT/throughput-b128" --no-cache-clear
echo
echo "gpu-proof: $failed step(s) failed"
exit "$failed"
