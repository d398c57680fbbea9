#!/usr/bin/env python3
"""`referee perf` against a line-by-line Python regex parser on one large
multi-rank Slurm output file (see scripts/bench-perf.sh).

The file: 64 ranks with `srun --label` prefixes; most lines are the noise a
real job prints (NCCL INFO lines, framework warnings, NeMo info lines); the
last rank of every pipeline (8 of them) prints a Megatron `training_log`
line per iteration, as Megatron with 8 pipelines does under
`--log-interval 1`; a Megatron argument dump at the top. About 1 % of the
bytes are timing lines.

The peer reads the file once, line by line, and for each line does what the
recipes' parser does (`re.search` for the iteration marker, the step time
and the TFLOP/s), keeping the lowest rank's value per iteration; it is run
once per repetition in one Python process. Both must find the same number
of iterations and the same mean step time over the window 35–44, else the
benchmark fails.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_history  # noqa: E402  (the history: docs/bench-history.jsonl)

NOISE = [
    "{r}: gpu-node-{n:03d}:{p}:{p} [{g}] NCCL INFO Channel {c:02d}/32 : {g}[{g}] -> {h}[{h}] via P2P/CUMEM/read",
    "{r}: gpu-node-{n:03d}:{p}:{p} [{g}] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "{r}: [NeMo W 2025-05-02 10:{m:02d}:{s:02d} nemo_logging:405] /usr/local/lib/python3.12/dist-packages/torch/distributed/c10d_logger.py:83: UserWarning: barrier(): using the device under current context.",
    "{r}: [NeMo I 2025-05-02 10:{m:02d}:{s:02d} utils:662] Setting up optimizer with config OptimizerConfig(optimizer='adam', lr=0.0003, weight_decay=0.1, bf16=True)",
    "{r}: INFO:megatron.core.distributed.param_and_grad_buffer:Number of buckets for gradient all-reduce / reduce-scatter: {c}",
]


def timing_line(rank, it, last, ms, tflops):
    return (
        f"{rank}:  [2024-04-06 03:02:{it % 60:02d}] iteration {it:8d}/{last:8d} | consumed samples: {it * 1024:12d} | "
        f"elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | "
        f"learning rate: 1.420000E-05 | global batch size:  1024 | lm loss: 1.818812E+00 | loss scale: 1.0 | "
        f"grad norm: 1.300 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
    )


def generate(path, size):
    ranks, printers = 64, [7, 15, 23, 31, 39, 47, 55, 63]
    with open(path, "w") as f:
        f.write("0: ------------------------ arguments ------------------------\n")
        for k, v in (("global_batch_size", 1024), ("seq_length", 4096), ("tensor_model_parallel_size", 8),
                     ("world_size", 64), ("bf16", True)):
            f.write(f"0:   {k} {'.' * (48 - len(k))} {v}\n")
        f.write("0: -------------------- end of arguments ---------------------\n")
        written, it, n = 0, 1, 0
        # One iteration's block is about 20 kB: announce the final iteration
        # the file will reach, so that the run is complete.
        last = None
        block = []
        while last is None or it <= last:
            block.clear()
            for _ in range(120):
                n += 1
                r = n % ranks
                block.append(NOISE[n % len(NOISE)].format(r=r, n=r // 8, p=1000 + r, g=r % 8, h=(r + 1) % 8,
                                                           c=n % 32, m=n % 60, s=n % 60) + "\n")
            for r in printers:
                block.append(timing_line(r, it, last or 0, 5000.0 + (it % 7), 240.0 + (it % 5)))
            text = "".join(block)
            if last is None:
                last = max(50, size // len(text))
                continue
            it += 1
            f.write(text)
            written += len(text)
    return it - 1


def peer(path, first, last):
    it_re = re.compile(r"iteration\s+(\d+)\s*/\s*(\d+)")
    ms_re = re.compile(r"elapsed time per iteration \(ms\):\s*([-+0-9.eE]+)")
    tf_re = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*([-+0-9.eE]+)")
    rank_re = re.compile(r"^\s*(\d+): ")
    best = {}
    with open(path, "r", errors="replace") as f:
        for line in f:
            m = it_re.search(line)
            if not m:
                continue
            t = ms_re.search(line)
            if not t:
                continue
            tf = tf_re.search(line)
            rm = rank_re.search(line)
            rank = int(rm.group(1)) if rm else 1 << 40
            i = int(m.group(1))
            v = (rank, float(t.group(1)) / 1000.0, float(tf.group(1)) if tf else None)
            if i not in best or rank < best[i][0]:
                best[i] = v
    window = [best[i][1] for i in range(first, last + 1) if i in best]
    return len(best), statistics.mean(window)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--referee", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="referee-bench-perf-")
    path = os.path.join(tmp, "slurm-4242.out")
    try:
        t0 = time.perf_counter()
        iters = generate(path, a.size_mb << 20)
        size = os.path.getsize(path)
        print(f"file: {path}: {size / 1e6:.0f} MB, {iters} iterations printed by 8 of 64 ranks "
              f"(generated in {time.perf_counter() - t0:.1f} s)")
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # page cache
        results = {}
        for threads in (1, 2):
            times = []
            for _ in range(a.reps):
                t = time.perf_counter()
                out = subprocess.run([a.referee, "perf", "--json", "-j", str(threads), path],
                                     capture_output=True, check=False)
                times.append(time.perf_counter() - t)
                if out.returncode not in (0, 1):
                    sys.exit(f"referee perf failed: {out.stderr.decode()}")
            row = json.loads(out.stdout)["rows"][0]
            results[f"referee -j {threads}"] = (statistics.median(times), row)
        times = []
        for _ in range(a.reps):
            t = time.perf_counter()
            n_peer, mean_peer = peer(path, 35, 44)
            times.append(time.perf_counter() - t)
        row = results["referee -j 2"][1]
        mean_ref = row["step_time_s"]["mean"]
        if abs(mean_ref - mean_peer) > 1e-9:
            sys.exit(f"the two parsers disagree: referee {mean_ref}, peer {mean_peer}")
        print(f"both: window 35–44 mean step time {mean_ref:.4f} s; peer saw {n_peer} iterations")
        print(f"{'parser':<28} {'median s':>9} {'MB/s':>8}   (reps: {a.reps})")
        for name, (t, _) in results.items():
            print(f"{name:<28} {t:9.3f} {size / 1e6 / t:8.0f}")
        tp = statistics.median(times)
        print(f"{'python re.search per line':<28} {tp:9.3f} {size / 1e6 / tp:8.0f}")
        print(f"speed-up (referee -j 2 vs peer): {tp / results['referee -j 2'][0]:.1f}x")
        command = os.environ.get("BENCH_COMMAND", "scripts/bench-perf.sh")
        for name, (t, _) in results.items():
            bench_history.record("bench-perf.sh", "perf_scan_s", "s", f"{name}, {size / 1e6:,.0f} MB Slurm output of 64 ranks",
                                 round(t, 3), peer=round(tp, 3), peer_name="Python, re.search per line (one process)",
                                 command=command, params={"SIZE_MB": a.size_mb, "REPS": a.reps},
                                 extra={"referee_mb_s": round(size / 1e6 / t), "peer_mb_s": round(size / 1e6 / tp)},
                                 note="medians; both parsers agree on the window's mean")
    finally:
        for f in os.listdir(tmp):
            os.remove(os.path.join(tmp, f))
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
