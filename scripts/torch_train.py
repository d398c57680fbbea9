#!/usr/bin/env python3
"""PyTorch trainer to target for referee's mini benchmarks: the peer of
`referee run BENCH` in time to train (scripts/bench-time-to-train.sh).

The same benchmark as referee trains, from referee's own sources:
  * hyperparameters and target: the resolved configuration and target of a
    `referee run` (`config` and `target` of its referee_run.json: pass one
    with --referee-run, or this script asks referee for one with a one-step
    throughput run, `--set` overrides passed through, so the values are
    never written twice);
  * evaluation cadence and evaluation set size: the benchmark's rule file
    (`referee rules show BENCH`: `eval_every`, `eval_samples`);
  * the models, initialisation and optimisers of scripts/torch_twin.py
    (the same initial weights as referee for the same seed, bit for bit);
  * the same prepared data: the PNG tree (decoded with PIL; class order,
    file order and normalisation as datasets/src/image_folder.rs) and the
    u16 token files (windows as datasets/src/tokens.rs);
  * the same seeds: `--seed S` is referee's base seed (`referee run --seed S`);
    run i uses referee's run seed i, which draws the same initial weights,
    the same epoch shuffles of the images and the same token windows as
    referee (referee's SplitMix64 schemes, datasets/src/rng.rs);
  * the same schedule (workloads/src/schedule.rs: linear warm-up counted
    from lr*(s+1)/warmup, then cosine or polynomial to end_lr), the same
    metric (top-1 accuracy with BN running statistics on all 10,000 test
    images; mean cross-entropy in nats per token over the 256 held-out
    windows), evaluation after the first step at which the samples seen
    reach k x the cadence, a stop at the first evaluation meeting the
    target (or, aborted, at the end of the schedule or the time budget);
  * the same clock: initialisation (model, optimiser, and for the compiled
    variants the compile, on synthetic data, with the weights, BN
    statistics and optimiser state put back afterwards) happens before
    `run_start`; the clock starts immediately before the first touch of
    training data and stops at the evaluation that meets the target, so
    data loading and evaluations are timed.

Data loading: images through a torch DataLoader over batches (a map-style
Dataset whose item is one whole batch, decoded with PIL in --workers worker
processes, prefetched; referee decodes in one background thread), or
--loader preload (decode the whole training set first, in --workers
processes, then index a tensor). The evaluation images are decoded once, at
the first evaluation, and kept. Tokens: the files are read into a tensor
and windows are cut from it in the training process.

Prints one JSON line per run: time to train (minutes), samples to target,
the evaluations (samples, metric, seconds since run_start).

Usage: torch_train.py BENCH [--seed S] [--runs N] [--variant V] [--threads N]
                            [--referee-run FILE] [--set KEY=VALUE ...] [...]
"""
import argparse
import itertools
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_twin as tw  # noqa: E402

DOMAIN_IMAGE_SHUFFLE = 0x11111111
DOMAIN_TOKEN_WINDOWS = 0x22222222
FASHION_MNIST_MEAN = np.float32(0.2860)
FASHION_MNIST_STD = np.float32(0.3530)

# ---------------------------------------------------------------------------
# the benchmark, as referee declares it


def referee_bin(args):
    return args.referee or os.path.join(ROOT, "target", "release", "referee")


def benchmark_from_referee(args):
    """config + target (referee_run.json) and cadence + eval set size (rule file)."""
    rr = args.referee_run
    tmp = None
    if rr is None:
        tmp = tempfile.mkdtemp(prefix="torch_train_cfg_")
        cmd = [referee_bin(args), "run", args.benchmark, "--mode", "throughput", "--steps", "1",
               "--window", "1..2", "--runs", "1", "--seed", "1", "--no-cache-clear", "--quiet",
               "-j", "1", "--out", os.path.join(tmp, "run")]
        if args.data_dir:
            cmd += ["--data-dir", args.data_dir]
        for s in args.set:
            cmd += ["--set", s]
        p = subprocess.run(cmd, capture_output=True, text=True)
        rr = os.path.join(tmp, "run", "referee_run.json")
        if not os.path.exists(rr):
            sys.exit(f"torch_train: `{' '.join(cmd)}` wrote no referee_run.json:\n{p.stderr}{p.stdout}")
    elif os.path.isdir(rr):
        rr = os.path.join(rr, "referee_run.json")
    run = json.load(open(rr))
    if run["benchmark"] != args.benchmark:
        sys.exit(f"torch_train: {rr} is a run of {run['benchmark']}, not {args.benchmark}")
    if args.referee_run is not None and args.set:
        sys.exit("torch_train: --set goes with a config from referee, not with --referee-run")
    rules = subprocess.run([referee_bin(args), "rules", "show", args.benchmark], capture_output=True,
                           text=True, check=True).stdout
    every = int(re.search(r"'eval_every':\s*(\d+)", rules).group(1))
    eval_samples = int(re.search(r"NAME: eval_samples\s+REQ: \w+\s+CHECK: \" \(v\['value'\] == (\d+)\)",
                                 rules).group(1))
    t = run["target"]
    return dict(config=run["config"], target=float(t["value"]), direction=t["direction"],
                eval_every=every, eval_samples=eval_samples, source=rr if tmp is None else
                "referee run --mode throughput (one step) + referee rules show")


