#!/usr/bin/env python3
"""Ground truth for ftplan's per-layer activation model: the bytes PyTorch autograd saves for
backward in one Llama decoder layer, counted with torch.autograd.graph.saved_tensors_hooks.

    python3 calibrate/reference/measure_saved_activations.py --out tests/data/saved_activations.csv
    python3 calibrate/reference/measure_saved_activations.py --explain 'bf16,eager,256,8,2,704,64,2,none,full'

Needs only PyTorch (any version with saved_tensors_hooks: 1.10 or later; the committed table was
made with Debian bookworm's python3-torch 1.13.1 on a CPU). No transformers, no downloads: the
layer is written out below the way Hugging Face transformers writes LlamaDecoderLayer
(models/llama/modeling_llama.py: LlamaRMSNorm.forward, LlamaRotaryEmbedding.forward,
apply_rotary_pos_emb, repeat_kv, eager_attention_forward, LlamaMLP) and the way
integrations/sdpa_attention.py calls SDPA.

What is counted. Every tensor a forward op saves passes the pack hook; tensors are deduplicated
by storage (a tensor saved by several ops, or a view of one, is stored once) and each distinct
storage counts its full size in bytes. The storages fall in four columns:
  layer_bytes        made by this layer's forward, or its input x when an op saves x itself:
                     what one layer adds (ftplan's saved_per_token x tokens)
  shared_bytes       RoPE's cos and sin, computed once per forward by LlamaModel and saved by
                     every layer's multiplications: the same two storages for all layers
  weight_copy_bytes  autocast's 16-bit casts of parameters (ftplan's "autocast 16-bit weight
                     copies" group, a separate inventory entry); parameters themselves are not counted
The layer input x is a leaf that requires grad, as a middle layer's input does.

Configurations:
  precision   fp32      parameters and activations fp32
              bf16      parameters and activations bf16 (pure bf16; also FSDP MixedPrecision
                        param_dtype=bf16, DeepSpeed bf16, whose modules run in bf16)
              autocast  torch.autocast(bfloat16): a full fine-tune keeps fp32 parameters (so an
                        fp32 residual stream); LoRA keeps its frozen base in bf16 (so a bf16
                        residual stream) and its adapters in fp32, as ftplan's recipe does
  attention   eager     HF eager_attention_forward: repeat_kv, QK^T, softmax in fp32, .to(query.dtype), PV
              flash     SDPA / FlashAttention. torch 1.13 has no public
                        F.scaled_dot_product_attention (it came in 2.0), so a stand-in autograd
                        Function saves what the kernels save for backward: q, k, v, out and an
                        fp32 log-sum-exp per head and query (flash-attn flash_attn_interface.py
                        FlashAttnFunc.forward: ctx.save_for_backward(q, k, v, out_padded,
                        softmax_lse, rng_state); PyTorch tools/autograd/derivatives.yaml
                        _scaled_dot_product_flash_attention: query, key, value, output,
                        logsumexp). K and V keep their kv_heads: flash-attn takes GQA natively and
                        HF passes enable_gqa=True to SDPA on torch >= 2.5 when there is no mask
                        (sdpa_attention.py use_gqa_in_sdpa). The output is laid out as the
                        kernels write it, (b, s, heads, d), so HF's transpose(1, 2).contiguous()
                        is a view and o_proj saves that same storage.
  checkpointing none | full (torch.utils.checkpoint, use_reentrant=True, HF's default: the layer
                        saves its inputs x, cos, sin)
  method      full | lora_qv | lora_all: LoRA r=16, alpha 32, no dropout, on q,v or on all seven
              linears, written as torchtune's LoRALinear (and PEFT's lora.Linear with adapters in
              the base's dtype): out = W x + B(A x) * alpha/r, adapters in the trainable weights'
              dtype. (PEFT's default autocast_adapter_dtype=True keeps fp32 adapters on a bf16
              base and casts each adapter's input to fp32, which this does not model.)

CPU versus CUDA. The table is measured on a CPU, ftplan predicts CUDA. Without autocast the
ops, their saved tensors and dtypes are the same on both (HF's code fixes every dtype:
RMSNorm upcasts, softmax has dtype=float32). Under autocast the op lists differ
(aten/src/ATen/autocast_mode.cpp): both cast linear and matmul to bf16, which is what this layer
relies on; CUDA also runs pow, rsqrt and softmax in fp32, but this layer calls them on fp32
inputs already, so they make no difference; CUDA casts scaled_dot_product_attention's inputs to
bf16 (lower_precision_fp list), which CPU 1.13 lacks: the flash stand-in casts q, k, v to bf16
itself when autocast is on, as CUDA's autocast would. Dropout is off (Llama: attention_dropout
0.0, and F.dropout with p = 0 returns its input on both devices); CPU and CUDA dropout save
different masks, so dropout is not measured here.
"""
import argparse
import csv
import io
import itertools
import os
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint
except ImportError:
    sys.exit("measure_saved_activations.py needs PyTorch (Debian: apt-get install python3-torch)")

