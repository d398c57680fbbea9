#!/usr/bin/env python3
"""PyTorch twin of referee's mini benchmarks: the same models, initialisation,
batch and optimisers, in three forms a PyTorch user could write, for a
step-time comparison (scripts/bench-train-step.sh) and for the PyTorch
trainer to target (scripts/torch_train.py, which imports this module).

The models follow workloads/src/{resnet,llm}.rs (defaults of ResnetHparams /
LlmHparams), checked against the Rust code:
  mini_resnet: stem conv3x3(1->16, no bias)+BN+ReLU, 3 stages of 1 basic block
               (16, 32, 64 channels; strides 1, 2, 2; conv1x1+BN projection
               shortcut where the shape changes), global average pool, linear
               64->10. BN eps 1e-5, momentum 0.1 (torch convention, unbiased
               running variance). Init: conv weights Kaiming normal fan_out
               (std sqrt(2 / (k*k*cout))) truncated at 2 std; linear weight and
               bias uniform(+-1/sqrt(64)); BN gain 1, bias 0.
               SGD momentum 0.9 (torch semantics), L2 weight decay 5e-4 on conv
               and linear weights only (not on BN parameters or the head bias).
  mini_llm:    vocab 2048, T 128, d 128, 4 layers, 4 heads (head dim 32),
               RMSNorm (eps 1e-5, gain only), fused qkv projection (columns
               [q|k|v], head-major), RoPE base 10000 with rotate-half pairing
               (i, i + dh/2), causal softmax attention (scale 1/sqrt(dh)),
               SwiGLU 384 ([gate|up]: silu(gate) * up), no biases, final RMSNorm,
               head tied to the embedding. Init: normal(0, 0.02) truncated at
               2 std for the embedding and every projection, the residual
               outputs (w_o, w_down) scaled by 1/sqrt(2 * 4); norm gains 1.
               AdamW (0.9, 0.95, eps 1e-5, decoupled weight decay 0.1 on the
               matrices and the embedding, none on the norm gains), gradient
               clipping to global norm 1.0.
Initial weights are drawn from referee's own generator (datasets/src/rng.rs:
SplitMix64 label streams, Box-Muller, truncation by rejection), so the same
seed gives bit-identical initial weights (`weights_sha256` matches referee's
`initial_weights_sha256`).

Variants (--variant):
  eager     the naive form kept for comparison (the twin as it was): NCHW
            convolutions, RMSNorm and RoPE composed in Python, default
            (for-loop) optimisers on CPU. (It already used
            scaled_dot_product_attention.)
  fast      what a PyTorch user would write for speed, eagerly: ResNet in
            channels_last (model and input); LLM with F.rms_norm, RoPE as one
            fused-friendly expression over q and k together, SDPA with
            is_causal=True; fused optimisers on CPU (SGD/AdamW fused=True,
            else foreach) and foreach gradient clipping.
  compiled  the fast model and loss under torch.compile (inductor, C++ on
            CPU; forward and the AOT-autograd backward), plus the optimiser
            step (and clipping) compiled with the learning rate as a tensor.
            Compile time is excluded (warm-up steps) and reported as
            compile_s; a failure is reported as such, with the reason.
  compiled-step
            the whole train step (zero_grad, forward, loss, backward,
            clipping, optimiser) as one torch.compile'd function, the
            backward traced by compiled autograd.
  best      run all of them, one JSON line each.

Prints one JSON object per (model, batch, variant): median and min ms/step.
Usage: torch_twin.py [--model resnet|llm|all] [--batch N[,N..]] [--steps N]
                     [--warmup N] [--threads N]
                     [--variant eager|fast|compiled|compiled-step|best]
"""
import argparse
import hashlib
import json
import math
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VARIANTS = ("eager", "fast", "compiled", "compiled-step")