def reached(bench, v):
    if bench["direction"] == "higher":
        return bench["target"] <= v <= 1.0
    return 0.0 < v <= bench["target"]


def lr_at(cfg, step):
    """workloads/src/schedule.rs LrSchedule::lr."""
    base, end, warm, total = cfg["base_lr"], cfg["end_lr"], cfg["warmup_steps"], cfg["total_steps"]
    if step < warm:
        return base * (step + 1) / warm
    if step >= total or total <= warm:
        return end
    p = (step - warm) / (total - warm)
    decay = cfg.get("decay", {"kind": "cosine"})
    if decay["kind"] == "cosine":
        f = 0.5 * (1.0 + math.cos(math.pi * p))
    else:
        f = (1.0 - p) ** decay["power"]
    return end + (base - end) * f


def eval_point(k, every, gbs):
    return -(-(k * every) // gbs) * gbs


# ---------------------------------------------------------------------------
# data: the PNG tree


def list_image_folder(root):
    """(paths, labels) in referee's order (datasets/src/image_folder.rs)."""
    dirs = [d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))]

    def numeric(d):
        head, sep, _ = d.partition("_")
        return int(head) if sep and head.isdigit() else None

    if all(numeric(d) is not None for d in dirs):
        dirs.sort(key=lambda d: (numeric(d), d.encode()))
    else:
        dirs.sort(key=lambda d: d.encode())
    paths, labels = [], []
    for label, d in enumerate(dirs):
        files = sorted((f for f in os.listdir(os.path.join(root, d))
                        if f.lower().endswith(".png") and not os.path.isdir(os.path.join(root, d, f))),
                       key=lambda f: f.encode())
        paths += [os.path.join(root, d, f) for f in files]
        labels += [label] * len(files)
    return paths, np.asarray(labels, dtype=np.int64)


_SCALE = np.float32(1.0) / (np.float32(255.0) * FASHION_MNIST_STD)
_OFFSET = FASHION_MNIST_MEAN / FASHION_MNIST_STD


def decode_images(paths):
    """PNG files -> [n, 1, H, W] f32, normalised exactly as referee does
    (p * (1 / (255 std)) - mean / std, in f32)."""
    from PIL import Image
    arrs = [np.asarray(Image.open(p).convert("L")) for p in paths]
    raw = np.stack(arrs)[:, None]
    return torch.from_numpy(raw.astype(np.float32) * _SCALE - _OFFSET)


def epoch_order(n, seed, epoch):
    """Fisher-Yates with SplitMix64(derive_seed([seed, 0x11111111, epoch]))."""
    rng = tw.SplitMix64(tw.derive_seed([seed, DOMAIN_IMAGE_SHUFFLE, epoch]))
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        order[i], order[j] = order[j], order[i]
    return order


class TrainBatches(torch.utils.data.Dataset):
    """Item k = global batch k of the endless epoch stream (epoch k // nb,
    shuffled as referee shuffles it, the short last batch dropped)."""

    def __init__(self, paths, labels, batch, seed):
        self.paths, self.labels, self.batch, self.seed = paths, labels, batch, seed
        self.nb = len(paths) // batch
        self._epoch, self._order = None, None

    def __len__(self):
        return 1 << 40

    def __getitem__(self, k):
        epoch, b = divmod(k, self.nb)
        if epoch != self._epoch:
            self._epoch, self._order = epoch, epoch_order(len(self.paths), self.seed, epoch)
        idx = self._order[b * self.batch:(b + 1) * self.batch]
        return decode_images([self.paths[i] for i in idx]), torch.from_numpy(self.labels[idx])


