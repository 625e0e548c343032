#!/usr/bin/env python3
"""Ground truth for ftplan's host cost of DeepSpeed ZeRO-3's module hooks: what the coordinator's
Python (pre/post forward hooks that fetch and release each submodule's parameters, the backward
hooks, the autograd Functions wrapped around module outputs) costs the host per module a pass runs.

    DS_ACCELERATOR=cpu PYTHONPATH=SHIM:DEEPSPEED python3 calibrate/reference/zero3_hooks.py

DeepSpeed is not a Debian package. The figures in zero3_hooks.md were made with DeepSpeed v0.13.2
(the version MLPerf Training v4.0's HF + DeepSpeed Llama-2-70B LoRA submissions install:
JuniperNetworks/.../docker/Dockerfile, `pip install deepspeed==0.13.2`), its source tree from the
git tag (git archive v0.13.2 deepspeed op_builder accelerator), on bookworm's python3-torch 1.13
with python3-pydantic (v1), python3-cpuinfo, python3-packaging and python3-tqdm, and three
stand-in modules in SHIM: `hjson` (json; not packaged, the config here is a dict),
`oneccl_bindings_for_pytorch` and `intel_extension_for_pytorch` (empty: DeepSpeed's CPU
accelerator only checks that they import; the process group is gloo).

What runs: two ranks (gloo, one process each) hold a Llama-style decoder stack at toy width
(hidden 64, 16 tokens: the compute is negligible), the modules laid out as transformers and PEFT
lay them out for the MLPerf LoRA run: per layer RMSNorm, attention with q/k/v/o as PEFT lora.Linear
(base_layer, lora_dropout{Dropout}, lora_A{Linear}, lora_B{Linear}), a rotary-embedding module, the
MLP's gate/up/down and its SiLU module, a second RMSNorm; each layer checkpointed with
torch.utils.checkpoint (reentrant, HF's default then). Each depth (2, 4, 8, 16 layers) runs the
same forward and backward three ways, each timed as the best of several repeats:
  plain: the bare model (PyTorch's own hook-free module calls);
  zero3: deepspeed.initialize with ZeRO stage 3 (the engine's forward and backward, no step).
The per-layer slope of (zero3 - plain) over depth, divided by the module calls a layer makes in a
step (forward + recompute + backward, counted by forward hooks on the plain model), is the host
time DeepSpeed adds per module call, free of the engine's fixed per-step cost. A GPU adds CUDA
event records/queries and stream waits per fetch that a CPU run does not pay, so it is a floor.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

H, FFN, TOKENS, R = 64, 176, 16, 8


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(H))

    def forward(self, x):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(v + 1e-5)).to(x.dtype)


class LoraLinear(nn.Module):  # peft.tuners.lora.layer.Linear's module layout and forward
    def __init__(self, fan_in, fan_out):
        super().__init__()
        self.base_layer = nn.Linear(fan_in, fan_out, bias=False)
        self.base_layer.weight.requires_grad_(False)
        self.lora_dropout = nn.ModuleDict({"default": nn.Dropout(0.1)})
        self.lora_A = nn.ModuleDict({"default": nn.Linear(fan_in, R, bias=False)})
        self.lora_B = nn.ModuleDict({"default": nn.Linear(R, fan_out, bias=False)})

    def forward(self, x):
        result = self.base_layer(x)
        return result + self.lora_B["default"](self.lora_A["default"](self.lora_dropout["default"](x))) * 2.0


class Rotary(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 16, 2).float() / 16)), persistent=False)

    def forward(self, x, pos):
        f = torch.outer(pos.float(), self.inv_freq)
        e = torch.cat((f, f), -1)
        return e.cos().to(x.dtype), e.sin().to(x.dtype)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (LoraLinear(H, H) for _ in range(4))
        self.rotary_emb = Rotary()
        self.gate_proj, self.up_proj = nn.Linear(H, FFN, bias=False), nn.Linear(H, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, H, bias=False)
        self.act_fn = nn.SiLU()
        for m in (self.gate_proj, self.up_proj, self.down_proj):
            m.weight.requires_grad_(False)

    def forward(self, x):
        h = self.input_layernorm(x)
        q, k, v = self.q_proj(h), self.k_proj(h), self.v_proj(h)
        cos, sin = self.rotary_emb(v, torch.arange(x.shape[1]))
        q = q.view(1, -1, 4, 16).transpose(1, 2)
        k = k.view(1, -1, 4, 16).transpose(1, 2)
        v = v.view(1, -1, 4, 16).transpose(1, 2)
        q = q * cos + torch.cat((-q[..., 8:], q[..., :8]), -1) * sin
        k = k * cos + torch.cat((-k[..., 8:], k[..., :8]), -1) * sin
        a = torch.softmax(q @ k.transpose(-1, -2) / 4.0, -1) @ v
        x = x + self.o_proj(a.transpose(1, 2).reshape(1, -1, H))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(self.act_fn(self.gate_proj(h)) * self.up_proj(h))


class Model(nn.Module):
    def __init__(self, layers, checkpointed):
        super().__init__()
        self.layers = nn.ModuleList(Layer() for _ in range(layers))
        self.checkpointed = checkpointed

    def forward(self, x):
        for layer in self.layers:
            # HF gradient_checkpointing_enable: torch.utils.checkpoint, use_reentrant=True then
            x = checkpoint(layer, x) if self.checkpointed else layer(x)
        return x.float().pow(2).mean()


def split_times(forward, backward, repeats):
    """Best forward and best backward time over the repeats, less the stand-in collectives' time."""
    best = [float("inf"), float("inf")]
    for _ in range(repeats):
        COLLECTIVE_S[0] = 0.0
        t = time.perf_counter()
        loss = forward()
        best[0] = min(best[0], time.perf_counter() - t - COLLECTIVE_S[0])
        COLLECTIVE_S[0] = 0.0
        t = time.perf_counter()
        backward(loss)
        best[1] = min(best[1], time.perf_counter() - t - COLLECTIVE_S[0])
    return best