# ---------------------------------------------------------------------------
# referee's generator (datasets/src/rng.rs), vectorised with numpy uint64

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
LABEL_SALT = 0x5DEECE66D1CE4E5B


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def mix64_np(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class SplitMix64:
    """referee's SplitMix64 (state += GOLDEN; output mix64(state))."""

    def __init__(self, seed):
        self.state = seed & M64

    def next_u64(self):
        self.state = (self.state + GOLDEN) & M64
        return mix64(self.state)

    def next_many(self, n):
        """The next n outputs as a numpy uint64 array (advances the state)."""
        k = np.arange(1, n + 1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            states = np.uint64(self.state) + k * np.uint64(GOLDEN)
            out = mix64_np(states)
        self.state = (self.state + n * GOLDEN) & M64
        return out

    def below(self, n):
        """Uniform in 0..n, unbiased (Lemire multiply-shift with rejection)."""
        threshold = (-n) % n
        while True:
            m = self.next_u64() * n
            if (m & M64) >= threshold:
                return m >> 64


def derive_seed(parts):
    h = 0x243F6A8885A308D3
    for p in parts:
        h = (mix64(h ^ (p & M64)) + GOLDEN) & M64
    return h


def run_seeds(base, n):
    """The seeds of n runs from a session's base seed (`referee run --seed`)."""
    rng, out = SplitMix64(base), []
    while len(out) < n:
        s = rng.next_u64() % (1 << 31)
        if s not in out:
            out.append(s)
    return out


def label_stream(seed, label):
    h = 0xCBF29CE484222325
    for b in label.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    rot = ((h << 17) | (h >> 47)) & M64
    r = SplitMix64(seed ^ rot ^ LABEL_SALT)
    r.next_u64()
    return r


def _uniform(x):
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def trunc_normal(seed, label, n, std):
    """referee's Rng::derive(seed, label).normal_vec(n, std): Box-Muller
    (cos branch, two draws per normal), rejected outside +-2, as f32."""
    r = label_stream(seed, label)
    out = np.empty(0, dtype=np.float32)
    while out.size < n:
        need = n - out.size
        x = r.next_many(2 * (need + need // 16 + 16))
        u1 = 1.0 - _uniform(x[0::2])
        u2 = _uniform(x[1::2])
        z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)
        keep = np.abs(z) <= 2.0
        # Draws after the n-th accepted value must not be consumed: the
        # stream is per label, so nothing else reads it; just truncate.
        out = np.concatenate([out, (z[keep] * std).astype(np.float32)])
    return out[:n]


def uniform_sym(seed, label, n, bound):
    """referee's Rng::derive(seed, label).uniform_vec(n, bound)."""
    x = label_stream(seed, label).next_many(n)
    return ((_uniform(x) * 2.0 - 1.0) * bound).astype(np.float32)


# ---------------------------------------------------------------------------
# mini_resnet


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride, bn_eps, bn_mom):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout, eps=bn_eps, momentum=bn_mom)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=bn_eps, momentum=bn_mom)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout, eps=bn_eps, momentum=bn_mom))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        sc = x if self.down is None else self.down(x)
        return F.relu(y + sc)


