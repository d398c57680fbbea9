# Sourced by every benchmark script (scripts/bench-*.sh): one place for what
# they record about the machine, for the instruction set both sides of a
# comparison may use, and for appending their figures to the history.
#
# ISA ("" by default: each side on its own best kernels)
#   avx2: both sides restricted to AVX2, to stand in for an AVX2 machine on
#   one with AVX-512: referee's REFEREE_CPU_KERNELS=avx2; PyTorch's ATen
#   (ATEN_CPU_CAPABILITY), oneDNN (ONEDNN_MAX_CPU_ISA) and MKL's matrix
#   products (MKL_ENABLE_INSTRUCTIONS), so that no PyTorch path keeps AVX-512.
# bench_build_at builds an artifact at a git revision (an A/B benchmark's
#   older side) in a worktree under target/ab/, once per commit;
# bench_cpuinfo reads one field of /proc/cpuinfo;
# bench_record appends a figure to docs/bench-history.jsonl (below);
# bench_machine_line prints the CPU (model name, family/model, ISA flags), the
#   restriction and the load average; bench_cpu_sample and bench_steal_pct
#   measure the time the hypervisor stole from this VM over an interval (the
#   `steal` column of /proc/stat): what a "slow spell" of a shared VM is made
#   of, when it is made of that.
# TORCHINDUCTOR_CACHE_DIR (default: one per ISA setting, below)
# THP_MEM_ALLOC_ENABLE (1 by default): PyTorch's CPU allocator advises its
#   buffers of 2 MiB or more as transparent huge pages, as referee's
#   allocator does by itself (workloads/src/cpu/aligned.rs), so that the
#   peer runs at its best: where the kernel's THP mode is `madvise` its
#   steps are faster with it (docs/bench-history.jsonl). 0 turns it off.

# Each restriction compiles PyTorch's inductor kernels into its own cache:
# with one cache for both, the unrestricted compiled forms have aborted
# (`free(): invalid pointer`, exit 134 and 139) after AVX2-restricted runs
# had filled it, and ran with a cache of their own.
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-${TMPDIR:-/tmp}/torchinductor-$(id -un)-${ISA:-native}}"
export THP_MEM_ALLOC_ENABLE="${THP_MEM_ALLOC_ENABLE:-1}"

case "${ISA:-}" in
    "") ;;
    avx2)
        export REFEREE_CPU_KERNELS=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
        ;;
    *)
        echo "ISA=$ISA: expected avx2 (or unset: each side's own best kernels)" >&2
        exit 2
        ;;
esac

# The first CPU's value of /proc/cpuinfo's field $1 ("model name", "cpu
# family", "model"), without the spaces around it.
# bench_build_at REV ARTIFACT CARGO-BUILD-ARGS…: target/release/ARTIFACT
# (e.g. `referee`, `examples/bench_step`) built at revision REV ("": the
# working tree as it is, into target/); prints its path. A revision is
# checked out with `git worktree` under target/ab/<sha>/ and built there,
# once per commit.
bench_build_at() {
    local rev=$1 artifact=$2 dir sha
    shift 2
    if [ -z "$rev" ]; then
        cargo build --release -q "$@" >&2
        echo "$PWD/target/release/$artifact"
        return
    fi
    sha=$(git rev-parse --verify --quiet "$rev^{commit}") || { echo "not a commit: $rev" >&2; exit 2; }
    dir=$PWD/target/ab/$sha
    if [ ! -x "$dir/bin/${artifact##*/}" ]; then
        rm -rf "$dir/src"
        git worktree prune
        git worktree add --detach --force "$dir/src" "$sha" >/dev/null 2>&1
        (cd "$dir/src" && CARGO_TARGET_DIR=$dir/target cargo build --release -q "$@") >&2
        mkdir -p "$dir/bin"
        cp "$dir/target/release/$artifact" "$dir/bin/"
        git worktree remove --force "$dir/src"
    fi
    echo "$dir/bin/${artifact##*/}"
}

bench_cpuinfo() {
    grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//; s/ *$//'
}

bench_machine_line() {
    local name fam model thp isa=""
    name=$(bench_cpuinfo "model name")
    fam=$(bench_cpuinfo "cpu family")
    model=$(bench_cpuinfo model)
    grep -qw avx2 /proc/cpuinfo && isa="avx2"
    grep -qw avx512f /proc/cpuinfo && isa="$isa avx512f"
    thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true)
    echo "machine: $name (family $fam model $model; $isa; $(nproc) CPUs); ISA restriction: ${ISA:-none}; huge pages: ${thp:-unknown} (PyTorch THP_MEM_ALLOC_ENABLE=$THP_MEM_ALLOC_ENABLE); load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# "total steal" jiffies of all CPUs so far.
bench_cpu_sample() {
    awk '/^cpu /{t=0; for (i = 2; i <= NF; i++) t += $i; print t, $9; exit}' /proc/stat
}

# Percent of the CPUs' time stolen between two samples: bench_steal_pct "$before" "$after".
bench_steal_pct() {
    echo "$1 $2" | awk '{dt = $3 - $1; printf "%.1f", (dt > 0 ? 100 * ($4 - $2) / dt : 0)}'
}

# The command line of the script that sourced this file, for the history.
BENCH_COMMAND="scripts/$(basename "$0")${*:+ $*}"

# bench_record KEY=VALUE...: appends one measurement to the history,
# docs/bench-history.jsonl (scripts/bench_history.py says the keys; the
# date, machine line, CPU and commit are added there). The script's name
# and command line come from here.
bench_record() {
    python3 scripts/bench_history.py add script="$(basename "$0")" command="$BENCH_COMMAND" "$@"
}