def module_calls(model, x):
    n = [0]
    hooks = [m.register_forward_hook(lambda *a: n.__setitem__(0, n[0] + 1)) for m in model.modules()]
    model(x).backward()
    for h in hooks:
        h.remove()
    return n[0]


COLLECTIVE_S = [0.0]  # time inside the stand-in collectives, taken out of the ZeRO-3 figure


def gloo_collectives():
    """Gloo (torch 1.13) has no all_gather_into_tensor or reduce_scatter_tensor, which ZeRO-3
    calls; these stand-ins do the same through all_gather / all_reduce and count their time, so
    what is reported is DeepSpeed's host code without the transport (NCCL's launch is ftplan's
    collective_launch_s, charged separately)."""
    def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
        t = time.perf_counter()
        dist.all_gather(list(output_tensor.chunk(dist.get_world_size(group))), input_tensor, group=group)
        COLLECTIVE_S[0] += time.perf_counter() - t
        return _Done() if async_op else None

    def reduce_scatter_tensor(output, input, op=dist.ReduceOp.SUM, group=None, async_op=False):
        t = time.perf_counter()
        whole = input.clone()
        dist.all_reduce(whole, op=op, group=group)
        output.copy_(whole.chunk(dist.get_world_size(group))[dist.get_rank(group)])
        COLLECTIVE_S[0] += time.perf_counter() - t
        return _Done() if async_op else None

    dist.all_gather_into_tensor = all_gather_into_tensor
    dist._all_gather_base = all_gather_into_tensor
    dist.reduce_scatter_tensor = reduce_scatter_tensor
    dist._reduce_scatter_base = reduce_scatter_tensor


class _Done:
    def wait(self):
        pass

    def is_completed(self):
        return True


def run(rank, args, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29511", RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE="2", LOCAL_SIZE="2")  # LOCAL_SIZE: the CPU accelerator's device count
    torch.set_num_threads(1)
    gloo_collectives()
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    get_accelerator()._communication_backend_name = "gloo"  # not oneCCL: torch's gloo group
    deepspeed.init_distributed(dist_backend="gloo")
    results = []
    for layers in args.layers:
        torch.manual_seed(0)
        x = torch.randn(1, TOKENS, H, requires_grad=True)
        plain_model = Model(layers, args.checkpointed)
        calls = module_calls(plain_model, x)
        plain = split_times(lambda: plain_model(x), lambda loss: loss.backward(), args.repeats)
        model = Model(layers, args.checkpointed)
        trainable = [p for p in model.parameters() if p.requires_grad]
        config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                  "zero_optimization": {"stage": 3, "overlap_comm": True, "contiguous_gradients": True,
                                        "stage3_prefetch_bucket_size": int(0.9 * H * H),
                                        "stage3_param_persistence_threshold": 0},
                  "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}}}
        engine, *_ = deepspeed.initialize(model=model, model_parameters=trainable, config=config)
        for _ in range(3):  # the first steps record ZeRO-3's trace; prefetching starts after it
            engine.backward(engine(x))
            engine.step()
        zero3 = split_times(lambda: engine(x), engine.backward, args.repeats)
        results.append((layers, calls, plain, zero3))
        dist.barrier()
    if rank == 0:
        out.extend(results)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8, 16])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--no-checkpointing", dest="checkpointed", action="store_false",
                    help="no recompute: each module's forward hooks once a step (with it: twice)")
    args = ap.parse_args()
    with mp.Manager() as manager:
        out = manager.list()
        mp.spawn(run, args=(args, out), nprocs=2)
        rows = list(out)
    print("| layers | module calls a step | plain fwd / bwd ms | ZeRO-3 fwd / bwd ms | added fwd / bwd ms |")
    print("|---|---|---|---|---|")
    for layers, calls, plain, zero3 in rows:
        print(f"| {layers} | {calls} | {plain[0] * 1e3:.2f} / {plain[1] * 1e3:.2f} | {zero3[0] * 1e3:.2f} / "
              f"{zero3[1] * 1e3:.2f} | {(zero3[0] - plain[0]) * 1e3:.2f} / {(zero3[1] - plain[1]) * 1e3:.2f} |")
    # Least-squares slope of the added time and of the calls over depth.
    xs = [r[0] for r in rows]
    mx = statistics.mean(xs)

    def slope(ys):
        my = statistics.mean(ys)
        return sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / sum((a - mx) ** 2 for a in xs)

    modules = slope([r[1] for r in rows]) / (2 if args.checkpointed else 1)  # module calls a layer's forward makes
    fwd = slope([r[3][0] - r[2][0] for r in rows])
    bwd = slope([r[3][1] - r[2][1] for r in rows])
    print(f"\n{'checkpointed' if args.checkpointed else 'not checkpointed'}: a layer's forward calls {modules:.0f} "
          f"modules; per layer ZeRO-3 adds {fwd * 1e3:.3f} ms to forward, {bwd * 1e3:.3f} ms to backward"
          f"{' (its recompute included)' if args.checkpointed else ''}: {fwd / modules * 1e6:.1f} us and "
          f"{bwd / modules * 1e6:.1f} us per module")

if __name__ == "__main__":
    main()