from hf_llama_ops import RMSNorm, apply_rotary_pos_emb, repeat_kv  # noqa: E402 (after the torch check)

# (hidden, heads, kv_heads, ffn, seq, micro_batch): MHA and GQA, head_dim 32 to 64, small enough
# that the whole table takes seconds on a CPU. Saved bytes are linear in b*s (and b*s*s for the
# eager softmax), so small shapes exercise every term.
SHAPES = [
    (256, 8, 8, 704, 64, 2),
    (256, 8, 2, 704, 64, 2),
    (512, 8, 4, 1376, 128, 1),
    (384, 6, 6, 1024, 96, 3),
]
PRECISIONS = ["fp32", "bf16", "autocast"]
ATTENTIONS = ["eager", "flash"]
CHECKPOINTING = ["none", "full"]
METHODS = ["full", "lora_qv", "lora_all"]
LORA_RANK = 16
LORA_ALPHA = 32.0
LORA_TARGETS = {"full": (), "lora_qv": ("q", "v"), "lora_all": ("q", "k", "v", "o", "gate", "up", "down")}


class LoRALinear(nn.Module):
    """A frozen linear plus B(A x) * alpha / r (Hu et al. 2021; torchtune modules/peft/lora.py LoRALinear)."""

    def __init__(self, base, rank, alpha, adapter_dtype):
        super().__init__()
        self.base = base
        base.weight.requires_grad_(False)
        self.lora_a = nn.Linear(base.in_features, rank, bias=False, dtype=adapter_dtype)
        self.lora_b = nn.Linear(rank, base.out_features, bias=False, dtype=adapter_dtype)
        nn.init.normal_(self.lora_b.weight, std=0.02)  # nonzero, so the backward check exercises it
        self.scaling = alpha / rank

    def forward(self, x):
        return self.base(x) + self.lora_b(self.lora_a(x)) * self.scaling