class EvalBatches(torch.utils.data.Dataset):
    def __init__(self, paths, labels, batch):
        self.paths, self.labels, self.batch = paths, labels, batch

    def __len__(self):
        return -(-len(self.paths) // self.batch)

    def __getitem__(self, b):
        s = slice(b * self.batch, (b + 1) * self.batch)
        return decode_images(self.paths[s]), torch.from_numpy(self.labels[s])


def _worker_init(_):
    torch.set_num_threads(1)


def _decode_chunk(paths):
    torch.set_num_threads(1)
    return decode_images(paths).numpy()


def image_train_stream(args, paths, labels, batch, seed):
    if args.loader == "preload":
        if args.workers > 0:
            import multiprocessing as mp
            chunks = [paths[i:i + 2000] for i in range(0, len(paths), 2000)]
            with mp.get_context("fork").Pool(args.workers) as pool:
                x = torch.from_numpy(np.concatenate(pool.map(_decode_chunk, chunks)))
        else:
            x = decode_images(paths)
        y = torch.from_numpy(labels)
        nb = len(paths) // batch
        for epoch in itertools.count():
            order = torch.tensor(epoch_order(len(paths), seed, epoch))
            for b in range(nb):
                idx = order[b * batch:(b + 1) * batch]
                yield x[idx], y[idx]
    ds = TrainBatches(paths, labels, batch, seed)
    kw = dict(num_workers=args.workers, worker_init_fn=_worker_init, prefetch_factor=4,
              persistent_workers=True) if args.workers > 0 else {}
    loader = torch.utils.data.DataLoader(ds, batch_size=None, sampler=itertools.count(), **kw)
    yield from loader


# ---------------------------------------------------------------------------
# data: the token files


def read_tokens(path):
    return torch.from_numpy(np.fromfile(path, dtype="<u2").astype(np.int64))


def token_train_stream(tokens, batch, seq_len, seed):
    """datasets/src/tokens.rs train_batches: step s draws `batch` window
    starts below len - seq_len with SplitMix64(derive_seed([seed, 0x22222222, s]))."""
    span = tokens.numel() - seq_len
    ar = torch.arange(seq_len + 1)
    for step in itertools.count():
        rng = tw.SplitMix64(tw.derive_seed([seed, DOMAIN_TOKEN_WINDOWS, step]))
        starts = torch.tensor([rng.below(span) for _ in range(batch)])
        w = tokens[starts[:, None] + ar]
        yield w[:, :-1].contiguous(), w[:, 1:].contiguous()


def token_eval_batches(tokens, seq_len, max_seq, batch=32):
    """tokens.rs eval_batches: the first K non-overlapping windows, in order."""
    k = min(max_seq, (tokens.numel() - 1) // seq_len)
    w = tokens[torch.arange(k)[:, None] * seq_len + torch.arange(seq_len + 1)]
    return [(w[i:i + batch, :-1].contiguous(), w[i:i + batch, 1:].contiguous()) for i in range(0, k, batch)]


# ---------------------------------------------------------------------------
# one run


def try_cache_clear():
    """As referee's cache_clear: drop the page cache, or say why not."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "dropped"
    except OSError as e:
        return f"not dropped: {e.strerror}"


def run_once(args, bench, seed):
    cfg = bench["config"]
    name = args.benchmark
    gbs = cfg["batch_size"]
    cache = "skipped (--no-cache-clear)" if args.no_cache_clear else try_cache_clear()
    data = os.path.join(args.data_dir or os.environ.get("REFEREE_DATA_DIR") or os.path.join(ROOT, "data"))

    # ---- init: no training data touched
    t_init = time.perf_counter()
    s = tw.Setup(name, args.variant, hp=cfg, seed=seed, lr=lr_at(cfg, 0), compile_mode=args.compile_mode)
    w_sha = tw.weights_sha256(s.model)
    eval_bs = 500 if name == "mini_resnet" else 32
    if args.variant.startswith("compiled"):
        # compile the train step and the evaluation forward on synthetic
        # data at lr 0, then put the weights, BN statistics and optimiser
        # state back (in place: the compiled graphs stay valid)
        snap = s.snapshot()
        tw.set_lr(s.opt, 0.0)
        x, y = tw.synthetic_batch(name, gbs, s.hp)
        for _ in range(2):
            s.step(x, y).item()
        s.model.eval()
        s.logits(tw.synthetic_batch(name, eval_bs, s.hp)[0])
        s.model.train()
        s.restore(snap)
        if tw.weights_sha256(s.model) != w_sha:
            sys.exit("torch_train: the warm-up changed the initial weights")
    init_s = time.perf_counter() - t_init

    # ---- run_start: immediately before the first touch of training data
    t0 = time.perf_counter()
    if name == "mini_resnet":
        paths, labels = list_image_folder(os.path.join(data, "fashion_mnist", "train"))
        train = image_train_stream(args, paths, labels, gbs, seed)
        eval_cache = None

        def evaluate():
            nonlocal eval_cache
            s.model.eval()
            correct = total = 0
            if eval_cache is None:
                vp, vl = list_image_folder(os.path.join(data, "fashion_mnist", "val"))
                n = min(len(vp), bench["eval_samples"])
                ds = EvalBatches(vp[:n], vl[:n], eval_bs)
                kw = dict(num_workers=1, worker_init_fn=_worker_init, prefetch_factor=4) if args.workers else {}
                src, eval_cache = torch.utils.data.DataLoader(ds, batch_size=None, **kw), []
            else:
                src = eval_cache
            for x, y in src:
                if src is not eval_cache:
                    eval_cache.append((x, y))
                correct += (s.logits(x).argmax(1) == y).sum().item()
                total += y.numel()
            s.model.train()
            return correct / total
    else:
        seq = cfg["seq_len"]
        toks = read_tokens(os.path.join(data, "shakespeare", "train.bin"))
        train = token_train_stream(toks, gbs, seq, seed)
        val = read_tokens(os.path.join(data, "shakespeare", "val.bin"))
        eval_set = token_eval_batches(val, seq, bench["eval_samples"], eval_bs)

        def evaluate():
            s.model.eval()
            tot, cnt = 0.0, 0
            for x, y in eval_set:
                lg = s.logits(x)
                loss = F.cross_entropy(lg.reshape(-1, lg.shape[-1]).float(), y.reshape(-1))
                tot += loss.item() * y.numel()
                cnt += y.numel()
            s.model.train()
            return tot / cnt

    samples, step, k = 0, 0, 1
    next_eval = eval_point(k, bench["eval_every"], gbs)
    max_samples = cfg["total_steps"] * gbs
    evals, status, reason = [], "aborted", "the schedule ended before the target"
    for x, y in train:
        if time.perf_counter() - t0 > args.budget_minutes * 60:
            reason = f"the time budget of {args.budget_minutes} min ran out"
            break
        tw.set_lr(s.opt, lr_at(cfg, step))
        loss = s.step(x, y).item()
        step += 1
        samples += gbs
        if not math.isfinite(loss):
            reason = f"the training loss is {loss}"
            break
        if args.verbose and step % 32 == 0:
            print(f"step {step} samples {samples} loss {loss:.4f} {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        if samples >= next_eval:
            m = evaluate()
            evals.append([samples, m, round(time.perf_counter() - t0, 3)])
            if args.verbose:
                print(f"eval at {samples}: {m:.4f} ({time.perf_counter() - t0:.1f}s)", file=sys.stderr)
            if reached(bench, m) and not args.keep_going:
                status, reason = "success", None
                break
            k += 1
            next_eval = eval_point(k, bench["eval_every"], gbs)
        if samples >= max_samples:
            break
    t1 = time.perf_counter()
    del train  # stops the loader's workers
    out = dict(impl="torch", benchmark=name, variant=args.variant, seed=seed, status=status,
               samples=samples, time_to_train_minutes=round((t1 - t0) / 60, 5), init_s=round(init_s, 2),
               evals=evals, threads=torch.get_num_threads(),
               loader=(f"{args.loader}, {args.workers} workers" if name == "mini_resnet" else "tensor"),
               optimizer=s.opt_kw or "default", cache_clear=cache, initial_weights_sha256=w_sha,
               torch=torch.__version__)
    if reason:
        out["reason"] = reason
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("benchmark", choices=["mini_resnet", "mini_llm"])
    ap.add_argument("--seed", type=int, default=None,
                    help="base seed as `referee run --seed` (default: from the OS); run i uses referee's run seed i")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--variant", default="fast", choices=list(tw.VARIANTS))
    ap.add_argument("--compile-mode", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--loader", default="worker", choices=["worker", "preload"],
                    help="images: DataLoader with workers decoding batches, or decode everything first")
    ap.add_argument("--workers", type=int, default=1, help="image decoding processes (0: in the trainer)")
    ap.add_argument("--data-dir", default=None, help="default: $REFEREE_DATA_DIR or ./data")
    ap.add_argument("--referee", default=None, help="the referee binary (default: target/release/referee)")
    ap.add_argument("--referee-run", default=None,
                    help="referee_run.json (or its folder) whose config and target to use")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE override, resolved by referee")
    ap.add_argument("--budget-minutes", type=float, default=30.0)
    ap.add_argument("--keep-going", action="store_true", help="follow the whole schedule (calibration)")
    ap.add_argument("--no-cache-clear", action="store_true")
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    bench = benchmark_from_referee(args)
    base = args.seed if args.seed is not None else int.from_bytes(os.urandom(8), "little")
    seeds = tw.run_seeds(base, args.runs)
    print(json.dumps(dict(benchmark=args.benchmark, base_seed=base, seeds=seeds, config=bench["config"],
                          target=bench["target"], direction=bench["direction"], eval_every=bench["eval_every"],
                          eval_samples=bench["eval_samples"], source=bench["source"],
                          cpu_capability=torch.backends.cpu.get_cpu_capability())), file=sys.stderr)
    ok = True
    for seed in seeds:
        r = run_once(args, bench, seed)
        r["base_seed"] = base
        ok &= r["status"] == "success"
        print(json.dumps(r), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
