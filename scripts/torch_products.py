#!/usr/bin/env python3
"""PyTorch's dense products (torch.mm, float32) at the shapes given on stdin,
for scripts/bench-products.sh: the peer of referee's `gemm_probe`, timed the
same way (best of --reps after 3 untimed calls; with --cold, 64 MiB written
elsewhere before each call, so that the operands come from memory).

Each stdin line: `m n k A B`, A and B `N` (as stored) or `T` (A stored k x m,
B stored n x k, read as transposed views, as a weight gradient reads its
activations). Prints `torch MxNxK Normal|Transposed Normal|Transposed: G
GFLOP/s`, the form of gemm_probe's lines.
"""
import argparse
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--cold", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    flush = torch.zeros(64 << 20, dtype=torch.uint8) if args.cold else None
    name = {"N": "Normal", "T": "Transposed"}
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            m, n, k, la, lb = line.split()
            m, n, k = int(m), int(n), int(k)
            if la not in name or lb not in name:
                raise ValueError
        except ValueError:
            sys.exit(f"stdin: expected `m n k N|T N|T`, got {line.strip()!r}")
        gen = torch.Generator().manual_seed(m * 31 + n * 7 + k)
        a = torch.rand(k, m, generator=gen).t() if la == "T" else torch.rand(m, k, generator=gen)
        b = torch.rand(n, k, generator=gen).t() if lb == "T" else torch.rand(k, n, generator=gen)
        c = torch.empty(m, n)
        best = float("inf")
        for r in range(3 + args.reps):
            if flush is not None:
                flush.add_(1)
            t0 = time.perf_counter()
            torch.mm(a, b, out=c)
            took = time.perf_counter() - t0
            if r >= 3:
                best = min(best, took)
        print(f"torch {m}x{n}x{k} {name[la]} {name[lb]}: {2 * m * n * k / best / 1e9:.1f} GFLOP/s", flush=True)


if __name__ == "__main__":
    main()
