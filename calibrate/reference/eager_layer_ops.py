#!/usr/bin/env python3
"""Ground truth for ftplan's host-bound (launch-bound) model: how many ATen ops that would each be
a CUDA kernel launch one eager Hugging Face decoder layer issues per pass, and what each costs the
host (Python + nn.Module call + autograd + dispatcher) on this machine's CPU.

    python3 calibrate/reference/eager_layer_ops.py            # counts + timings table (~1 min on 2 cores)
    python3 calibrate/reference/eager_layer_ops.py --explain full,none,sdpa   # list the counted ops

Needs only PyTorch (Debian: apt-get install python3-torch; the committed table in eager_layer_ops.md
was made with bookworm's 1.13 on a CPU). No transformers or peft: the layer is written out as
transformers writes it (src/transformers/models/llama/modeling_llama.py at commit 5dd4a6354885:
LlamaRMSNorm, apply_rotary_pos_emb, LlamaAttention, eager_attention_forward, LlamaMLP,
LlamaDecoderLayer; integrations/sdpa_attention.py at 00c238bd242b: enable_gqa=True, is_causal, no
mask, then transpose(1, 2).contiguous()), and LoRA as peft writes lora.Linear.forward
(src/peft/tuners/lora/layer.py at 003369494699: result = base_layer(x); x = _cast_input_dtype(x,
lora_A.weight.dtype); result = result + lora_B(lora_A(dropout(x))) * scaling; result.to(dtype)),
with nn.Dropout(p) or nn.Identity when p = 0 and get_peft_model's default autocast_adapter_dtype=True
(fp32 adapters on a bf16 base). RoPE cos/sin and the eager causal mask are made once per model
forward by LlamaModel, so they are built outside the layer and not counted.

Counting. torch.profiler (CPU, record_shapes) records the ATen call tree of one forward and, in a
second session, one backward (out.backward(grad), grads set to None first, so AccumulateGrad steals
and launches nothing). Walking down from the top, an aten:: op is counted as one kernel and not
descended into, unless it is in NO_KERNEL (views and metadata, allocation, composites that only
dispatch to other ops: those are descended into), or all its inputs are 0-d (a wrapped Python
scalar: on CUDA it stays a host scalar passed as a kernel argument). aten::mean, aten::sum and
aten::softmax(dtype=float32) count once although CPU 1.13 runs them as two ops (sum+div_,
fill_+sum, copy+_softmax): on CUDA each is one kernel. aten::dropout counts once when it does
anything (CUDA native_dropout is one fused kernel; CPU runs bernoulli_/div_/mul). torch 1.13 has no
F.scaled_dot_product_attention: a stand-in autograd.Function counts as ONE op forward and ONE op
backward (the dispatcher sees one aten::_scaled_dot_product_flash_attention[_backward] call; on CUDA
the flash backward launches about 3 kernels: dot(dO,O), the backward kernel, convert dQ). Its
Python autograd.Function overhead is in the sdpa timings; the eager-attention rows are pure ATen.

Timing: time.perf_counter around the layer's forward call and around backward, median of REPS,
single thread; "functional" runs the same ops as plain functions (no nn.Module __call__), and
"no_grad" runs them without autograd recording; "1 op" is torch.mul on two 4x4 tensors.
"""
import argparse
import collections
import os
import statistics
import subprocess
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.checkpoint import checkpoint
except ImportError:
    sys.exit("eager_layer_ops.py needs PyTorch (Debian: apt-get install python3-torch)")

from hf_llama_ops import RMSNorm, apply_rotary_pos_emb, repeat_kv  # noqa: E402 (after the torch check)

