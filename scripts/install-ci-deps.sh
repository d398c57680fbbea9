#!/usr/bin/env bash
# System packages CI needs (idempotent; Debian/Ubuntu):
#   openmpi-bin, libopenmpi-dev  the `mpi` feature (mpirun, libmpi) and the
#                                multi-process tests (tests/tests/mpi.rs, slurm.rs)
#   libclang-dev                 bindgen, used by the `mpi` crate's build script
#   openssh-client               ssh-keygen, the peer of the signing tests
#   chromium                     headless screenshots of generated pages
#
# Packages already installed (per `dpkg -s`) are skipped; `apt-get update`
# runs only when something is missing and the install fails without it.
# Needs root, or sudo without a password; otherwise it says what to install
# and exits 1.
#
# `--cuda` also sets up a CUDA 13.0 toolchain from PyPI wheels (nvcc, the
# runtime, cuBLAS, cuRAND, NVRTC, NCCL) in a throwaway venv
# ($REFEREE_CUDA_VENV, default /tmp/referee-cuda), enough to *build*
# `--features cuda` on a machine without a GPU, and writes
# $REFEREE_CUDA_VENV/env.sh to source before the build:
#   scripts/install-ci-deps.sh --cuda
#   . /tmp/referee-cuda/env.sh
#   CARGO_TARGET_DIR=target-cuda cargo build --release -p referee-harness --features cuda
# (a separate target directory: the CUDA binary links libcuda.so.1 and does
# not start on a machine without the NVIDIA driver.)
set -euo pipefail

want_cuda=0
for a in "$@"; do
  case "$a" in
    --cuda) want_cuda=1 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "install-ci-deps: unknown argument $a" >&2; exit 2 ;;
  esac
done

PACKAGES=(openmpi-bin libopenmpi-dev libclang-dev openssh-client chromium bubblewrap openssl)
if [ "$want_cuda" = 1 ]; then
  PACKAGES+=(python3-venv gcc g++)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-ci-deps: all present (${PACKAGES[*]})" >&2
else
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-ci-deps: missing ${missing[*]}, and this system has no apt-get; install them with its package manager" >&2
    exit 1
  fi
  if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    echo "install-ci-deps: missing ${missing[*]}; run as root or with password-less sudo:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  echo "install-ci-deps: installing ${missing[*]}" >&2
  # Without refreshing the package lists first (fast when they are fresh);
  # update them only when that fails.
  if ! "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  echo "install-ci-deps: done" >&2
fi

[ "$want_cuda" = 1 ] || exit 0

# ---------------------------------------------------------------------------
# CUDA toolchain from PyPI. The CUDA 12 nvcc wheel (nvidia-cuda-nvcc-cu12)
# ships only ptxas; the CUDA 13 one (nvidia-cuda-nvcc) ships the whole
# compiler driver. candle's kernels are compiled to PTX, which the driver
# JIT-compiles at start: a driver accepts PTX of its own CUDA version or
# older only, so the toolkit is pinned to 13.0 (driver R580, on which the
# GPU proof ran: docs/clusters-and-gpus.md) by default;
# REFEREE_CUDA_VERSION=13.4.92 (cudarc 0.19 knows CUDA up to 13.4) for
# newer drivers.
VENV=${REFEREE_CUDA_VENV:-/tmp/referee-cuda}
CV=${REFEREE_CUDA_VERSION:-13.0.88}
WHEELS=(
  "nvidia-cuda-nvcc==$CV" "nvidia-cuda-crt==$CV" "nvidia-nvvm==$CV"
  "nvidia-cuda-runtime==$CV" "nvidia-cuda-nvrtc==$CV" "nvidia-cuda-cccl==${CV%.*}.*"
  "nvidia-cublas==${CV%%.*}.*" "nvidia-curand" "nvidia-nccl-cu13"
)
if [ -f "$VENV/env.sh" ] && (. "$VENV/env.sh" && nvcc --version >/dev/null 2>&1); then
  echo "install-ci-deps: CUDA toolchain present in $VENV" >&2
  exit 0
fi
echo "install-ci-deps: installing a CUDA $CV toolchain from PyPI into $VENV" >&2
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${WHEELS[@]}"
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ROOT=$SITE/nvidia/cu13
[ -x "$ROOT/bin/nvcc" ] || { echo "install-ci-deps: no nvcc in $ROOT/bin" >&2; exit 1; }
# The wheels ship versioned libraries only; the linker wants lib*.so.
(
  cd "$ROOT/lib"
  for f in lib*.so.*; do
    base=${f%%.so.*}.so
    [ -e "$base" ] || ln -s "$f" "$base"
  done
  for f in "$SITE"/nvidia/nccl/lib/libnccl.so.*; do
    [ -e libnccl.so ] || ln -s "$f" libnccl.so
  done
)
[ -e "$ROOT/lib64" ] || ln -s lib "$ROOT/lib64"
# The driver library comes with the NVIDIA driver, not with any wheel:
# link against a stub with the same symbols (as the CUDA toolkit's
# lib/stubs/libcuda.so); at run time the real libcuda.so.1 is used.
mkdir -p "$ROOT/lib/stubs"
names=$(mktemp)
gcc -E -P -I"$ROOT/include" "$ROOT/include/cuda.h" 2>/dev/null \
  | grep -oE '\bcu[A-Z][A-Za-z0-9_]*[[:space:]]*\(' | sed -E 's/[[:space:]]*\($//' >"$names"
# cudarc also binds names of older CUDA versions; add those it declares.
for f in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19*/src/driver/sys/mod.rs; do
  [ -f "$f" ] && grep -ohE '^\s+fn cu[A-Za-z0-9_]+\(' "$f" | sed -E 's/^\s+fn (cu[A-Za-z0-9_]+)\(/\1/' >>"$names"
done
sort -u "$names" | awk '{print "void " $1 "(void) {}"}' >"$names.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$ROOT/lib/stubs/libcuda.so" "$names.c"
rm -f "$names" "$names.c"
cat >"$VENV/env.sh" <<EOF
# Source before \`cargo build --features cuda\` (written by scripts/install-ci-deps.sh).
export CUDA_ROOT=$ROOT
export CUDA_HOME=$ROOT
export PATH=$ROOT/bin:\$PATH
# No GPU to ask: the architecture to compile candle's kernels for (90 = H100/H200).
export CUDA_COMPUTE_CAP=\${CUDA_COMPUTE_CAP:-90}
EOF
echo "install-ci-deps: CUDA toolchain ready; . $VENV/env.sh" >&2
