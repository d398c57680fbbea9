#!/usr/bin/env python3
"""PyTorch twin of referee's mini benchmarks, for step-time comparison.

Same architectures, shapes, batch sizes and optimizers as
workloads/src/{resnet,llm}.rs (defaults of ResnetHparams / LlmHparams):
  mini_resnet: stem conv3x3(1->16)+BN+ReLU, 3 stages of 1 basic block
               (16, 32, 64 channels, strides 1, 2, 2, 1x1 projection shortcuts),
               global average pool, linear 64->10; SGD momentum 0.9, wd 5e-4.
  mini_llm:    vocab 2048, T 128, d 128, 4 layers, 4 heads, SwiGLU 384, RoPE,
               RMSNorm, tied head; AdamW(0.9, 0.95, eps 1e-5, wd 0.1), clip 1.0.
Prints one JSON object per (model, batch) with the median ms per step.
Usage: torch_twin.py [--model resnet|llm|all] [--batch N[,N..]] [--steps N] [--warmup N] [--threads N]
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        sc = x if self.down is None else self.down(x)
        return F.relu(y + sc)


class MiniResnet(nn.Module):
    def __init__(self, w0=16, blocks=(1, 1, 1), classes=10):
        super().__init__()
        self.stem = nn.Conv2d(1, w0, 3, 1, 1, bias=False)
        self.stem_bn = nn.BatchNorm2d(w0)
        layers, cin = [], w0
        for s, nb in enumerate(blocks):
            cout = w0 << s
            for i in range(nb):
                layers.append(BasicBlock(cin, cout, 2 if (s > 0 and i == 0) else 1))
                cin = cout
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        x = self.blocks(x)
        return self.fc(x.mean((2, 3)))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.g = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.g


def rope_tables(dh, t, base=10000.0):
    inv = base ** (-torch.arange(0, dh // 2, dtype=torch.float64) * 2 / dh)
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def apply_rope(x, cos, sin):  # x [B, H, T, Dh]; rotate-half pairing (i, i+dh/2)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class Block(nn.Module):
    def __init__(self, d, nh, f):
        super().__init__()
        self.nh = nh
        self.attn_norm = RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.mlp_norm = RMSNorm(d)
        self.gate_up = nn.Linear(d, 2 * f, bias=False)
        self.down = nn.Linear(f, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, t, 3, self.nh, d // self.nh).permute(2, 0, 3, 1, 4)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        g, u = self.gate_up(self.mlp_norm(x)).chunk(2, -1)
        return x + self.down(F.silu(g) * u)


class MiniLlm(nn.Module):
    def __init__(self, vocab=2048, t=128, d=128, layers=4, nh=4, f=384):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d, nh, f) for _ in range(layers)])
        self.norm = RMSNorm(d)
        cos, sin = rope_tables(d // nh, t)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx):
        x = self.embed(idx)
        t = idx.shape[1]
        for b in self.blocks:
            x = b(x, self.cos[:t], self.sin[:t])
        return self.norm(x) @ self.embed.weight.t()  # tied head


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def bench(step, warmup, steps):
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        step()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return median(times), min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all")
    ap.add_argument("--batch", default=None)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    out = []
    if a.model in ("resnet", "all"):
        for b in [int(x) for x in (a.batch or "128").split(",")]:
            m = MiniResnet()
            decay = [p for n, p in m.named_parameters() if p.dim() > 1]
            other = [p for n, p in m.named_parameters() if p.dim() <= 1]
            opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": other, "weight_decay": 0.0}],
                                  lr=0.1, momentum=0.9)
            x = torch.randn(b, 1, 28, 28)
            y = torch.randint(0, 10, (b,))

            def step():
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(m(x), y)
                loss.backward()
                opt.step()

            med, mn = bench(step, a.warmup, a.steps)
            out.append(dict(impl="torch", model="mini_resnet", batch=b, threads=torch.get_num_threads(),
                            median_ms=round(med, 2), min_ms=round(mn, 2), samples_per_s=round(b * 1e3 / med, 1)))
    if a.model in ("llm", "all"):
        for b in [int(x) for x in (a.batch or "32").split(",")]:
            m = MiniLlm()
            decay = [p for n, p in m.named_parameters() if p.dim() > 1]
            other = [p for n, p in m.named_parameters() if p.dim() <= 1]
            opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                                    lr=1e-3, betas=(0.9, 0.95), eps=1e-5)
            toks = torch.randint(0, 2048, (b, 129))
            x, y = toks[:, :-1], toks[:, 1:]

            def step():
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(m(x).view(-1, 2048), y.reshape(-1))
                loss.backward()
                torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
                opt.step()

            med, mn = bench(step, a.warmup, a.steps)
            out.append(dict(impl="torch", model="mini_llm", batch=b, threads=torch.get_num_threads(),
                            median_ms=round(med, 2), min_ms=round(mn, 2), samples_per_s=round(b * 1e3 / med, 1)))
    for o in out:
        print(json.dumps(o))


if __name__ == "__main__":
    main()