class FlashEquivalent(torch.autograd.Function):
    """Causal attention that saves what FlashAttention-2 and SDPA's flash kernel save (see the header)."""

    @staticmethod
    def _math(q, k, v, scale):
        rep = q.shape[1] // k.shape[1]
        kk = k.repeat_interleave(rep, dim=1).float()
        vv = v.repeat_interleave(rep, dim=1).float()
        scores = torch.matmul(q.float(), kk.transpose(-1, -2)) * scale
        s = q.shape[2]
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        return scores, vv

    @staticmethod
    def forward(ctx, q, k, v, scale):
        with torch.autocast("cpu", enabled=False):
            scores, vv = FlashEquivalent._math(q, k, v, scale)
            lse = torch.logsumexp(scores, dim=-1)  # (b, heads, s) fp32
            out = torch.matmul(torch.softmax(scores, dim=-1), vv).to(q.dtype)
            out = out.transpose(1, 2).contiguous().transpose(1, 2)  # the kernels' (b, s, heads, d) layout
        ctx.scale = scale
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, _, _ = ctx.saved_tensors
        with torch.enable_grad(), torch.autocast("cpu", enabled=False):
            qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
            scores, vrep = FlashEquivalent._math(qq, kk, vv, ctx.scale)
            out = torch.matmul(torch.softmax(scores, dim=-1), vrep).to(q.dtype)
            gq, gk, gv = torch.autograd.grad(out, (qq, kk, vv), grad_out)
        return gq, gk, gv, None


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, impl, dtype):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.impl = impl
        self.scaling = self.head_dim ** -0.5
        self.q = nn.Linear(hidden, heads * self.head_dim, bias=False, dtype=dtype)
        self.k = nn.Linear(hidden, kv_heads * self.head_dim, bias=False, dtype=dtype)
        self.v = nn.Linear(hidden, kv_heads * self.head_dim, bias=False, dtype=dtype)
        self.o = nn.Linear(heads * self.head_dim, hidden, bias=False, dtype=dtype)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        if self.impl == "eager":
            # eager_attention_forward; the causal mask is an additive float tensor as HF builds it.
            k = repeat_kv(k, self.heads // self.kv_heads)
            v = repeat_kv(v, self.heads // self.kv_heads)
            w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
            mask = torch.full((s, s), torch.finfo(w.dtype).min, dtype=w.dtype).triu(1)
            w = w + mask
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            out = torch.matmul(w, v)
        else:
            if torch.is_autocast_cpu_enabled():  # CUDA autocast casts SDPA's inputs (see the header)
                q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
            out = FlashEquivalent.apply(q, k, v, self.scaling)
        out = out.transpose(1, 2).contiguous().reshape(b, s, -1)
        return self.o(out)


class MLP(nn.Module):
    def __init__(self, hidden, ffn, dtype):
        super().__init__()
        self.gate = nn.Linear(hidden, ffn, bias=False, dtype=dtype)
        self.up = nn.Linear(hidden, ffn, bias=False, dtype=dtype)
        self.down = nn.Linear(ffn, hidden, bias=False, dtype=dtype)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class DecoderLayer(nn.Module):
    """HF LlamaDecoderLayer.forward: pre-norm attention and MLP, each with a residual add."""

    def __init__(self, hidden, heads, kv_heads, ffn, impl, dtype):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden).to(dtype)
        self.self_attn = Attention(hidden, heads, kv_heads, impl, dtype)
        self.post_attention_layernorm = RMSNorm(hidden).to(dtype)
        self.mlp = MLP(hidden, ffn, dtype)

    def forward(self, x, cos, sin):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


def rotary(head_dim, s, b, dtype, theta=500000.0):
    """HF LlamaRotaryEmbedding.forward: fp32 with autocast off, then cos/sin cast to the hidden states' dtype."""
    with torch.autocast("cpu", enabled=False):
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        pos = torch.arange(s, dtype=torch.float32)[None, :].expand(b, s)
        freqs = (inv_freq[None, :, None].expand(b, -1, 1) @ pos[:, None, :]).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def build(cfg):
    precision, attention, h, heads, kv, f, s, b, ckpt, method = cfg
    torch.manual_seed(0)
    lora = method != "full"
    # Parameter dtype of the layer (a LoRA base under autocast is bf16; full autocast keeps fp32).
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}.get(precision, torch.bfloat16 if lora else torch.float32)
    adapter_dtype = torch.float32 if precision in ("fp32", "autocast") else torch.bfloat16
    layer = DecoderLayer(h, heads, kv, f, attention, dtype)
    if lora:
        for p in layer.parameters():
            p.requires_grad_(False)
        mods = {"q": layer.self_attn, "k": layer.self_attn, "v": layer.self_attn, "o": layer.self_attn,
                "gate": layer.mlp, "up": layer.mlp, "down": layer.mlp}
        for name in LORA_TARGETS[method]:
            setattr(mods[name], name, LoRALinear(getattr(mods[name], name), LORA_RANK, LORA_ALPHA, adapter_dtype))
    x = torch.randn(b, s, h, dtype=dtype).requires_grad_(True)
    cos, sin = rotary(h // heads, s, b, dtype)
    return layer, x, cos, sin


def storage_key(t):
    st = t.storage()
    return st.data_ptr(), st.nbytes()


# Views autograd records between a parameter's autocast cast and the op that saves it.
VIEW_NODES = {"TBackward0", "TransposeBackward0", "ViewBackward0", "PermuteBackward0", "ExpandBackward0",
              "UnsqueezeBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0"}


def is_parameter_cast(t, params):
    """A 16-bit copy autocast made of a parameter: ToCopyBackward0 <- AccumulateGrad(parameter)."""
    if not t.requires_grad:
        return t.dim() <= 2  # a cast of a frozen parameter (every activation here requires grad)
    fn = t.grad_fn
    while fn is not None and fn.name() in VIEW_NODES:
        fn = fn.next_functions[0][0]
    if fn is None or fn.name() != "ToCopyBackward0":
        return False
    leaf = fn.next_functions[0][0]
    return leaf is not None and any(getattr(leaf, "variable", None) is p for p in params)


def savers(root):
    """storage -> names of the autograd nodes that save a tensor on it (built-in ops; custom
    Functions keep theirs out of reach and are not listed)."""
    out, stack, seen = {}, [root], set()
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        for attr in dir(fn):
            if attr.startswith("_saved_"):
                v = getattr(fn, attr, None)
                if isinstance(v, torch.Tensor):
                    out.setdefault(v.storage().data_ptr(), set()).add(fn.name())
        stack.extend(f for f, _ in fn.next_functions)
    return out


def measure(cfg, explain=False):
    precision, attention, h, heads, kv, f, s, b, ckpt, method = cfg
    layer, x, cos, sin = build(cfg)
    params = list(layer.parameters())
    param_ptrs = {p.storage().data_ptr() for p in params}
    shared = {cos.storage().data_ptr(), sin.storage().data_ptr()}
    saved = []

    def pack(t):
        saved.append(t)
        return t

    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "autocast")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        if ckpt == "full":
            out = checkpoint(layer, x, cos, sin, use_reentrant=True)
        else:
            out = layer(x, cos, sin)
    by_storage = {}
    for t in saved:
        ptr, nbytes = storage_key(t)
        # Parameters are not activations; 0-d tensors are Python scalars autograd wrapped (8 bytes).
        if ptr in param_ptrs or t.dim() == 0:
            continue
        by_storage.setdefault(ptr, (nbytes, []))[1].append(t)
    saved_by = savers(out.grad_fn)
    rows = []
    totals = {"layer": 0, "shared": 0, "weight": 0, "mean_input": 0}
    for ptr, (nbytes, ts) in by_storage.items():
        if ptr in shared:
            kind = "shared"
        elif all(is_parameter_cast(t, params) for t in ts):
            kind = "weight"
        elif saved_by.get(ptr) == {"MeanBackward1"}:
            # torch 1.13's mean saves its input (derivatives.yaml: mean_backward(grad, self.sizes(),
            # dim, self.numel(), keepdim), and self.numel() made codegen keep self); current PyTorch
            # keeps self.sym_numel() instead, a number. Counted apart: CUDA training runs torch 2.
            kind = "mean_input"
        else:
            kind = "layer"
        totals[kind] += nbytes
        t = max(ts, key=lambda u: u.dim())
        rows.append((kind, nbytes, tuple(t.shape), t.dtype, sorted(saved_by.get(ptr, {"(custom Function)"}))))
    # The layer must run backward (the stand-in's too): the graph is real, not just counted.
    out.float().sum().backward()
    if explain:
        for kind, nbytes, shape, dtype, names in sorted(rows, key=lambda v: (v[0], -v[1])):
            print(f"{kind:10s} {nbytes:10d} {str(dtype):15s} {str(shape):22s} {' '.join(names)}")
    return totals


