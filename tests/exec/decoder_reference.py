#!/usr/bin/python3
"""The executor's decoder (exec/decoder.hpp) checked against PyTorch autograd (issue 40).

Builds the same Llama-style decoder in float64 torch ops written from Hugging Face's
LlamaForCausalLM (RMSNorm, rotate_half RoPE, repeat_kv GQA, causal softmax attention, SwiGLU MLP,
final norm, LM head or tied embedding, cross-entropy with ignored targets) and PEFT's LoRA
(y = x W + alpha/r (x A) B), with the same first values (splitmix64 of each parameter's index) and
the same synthetic corpus, and lets autograd take the gradients: nothing of the C++ backward is
reused. Writes, per configuration, the loss and per named tensor the gradient's L2 norm and its
dot product with a fixed pseudo-random vector; tests/exec/decoder_test.cpp reads the file and
checks its own figures against them.

Run: /usr/bin/python3 tests/exec/decoder_reference.py > tests/exec/decoder_reference.txt
(Debian's python3-torch; written with torch 1.13.)
"""
import math
import sys

import torch

M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def unit_uniform(h):
    return (h >> 11) * 2.0**-52 - 1.0


def fill_uniform(n, seed, first_index, bound):
    return [bound * unit_uniform(splitmix64(seed ^ splitmix64(first_index + i))) for i in range(n)]


PROJS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

# Configurations: the C++ test names the same ones (decoder_test.cpp kConfigs).
CONFIGS = {
    "full-gqa": dict(hidden=16, layers=2, heads=4, kv_heads=2, head_dim=4, ffn=24, vocab=13, tied=False,
                     rope_theta=10000.0, eps=1e-5, lora_rank=0, lora_alpha=0, lora_targets=[],
                     batch=2, seq=6, seed=1, ignore=[3]),
    "tied-mha": dict(hidden=16, layers=2, heads=2, kv_heads=2, head_dim=8, ffn=20, vocab=11, tied=True,
                     rope_theta=500000.0, eps=1e-6, lora_rank=0, lora_alpha=0, lora_targets=[],
                     batch=3, seq=5, seed=7, ignore=[]),
    "lora-all": dict(hidden=16, layers=2, heads=4, kv_heads=2, head_dim=4, ffn=24, vocab=13, tied=False,
                     rope_theta=10000.0, eps=1e-5, lora_rank=2, lora_alpha=4.0, lora_targets=PROJS,
                     batch=2, seq=6, seed=3, ignore=[0, 7]),
}


def corpus_sequence(vocab, seq, index):
    h = splitmix64((index * 0x2545F4914F6CDD1D + 1) & M64)
    token = h % vocab
    tokens, targets = [], []
    for i in range(seq + 1):
        if i < seq:
            tokens.append(token)
        if i > 0:
            targets.append(token)
        h = splitmix64(h)
        token = ((h >> 8) % vocab) if (h & 7) == 0 else (5 * token + 3) % vocab
    return tokens, targets


def shapes(c):
    h, q, kv, f = c["hidden"], c["heads"] * c["head_dim"], c["kv_heads"] * c["head_dim"], c["ffn"]
    return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
            "gate_proj": (h, f), "up_proj": (h, f), "down_proj": (f, h)}


def parameters(c):
    """Named float64 tensors in exec/decoder.hpp's Layout order, with their first values."""
    h, seed = c["hidden"], c["seed"]
    at = 0
    named = {}

    def take(name, rows, cols, values):
        nonlocal at
        named[name] = torch.tensor(values, dtype=torch.float64).reshape(rows, cols) if cols else \
            torch.tensor(values, dtype=torch.float64)
        at += len(values)

    take("embed", c["vocab"], h, fill_uniform(c["vocab"] * h, seed, 0, 1.0))
    sh = shapes(c)
    for layer in range(c["layers"]):
        take(f"L{layer}.norm_in", h, 0, [1.0] * h)
        for p in PROJS:
            if p == "gate_proj":
                take(f"L{layer}.norm_post", h, 0, [1.0] * h)
            i, o = sh[p]
            take(f"L{layer}.{p}", i, o, fill_uniform(i * o, seed, at, 1.0 / math.sqrt(i)))
    take("final_norm", h, 0, [1.0] * h)
    if not c["tied"]:
        take("head", h, c["vocab"], fill_uniform(h * c["vocab"], seed, at, 1.0 / math.sqrt(h)))
    adapters = {}
    if c["lora_rank"]:
        r, aseed = c["lora_rank"], splitmix64(seed ^ 0xA5A5A5A5)
        block = sum(r * (sh[p][0] + sh[p][1]) for p in PROJS if p in c["lora_targets"])
        for layer in range(c["layers"]):
            a_at = layer * block
            for p in PROJS:
                if p not in c["lora_targets"]:
                    continue
                i, o = sh[p]
                adapters[f"L{layer}.{p}.lora_A"] = torch.tensor(
                    fill_uniform(i * r, aseed, a_at, 1.0 / math.sqrt(i)), dtype=torch.float64).reshape(i, r)
                adapters[f"L{layer}.{p}.lora_B"] = torch.tensor(
                    fill_uniform(r * o, aseed, a_at + i * r, 0.5), dtype=torch.float64).reshape(r, o)
                a_at += r * (i + o)
    return named, adapters