class MiniResnet(nn.Module):
    def __init__(self, hp=None):
        super().__init__()
        hp = {**RESNET_DEFAULTS, **(hp or {})}
        self.hp = hp
        w0, eps, mom = hp["base_width"], hp["bn_eps"], hp["bn_momentum"]
        self.stem = nn.Conv2d(1, w0, 3, 1, 1, bias=False)
        self.stem_bn = nn.BatchNorm2d(w0, eps=eps, momentum=mom)
        layers, cin, self.block_names = [], w0, []
        for s, nb in enumerate(hp["blocks"]):
            cout = w0 << s
            for i in range(nb):
                layers.append(BasicBlock(cin, cout, 2 if (s > 0 and i == 0) else 1, eps, mom))
                self.block_names.append(f"stage{s + 1}.block{i}")
                cin = cout
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, hp["num_classes"])

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        x = self.blocks(x)
        return self.fc(x.mean((2, 3)))

    def referee_params(self):
        """(referee name, torch parameter, kind) in referee's flat order
        (workloads/src/resnet.rs: registration order)."""
        out = []
        out.append(("stem.conv", self.stem.weight, "conv"))
        out.append(("stem.bn.gamma", self.stem_bn.weight, "gamma"))
        out.append(("stem.bn.beta", self.stem_bn.bias, "beta"))
        for name, b in zip(self.block_names, self.blocks):
            out.append((f"{name}.conv1", b.conv1.weight, "conv"))
            out.append((f"{name}.bn1.gamma", b.bn1.weight, "gamma"))
            out.append((f"{name}.bn1.beta", b.bn1.bias, "beta"))
            out.append((f"{name}.conv2", b.conv2.weight, "conv"))
            out.append((f"{name}.bn2.gamma", b.bn2.weight, "gamma_last"))
            out.append((f"{name}.bn2.beta", b.bn2.bias, "beta"))
            if b.down is not None:
                out.append((f"{name}.down.conv", b.down[0].weight, "conv"))
                out.append((f"{name}.down.bn.gamma", b.down[1].weight, "gamma"))
                out.append((f"{name}.down.bn.beta", b.down[1].bias, "beta"))
        out.append(("fc.w", self.fc.weight, "fc_w"))
        out.append(("fc.b", self.fc.bias, "fc_b"))
        return out

    @torch.no_grad()
    def init_like_referee(self, seed):
        zero_last = self.hp["zero_init_residual"]
        for name, p, kind in self.referee_params():
            if kind == "conv":
                cout, cin, k, _ = p.shape
                w = trunc_normal(seed, name, k * k * cin * cout, math.sqrt(2.0 / (k * k * cout)))
                # referee keeps HWIO [k*k*cin, cout]; torch OIHW
                p.copy_(torch.from_numpy(w).view(k, k, cin, cout).permute(3, 2, 0, 1))
            elif kind in ("gamma", "gamma_last"):
                p.fill_(0.0 if (kind == "gamma_last" and zero_last) else 1.0)
            elif kind == "beta":
                p.zero_()
            elif kind == "fc_w":
                classes, cin = p.shape
                w = uniform_sym(seed, name, cin * classes, 1.0 / math.sqrt(cin))
                p.copy_(torch.from_numpy(w).view(cin, classes).t())
            elif kind == "fc_b":
                cin = self.fc.weight.shape[1]
                p.copy_(torch.from_numpy(uniform_sym(seed, name, p.numel(), 1.0 / math.sqrt(cin))))
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.reset_running_stats()

    def flat_referee(self):
        """All parameters flat in referee's order and layouts (f32)."""
        parts = []
        for _, p, kind in self.referee_params():
            t = p.detach().float().cpu()
            if kind == "conv":
                t = t.permute(2, 3, 1, 0)  # OIHW -> HWIO
            elif kind == "fc_w":
                t = t.t()
            parts.append(t.contiguous().view(-1))
        return torch.cat(parts)

    def decay_groups(self):
        """(decayed, not decayed): conv and linear weights vs BN and head bias."""
        d, nd = [], []
        for _, p, kind in self.referee_params():
            (d if kind in ("conv", "fc_w") else nd).append(p)
        return d, nd


RESNET_DEFAULTS = dict(image_size=28, num_classes=10, base_width=16, blocks=[1, 1, 1],
                       zero_init_residual=False, bn_eps=1e-5, bn_momentum=0.1, batch_size=128,
                       base_lr=0.1, end_lr=0.0, warmup_steps=46, total_steps=480,
                       decay={"kind": "cosine"}, momentum=0.9, weight_decay=5e-4)

# ---------------------------------------------------------------------------
# mini_llm

LLM_DEFAULTS = dict(vocab_size=2048, seq_len=128, d_model=128, n_layers=4, n_heads=4, ffn_hidden=384,
                    rope_base=10000.0, norm_eps=1e-5, beta1=0.9, beta2=0.95, eps=1e-5, weight_decay=0.1,
                    grad_clip=1.0, batch_size=16, base_lr=3e-3, end_lr=3e-4, warmup_steps=60,
                    total_steps=768, precision="fp32")