H, HEADS, KV, FFN, SEQ, BATCH = 256, 4, 2, 688, 16, 1
DTYPE, ADAPTER_DTYPE, RANK, ALPHA, LORA_DROPOUT = torch.bfloat16, torch.float32, 16, 32, 0.05
TARGETS = {"full": (), "lora_qkvo": ("q_proj", "k_proj", "v_proj", "o_proj"),
           "lora_all": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")}
REPS = 300
TIME_SHAPE = (64, 176, 4)  # hidden, ffn, seq for the timings (heads, kv heads, batch as above)
NO_KERNEL = {f"aten::{n}" for n in (
    "view view_as _unsafe_view _reshape_alias reshape transpose t permute expand expand_as as_strided "
    "unsqueeze squeeze slice select split split_with_sizes chunk narrow unbind alias detach detach_ "
    "resolve_conj resolve_neg result_type empty empty_like empty_strided resize_ lift_fresh contiguous "
    "to _to_copy type_as linear matmul zeros zeros_like ones_like full full_like new_empty is_same_size "
    "slice_backward softmax fill_ div_").split()}
LIST_INPUT = {"aten::cat", "aten::stack"}  # 1.13's record_shapes leaves TensorList inputs empty
ONE_KERNEL_IF_WORK = {"aten::dropout", "aten::feature_dropout"}
STANDIN = {"SDPAStandIn", "SDPAStandInBackward"}  # autograd nodes: counted as one op, not descended


class SDPAStandIn(torch.autograd.Function):
    """One op each way, output laid out (b, s, heads, d) as the flash kernel writes it (see header)."""

    @staticmethod
    def forward(ctx, q, k, v):
        ctx.rep = q.shape[1] // k.shape[1]
        return torch.empty_like(q.transpose(1, 2), memory_format=torch.contiguous_format).copy_(
            q.transpose(1, 2)).transpose(1, 2)

    @staticmethod
    def backward(ctx, g):  # dq, dk, dv as flash returns them: (b, s, heads, d) contiguous, transposed
        gt = g.transpose(1, 2)
        dkv = gt[:, :, ::ctx.rep].contiguous().transpose(1, 2)
        return gt.contiguous().transpose(1, 2), dkv, dkv.clone()


def attention(impl, q, k, v, mask, n_rep, scaling, training):
    if impl == "sdpa":  # sdpa_attention_forward, torch >= 2.5, no mask: enable_gqa, is_causal
        return SDPAStandIn.apply(q, k, v).transpose(1, 2).contiguous()
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # eager_attention_forward
    w = torch.matmul(q, k.transpose(2, 3)) * scaling
    w = w + mask[:, :, :, : k.shape[-2]]
    w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
    w = F.dropout(w, p=0.0, training=training)
    return torch.matmul(w, v).transpose(1, 2).contiguous()


class Attention(nn.Module):  # LlamaAttention
    def __init__(self, impl):
        super().__init__()
        self.impl, self.head_dim, self.num_key_value_groups = impl, H // HEADS, HEADS // KV
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(H, HEADS * self.head_dim, bias=False)
        self.k_proj = nn.Linear(H, KV * self.head_dim, bias=False)
        self.v_proj = nn.Linear(H, KV * self.head_dim, bias=False)
        self.o_proj = nn.Linear(HEADS * self.head_dim, H, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        attn_output = attention(self.impl, query_states, key_states, value_states, attention_mask,
                                self.num_key_value_groups, self.scaling, self.training)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output), None


class MLP(nn.Module):  # LlamaMLP, hidden_act silu
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(H, FFN, bias=False)
        self.up_proj = nn.Linear(H, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, H, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):  # LlamaDecoderLayer
    def __init__(self, impl):
        super().__init__()
        self.self_attn, self.mlp = Attention(impl), MLP()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(H), RMSNorm(H)

    def forward(self, hidden_states, attention_mask=None, position_embeddings=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states, position_embeddings, attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return (residual + hidden_states,)


class LoraLinear(nn.Module):  # peft lora.Linear, one adapter "default"
    def __init__(self, base_layer):
        super().__init__()
        self.base_layer, self.active_adapters, self.scaling = base_layer, ["default"], {"default": ALPHA / RANK}
        self.lora_dropout = nn.ModuleDict({"default": nn.Dropout(LORA_DROPOUT) if LORA_DROPOUT > 0 else nn.Identity()})
        self.lora_A = nn.ModuleDict({"default": nn.Linear(base_layer.in_features, RANK, bias=False, dtype=ADAPTER_DTYPE)})
        self.lora_B = nn.ModuleDict({"default": nn.Linear(RANK, base_layer.out_features, bias=False, dtype=ADAPTER_DTYPE)})

    def _cast_input_dtype(self, x, dtype):
        return x if x.dtype == dtype else x.to(dtype=dtype)

    def forward(self, x):
        result = self.base_layer(x)
        torch_result_dtype = result.dtype
        lora_A_keys = self.lora_A.keys()
        for active_adapter in self.active_adapters:
            if active_adapter not in lora_A_keys:
                continue
            lora_A, lora_B = self.lora_A[active_adapter], self.lora_B[active_adapter]
            dropout, scaling = self.lora_dropout[active_adapter], self.scaling[active_adapter]
            x = self._cast_input_dtype(x, lora_A.weight.dtype)
            result = result + lora_B(lora_A(dropout(x))) * scaling
        return result.to(torch_result_dtype)


def build(method, impl):
    torch.manual_seed(0)
    layer = DecoderLayer(impl).to(DTYPE).train()
    if method != "full":
        layer.requires_grad_(False)
        for parent in (layer.self_attn, layer.mlp):
            for name in TARGETS[method]:
                if hasattr(parent, name):
                    setattr(parent, name, LoraLinear(getattr(parent, name)))
    x = torch.randn(BATCH, SEQ, H, dtype=DTYPE, requires_grad=True)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, H // HEADS, 2).float() / (H // HEADS)))
    emb = torch.cat([torch.outer(torch.arange(SEQ).float(), inv_freq)] * 2, -1)[None]
    pe = (emb.cos().to(DTYPE), emb.sin().to(DTYPE))
    mask = torch.full((SEQ, SEQ), torch.finfo(DTYPE).min, dtype=DTYPE).triu(1)[None, None] if impl == "eager" else None
    return layer, x, pe, mask


def run_fwd(layer, x, pe, mask, ckpt):
    if ckpt:
        return checkpoint(layer, x, mask, pe, use_reentrant=False)[0]
    return layer(x, mask, pe)[0]


def kernels(evt, out):
    name = evt.name
    if name in STANDIN or name.startswith("SDPAStandIn"):
        out.append(name)
    elif name.startswith("aten::") and name not in NO_KERNEL:
        scalar_only = name not in LIST_INPUT and all(len(s) == 0 for s in (evt.input_shapes or [[]]))
        if not scalar_only and (name not in ONE_KERNEL_IF_WORK or evt.cpu_children):
            out.append(name)
    else:
        for c in evt.cpu_children:
            kernels(c, out)
    return out


def count(method, impl, ckpt):
    layer, x, pe, mask = build(method, impl)
    for _ in range(2):  # warm up
        run_fwd(layer, x, pe, mask, ckpt).backward(torch.ones(BATCH, SEQ, H, dtype=DTYPE))
    roots = lambda p: [e for e in p.events() if e.cpu_parent is None]
    runs = []
    for _ in range(5):  # 1.13's profiler now and then mis-nests a callee beside its caller (+1): keep the least
        layer.zero_grad(set_to_none=True)
        x.grad = None
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as pf:
            out = run_fwd(layer, x, pe, mask, ckpt)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as pb:
            out.backward(torch.ones(BATCH, SEQ, H, dtype=DTYPE))
        runs.append([sum((kernels(e, []) for e in roots(p)), []) for p in (pf, pb)])
    return [min((r[i] for r in runs), key=len) for i in (0, 1)]


def timed(fn, reps=REPS):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


def time_layer(method, impl, ckpt):
    layer, x, pe, mask = build(method, impl)
    g, fw, bw = torch.ones(BATCH, SEQ, H, dtype=DTYPE), [], []
    for i in range(REPS + 20):
        layer.zero_grad(set_to_none=True)
        x.grad = None
        t0 = time.perf_counter()
        out = run_fwd(layer, x, pe, mask, ckpt)
        t1 = time.perf_counter()
        out.backward(g)
        t2 = time.perf_counter()
        if i >= 20:
            fw.append(t1 - t0)
            bw.append(t2 - t1)
    return statistics.median(fw) * 1e6, statistics.median(bw) * 1e6


def functional_forward(p, x, pe, mask, impl):
    """The full fine-tune layer's forward as plain functions: same ATen ops, no nn.Module calls."""
    def rms(h, w):
        dt = h.dtype
        h = h.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return w * h.to(dt)
    b, s, _ = x.shape
    h = rms(x, p["input_layernorm.weight"])
    q = F.linear(h, p["self_attn.q_proj.weight"]).view(b, s, -1, H // HEADS).transpose(1, 2)
    k = F.linear(h, p["self_attn.k_proj.weight"]).view(b, s, -1, H // HEADS).transpose(1, 2)
    v = F.linear(h, p["self_attn.v_proj.weight"]).view(b, s, -1, H // HEADS).transpose(1, 2)
    q, k = apply_rotary_pos_emb(q, k, *pe)
    a = attention(impl, q, k, v, mask, HEADS // KV, (H // HEADS) ** -0.5, True).reshape(b, s, -1).contiguous()
    x = x + F.linear(a, p["self_attn.o_proj.weight"])
    h = rms(x, p["post_attention_layernorm.weight"])
    m = F.silu(F.linear(h, p["mlp.gate_proj.weight"])) * F.linear(h, p["mlp.up_proj.weight"])
    return x + F.linear(m, p["mlp.down_proj.weight"])


def host_info():
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next((l.split(":", 1)[1].strip() for l in lscpu.splitlines() if l.startswith("Model name")), model)
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}, " \
           f"nice {os.nice(0)}, torch {torch.__version__}, 1 thread"


def main():
    global H, FFN, SEQ
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--explain", help="method,ckpt,attention e.g. lora_qkvo,full,eager: list the counted ops")
    ap.add_argument("--no-timing", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.explain:
        m, c, a = args.explain.split(",")
        for phase, ops in zip(("forward", "backward"), count(m, a, c == "full")):
            print(phase, len(ops), dict(collections.Counter(ops)))
        return
    print(f"# {host_info()}")
    print(f"# shape hidden {H} heads {HEADS} kv {KV} ffn {FFN} seq {SEQ} batch {BATCH}, bf16, LoRA r {RANK} "
          f"dropout {LORA_DROPOUT} fp32 adapters; checkpoint = torch.utils.checkpoint(use_reentrant=False); "
          f"timed at hidden {TIME_SHAPE[0]} ffn {TIME_SHAPE[1]} seq {TIME_SHAPE[2]}")
    print("| attention | method | ckpt | fwd ops | bwd ops | fwd+bwd | fwd µs | bwd µs | µs/op fwd | µs/op bwd |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    base, times = {}, {}
    cfgs = [(i, m, c) for i in ("sdpa", "eager") for m in TARGETS for c in (False, True)]
    for cfg in cfgs:
        base[cfg] = tuple(len(o) for o in count(cfg[1], cfg[0], cfg[2]))
    # time at TIME_SHAPE: same ops, compute ~1 µs per matmul (bf16 mm at the count
    H, FFN, SEQ = TIME_SHAPE  # shape takes ~40 µs on this CPU, which would be read as host cost)
    for cfg in cfgs:
        times[cfg] = (0.0, 0.0) if args.no_timing else time_layer(cfg[1], cfg[0], cfg[2])
    for impl, method, ckpt in cfgs:
        (f, b), (tf, tb) = base[impl, method, ckpt], times[impl, method, ckpt]
        print(f"| {impl} | {method} | {'full' if ckpt else 'none'} | {f} | {b} | {f + b} | "
              f"{tf:.0f} | {tb:.0f} | {tf / f:.1f} | {tb / b:.1f} |")
    print("\n| attention | LoRA extra per targeted module, fwd | bwd | ckpt recompute (bwd_ckpt - bwd) |")
    print("|---|---|---|---|")
    for impl in ("sdpa", "eager"):
        (f0, b0), (f4, b4), (f7, b7) = (base[impl, m, False] for m in TARGETS)
        print(f"| {impl} | {(f4 - f0) / 4:g} (all-linear {(f7 - f0) / 7:g}) | {(b4 - b0) / 4:g} (all-linear "
              f"{(b7 - b0) / 7:g}) | {base[impl, 'full', True][1] - b0} |")
    if args.no_timing:
        return
    print("\n| attention | forward variant (full fine-tune) | µs | ops | µs/op |")
    print("|---|---|---|---|---|")
    for impl in ("sdpa", "eager"):
        layer, x, pe, mask = build("full", impl)
        p = dict(layer.named_parameters())
        n = base[impl, "full", False][0]
        with torch.no_grad():
            ng = timed(lambda: functional_forward(p, x, pe, mask, impl))
        for label, us in (("nn.Module, autograd on", timed(lambda: layer(x, mask, pe))),
                          ("functional, autograd on", timed(lambda: functional_forward(p, x, pe, mask, impl))),
                          ("functional, no_grad", ng)):
            print(f"| {impl} | {label} | {us:.0f} | {n} | {us / n:.1f} |")
    a, b = torch.randn(4, 4, dtype=DTYPE), torch.randn(4, 4, dtype=DTYPE, requires_grad=True)
    with torch.no_grad():
        one = timed(lambda: torch.mul(a, b), 20000)
    print(f"| - | 1 op torch.mul 4x4, no_grad / autograd on | {one:.2f} / "
          f"{timed(lambda: torch.mul(a, b), 20000):.2f} | 1 | |")


if __name__ == "__main__":
    main()