def rms_norm(x, g, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def loss_of(c, P, A, tokens, targets):
    B, S, d = c["batch"], c["seq"], c["head_dim"]
    nh, nkv = c["heads"], c["kv_heads"]
    scale = c["lora_alpha"] / c["lora_rank"] if c["lora_rank"] else 0.0

    def linear(layer, p, x):
        y = x @ P[f"L{layer}.{p}"]
        if f"L{layer}.{p}.lora_A" in A:
            y = y + scale * ((x @ A[f"L{layer}.{p}.lora_A"]) @ A[f"L{layer}.{p}.lora_B"])
        return y

    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(torch.arange(S, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x = P["embed"][tokens]  # [B, S, h]
    mask = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)
    for layer in range(c["layers"]):
        xn = rms_norm(x, P[f"L{layer}.norm_in"], c["eps"])
        q = linear(layer, "q_proj", xn).view(B, S, nh, d).transpose(1, 2)
        k = linear(layer, "k_proj", xn).view(B, S, nkv, d).transpose(1, 2)
        v = linear(layer, "v_proj", xn).view(B, S, nkv, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k[:, :, None].expand(B, nkv, nh // nkv, S, d).reshape(B, nh, S, d)  # repeat_kv
        v = v[:, :, None].expand(B, nkv, nh // nkv, S, d).reshape(B, nh, S, d)
        scores = (q @ k.transpose(2, 3)) / math.sqrt(d)
        probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        o = (probs @ v).transpose(1, 2).reshape(B, S, nh * d)
        h1 = x + linear(layer, "o_proj", o)
        hn = rms_norm(h1, P[f"L{layer}.norm_post"], c["eps"])
        act = torch.nn.functional.silu(linear(layer, "gate_proj", hn)) * linear(layer, "up_proj", hn)
        x = h1 + linear(layer, "down_proj", act)
    hf = rms_norm(x, P["final_norm"], c["eps"])
    logits = hf @ (P["embed"].T if c["tied"] else P["head"])
    return torch.nn.functional.cross_entropy(logits.reshape(B * S, -1), targets.reshape(-1), ignore_index=-1)


def probe_vector(name, n):
    """The fixed vector a gradient is dotted with: splitmix64 of its name's bytes and the index."""
    seed = 0
    for ch in name.encode():
        seed = splitmix64(seed ^ ch)
    return torch.tensor([unit_uniform(splitmix64(seed + i)) for i in range(n)], dtype=torch.float64)


def main():
    out = sys.stdout
    out.write(f"# tests/exec/decoder_reference.py, torch {torch.__version__}, float64 autograd\n")
    for name, c in CONFIGS.items():
        tokens, targets = [], []
        for b in range(c["batch"]):
            t, g = corpus_sequence(c["vocab"], c["seq"], b)
            tokens += t
            targets += g
        for i in c["ignore"]:
            targets[i] = -1
        tokens = torch.tensor(tokens).reshape(c["batch"], c["seq"])
        targets = torch.tensor(targets).reshape(c["batch"], c["seq"])
        P, A = parameters(c)
        trainable = A if c["lora_rank"] else P
        for t in trainable.values():
            t.requires_grad_(True)
        loss = loss_of(c, P, A, tokens, targets)
        loss.backward()
        out.write(f"{name} loss {loss.item():.17g}\n")
        for tname, t in trainable.items():
            g = t.grad.reshape(-1)
            out.write(f"{name} {tname} norm {g.norm().item():.17g} dot {(g @ probe_vector(tname, g.numel())).item():.17g}\n")


if __name__ == "__main__":
    main()