class RMSNorm(nn.Module):
    """The naive form: composed in Python."""

    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class FusedRMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_tables(dh, t, base):
    # as workloads/src/ops.rs Rope::new: freq_i = base^(-2i/dh), in f64, then f32
    inv = base ** (-torch.arange(0, dh // 2, dtype=torch.float64) * 2 / dh)
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def apply_rope(x, cos, sin):  # naive: x [B, H, T, Dh]; rotate-half pairing (i, i+dh/2)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class Block(nn.Module):
    def __init__(self, d, nh, f, eps, fast):
        super().__init__()
        self.nh, self.fast = nh, fast
        norm = FusedRMSNorm if fast else RMSNorm
        self.attn_norm = norm(d, eps)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.mlp_norm = norm(d, eps)
        self.gate_up = nn.Linear(d, 2 * f, bias=False)
        self.down = nn.Linear(f, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        nh, dh = self.nh, d // self.nh
        qkv = self.qkv(self.attn_norm(x)).view(b, t, 3, nh, dh)
        if self.fast:
            # RoPE on q and k at once: [B, T, 2, H, Dh] * tables [T, 1, 1, Dh]
            # (cos duplicated, sin with the sign of the rotation baked in).
            qk, v = qkv[:, :, :2], qkv[:, :, 2]
            h = dh // 2
            rot = torch.cat((qk[..., h:], qk[..., :h]), -1)
            qk = qk * cos + rot * sin
            q, k = qk.unbind(2)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=True)
        else:
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        g, u = self.gate_up(self.mlp_norm(x)).chunk(2, -1)
        return x + self.down(F.silu(g) * u)


class MiniLlm(nn.Module):
    def __init__(self, hp=None, fast=False):
        super().__init__()
        hp = {**LLM_DEFAULTS, **(hp or {})}
        self.hp, self.fast = hp, fast
        d, nh, f, eps = hp["d_model"], hp["n_heads"], hp["ffn_hidden"], hp["norm_eps"]
        self.embed = nn.Embedding(hp["vocab_size"], d)
        self.blocks = nn.ModuleList([Block(d, nh, f, eps, fast) for _ in range(hp["n_layers"])])
        self.norm = (FusedRMSNorm if fast else RMSNorm)(d, eps)
        dh, t = d // nh, hp["seq_len"]
        cos, sin = rope_tables(dh, t, hp["rope_base"])
        if fast:
            cos = torch.cat([cos, cos], -1)[:, None, None, :]  # [T, 1, 1, Dh]
            sin = torch.cat([-sin, sin], -1)[:, None, None, :]
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, idx):
        x = self.embed(idx)
        t = idx.shape[1]
        for b in self.blocks:
            x = b(x, self.cos[:t], self.sin[:t])
        return self.norm(x) @ self.embed.weight.t()  # tied head

    def referee_params(self):
        """(referee name, torch parameter, kind) in referee's flat order (workloads/src/llm.rs)."""
        out = [("embed", self.embed.weight, "embed")]
        for l, b in enumerate(self.blocks):
            p = f"layer{l}"
            out += [(f"{p}.attn_norm", b.attn_norm.weight, "norm"), (f"{p}.w_qkv", b.qkv.weight, "lin"),
                    (f"{p}.w_o", b.o.weight, "lin_out"), (f"{p}.mlp_norm", b.mlp_norm.weight, "norm"),
                    (f"{p}.w_gate_up", b.gate_up.weight, "lin"), (f"{p}.w_down", b.down.weight, "lin_out")]
        out.append(("final_norm", self.norm.weight, "norm"))
        return out

    @torch.no_grad()
    def init_like_referee(self, seed):
        std = 0.02
        out_std = std / math.sqrt(2.0 * self.hp["n_layers"])
        for name, p, kind in self.referee_params():
            if kind == "norm":
                p.fill_(1.0)
            elif kind == "embed":
                p.copy_(torch.from_numpy(trunc_normal(seed, name, p.numel(), std)).view(p.shape))
            else:
                # referee keeps [in, out] (x @ W); torch Linear keeps [out, in]
                o, i = p.shape
                w = trunc_normal(seed, name, i * o, out_std if kind == "lin_out" else std)
                p.copy_(torch.from_numpy(w).view(i, o).t())

    def flat_referee(self):
        parts = []
        for _, p, kind in self.referee_params():
            t = p.detach().float().cpu()
            if kind in ("lin", "lin_out"):
                t = t.t()
            parts.append(t.contiguous().view(-1))
        return torch.cat(parts)

    def decay_groups(self):
        d, nd = [], []
        for _, p, kind in self.referee_params():
            (nd if kind == "norm" else d).append(p)
        return d, nd


def weights_sha256(model):
    """sha256 of the f32 little-endian parameters in referee's flat order
    (referee_run.json `initial_weights_sha256`)."""
    return hashlib.sha256(model.flat_referee().numpy().astype("<f4").tobytes()).hexdigest()


# ---------------------------------------------------------------------------
# variants: model, optimiser and step function


def _opt_kwargs(variant, kind):
    """eager: the defaults (a for-loop per parameter on CPU); fast: fused
    kernels (torch >= 2.4 has fused SGD and AdamW on CPU); compiled: foreach
    with the learning rate as a tensor (so a new rate needs no recompile;
    AdamW then wants capturable=True, which works under torch.compile on
    CPU), fused by inductor."""
    if variant == "eager":
        return {}
    if variant.startswith("compiled"):
        return {"foreach": True, "capturable": True} if kind == "adamw" else {"foreach": True}
    return {"fused": True}


def make_optimizer(kind, model, hp, variant, lr):
    decay, other = model.decay_groups()
    groups = [{"params": decay, "weight_decay": hp["weight_decay"]}, {"params": other, "weight_decay": 0.0}]
    lr_arg = torch.tensor(lr) if variant.startswith("compiled") else lr
    if kind == "sgd":
        mk = lambda kw: torch.optim.SGD(groups, lr=lr_arg, momentum=hp["momentum"], **kw)
    else:
        mk = lambda kw: torch.optim.AdamW(groups, lr=lr_arg, betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"], **kw)
    kw = _opt_kwargs(variant, kind)
    try:
        return mk(kw), kw
    except (RuntimeError, ValueError, TypeError) as e:
        if not kw.get("fused"):
            raise
        print(f"note: {kind} {variant}: fused optimiser unavailable ({e}); using foreach", file=sys.stderr)
        kw = {"foreach": True}
        return mk(kw), kw


def set_lr(opt, lr):
    for g in opt.param_groups:
        if isinstance(g["lr"], torch.Tensor):
            g["lr"].fill_(lr)
        else:
            g["lr"] = lr


class Setup:
    """A model in one variant with its optimiser and a train step / eval
    forward. `step(x, y)` returns the loss tensor (not synchronised)."""

    def __init__(self, model_name, variant, hp=None, seed=0, lr=None, compile_mode=None):
        self.model_name, self.variant = model_name, variant
        fast = variant != "eager"
        if model_name == "mini_resnet":
            self.hp = {**RESNET_DEFAULTS, **(hp or {})}
            m = MiniResnet(self.hp)
            m.init_like_referee(seed)
            if fast:
                m = m.to(memory_format=torch.channels_last)
            self.opt, self.opt_kw = make_optimizer("sgd", m, self.hp, variant,
                                                   self.hp["base_lr"] if lr is None else lr)
            self.clip = None
        else:
            self.hp = {**LLM_DEFAULTS, **(hp or {})}
            m = MiniLlm(self.hp, fast=fast)
            m.init_like_referee(seed)
            self.opt, self.opt_kw = make_optimizer("adamw", m, self.hp, variant,
                                                   self.hp["base_lr"] if lr is None else lr)
            self.clip = self.hp["grad_clip"]
        self.model = m
        self.params = [p for p in m.parameters()]
        self.channels_last = fast and model_name == "mini_resnet"
        self.vocab = self.hp.get("vocab_size")

        def loss_fn(x, y):
            logits = self.model(x)
            if self.vocab:
                return F.cross_entropy(logits.view(-1, self.vocab), y.reshape(-1))
            return F.cross_entropy(logits, y)

        def opt_step():
            if self.clip is not None:
                torch.nn.utils.clip_grad_norm_(self.params, self.clip,
                                               foreach=None if variant == "eager" else True)
            self.opt.step()

        self.fwd = self.model
        self.whole = None
        kw = {"mode": compile_mode} if compile_mode else {}
        if variant == "compiled":
            self.loss_fn = torch.compile(loss_fn, dynamic=False, **kw)
            self.opt_step = torch.compile(opt_step, dynamic=False)
            self.fwd = torch.compile(self.model, dynamic=False, **kw)
        elif variant == "compiled-step":
            # The whole step (zero_grad, forward, loss, backward, clipping,
            # optimiser) as one compiled function; the backward is traced by
            # compiled autograd.
            def whole(x, y):
                self.opt.zero_grad(set_to_none=True)
                loss = loss_fn(x, y)
                loss.backward()
                opt_step()
                return loss.detach()

            self.whole = torch.compile(whole, dynamic=False, **kw)
            self.loss_fn, self.opt_step = loss_fn, opt_step
            self.fwd = torch.compile(self.model, dynamic=False, **kw)
        else:
            self.loss_fn, self.opt_step = loss_fn, opt_step

    def prep_x(self, x):
        if self.channels_last:
            return x.contiguous(memory_format=torch.channels_last)
        return x

    def step(self, x, y):
        if self.whole is not None:
            with torch._dynamo.config.patch(compiled_autograd=True):
                return self.whole(self.prep_x(x), y)
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.prep_x(x), y)
        loss.backward()
        self.opt_step()
        return loss

    @torch.no_grad()
    def logits(self, x):
        return self.fwd(self.prep_x(x))

    # -- state kept across a warm-up (compile in init without training) --
    def snapshot(self):
        return [t.detach().clone() for t in self._state_tensors()]

    def restore(self, snap):
        """Puts the weights, BN statistics and optimiser state back in place
        (same tensors, so compiled graphs stay valid); the optimiser restarts
        as fresh (its step counts and moments zeroed)."""
        with torch.no_grad():
            for t, s in zip(self._state_tensors(), snap):
                t.copy_(s)
            for st in self.opt.state.values():
                for k, v in st.items():
                    if isinstance(v, torch.Tensor):
                        v.zero_()
        # SGD's momentum buffer zeroed gives exactly the first-step rule
        # (buf = g); AdamW's step tensor zeroed restarts the bias correction.

    def _state_tensors(self):
        return list(self.model.parameters()) + [b for b in self.model.buffers() if b.dtype.is_floating_point
                                                or b.dtype == torch.long]


def synthetic_batch(model_name, b, hp):
    if model_name == "mini_resnet":
        s = hp["image_size"]
        return torch.randn(b, 1, s, s), torch.randint(0, hp["num_classes"], (b,))
    toks = torch.randint(0, hp["vocab_size"], (b, hp["seq_len"] + 1))
    return toks[:, :-1].contiguous(), toks[:, 1:].contiguous()


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def bench_variant(model_name, variant, b, steps, warmup, compile_mode=None):
    """ms/step of `steps` steps after `warmup` (compiled: after the compile,
    which is timed separately)."""
    s = Setup(model_name, variant, hp={"batch_size": b})
    x, y = synthetic_batch(model_name, b, s.hp)
    t0 = time.perf_counter()
    compile_s = None
    if variant.startswith("compiled"):
        s.step(x, y).item()
        s.step(x, y).item()  # the second call settles guards / recompiles
        compile_s = time.perf_counter() - t0
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        s.step(x, y).item()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return dict(median_ms=round(median(times), 2), min_ms=round(min(times), 2),
                samples_per_s=round(b * 1e3 / median(times), 1), compile_s=compile_s and round(compile_s, 1),
                optimizer=s.opt_kw or "default")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="all", choices=["resnet", "llm", "all"])
    ap.add_argument("--batch", default=None, help="comma-separated batch sizes")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variant", default="eager", choices=list(VARIANTS) + ["best"])
    ap.add_argument("--compile-mode", default=None,
                    help="torch.compile mode for the compiled variant (default: inductor's default)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    variants = VARIANTS if a.variant == "best" else (a.variant,)
    models = {"resnet": ["mini_resnet"], "llm": ["mini_llm"], "all": ["mini_resnet", "mini_llm"]}[a.model]
    for m in models:
        default_b = "128" if m == "mini_resnet" else "16"
        for b in [int(x) for x in (a.batch or default_b).split(",")]:
            for v in variants:
                row = dict(impl="torch", variant=v, model=m, batch=b, threads=torch.get_num_threads(),
                           torch=torch.__version__, cpu_capability=torch.backends.cpu.get_cpu_capability())
                try:
                    row.update(bench_variant(m, v, b, a.steps, a.warmup, a.compile_mode))
                    row["ok"] = True
                except Exception as e:  # a failed cell is reported, not hidden
                    row.update(ok=False, error=f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
                               if str(e).strip() else type(e).__name__)
                    traceback.print_exc(file=sys.stderr)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