def configs():
    for (h, heads, kv, f, s, b), precision, attention, ckpt, method in itertools.product(
            SHAPES, PRECISIONS, ATTENTIONS, CHECKPOINTING, METHODS):
        yield (precision, attention, h, heads, kv, f, s, b, ckpt, method)


HEADER = """\
# Bytes PyTorch autograd saves for backward in one Llama decoder layer (HF transformers' layer).
# Regenerate: python3 calibrate/reference/measure_saved_activations.py --out tests/data/saved_activations.csv
# (PyTorch {version}, CPU; the script's docstring says what each column counts and where CUDA differs).
# Tested by tests/unit/activations_test.cpp against ftplan's activation model.
"""
COLUMNS = ["precision", "attention", "hidden", "heads", "kv_heads", "ffn", "seq", "micro_batch", "checkpointing",
           "method", "lora_rank", "layer_bytes", "shared_bytes", "weight_copy_bytes", "mean_input_bytes"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="CSV to write (default: stdout)")
    ap.add_argument("--explain", help="one configuration, as a CSV row of the first ten columns: list its saved tensors")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.explain:
        v = args.explain.split(",")
        cfg = (v[0], v[1], *map(int, v[2:8]), v[8], v[9])
        print(measure(cfg, explain=True))
        return
    buf = io.StringIO()
    buf.write(HEADER.format(version=torch.__version__))
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for cfg in configs():
        t = measure(cfg)
        w.writerow([*cfg, LORA_RANK if cfg[-1] != "full" else 0, t["layer"], t["shared"], t["weight"], t["mean_input"]])
    if args.out:
        # Atomically: a temporary file in the same folder, flushed to disk, renamed over the table.
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(buf.getvalue())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, args.out)
    else:
        sys.stdout.write(buf.getvalue())


if __name__ == "__main__":
    main()
