#!/usr/bin/env python3
"""Ground truth for ftplan's memory and step-time model: run a few real fine-tuning steps for a
matrix of plans on one GPU and write, per plan, the peak memory three ways and the step time.

    python3 calibrate/reference/measure_memory.py --out reference.csv          # default matrix (20 plans), < 5 min on an H100
    python3 calibrate/reference/measure_memory.py --quick --out quick.csv      # a handful of plans, < 1 min

Needs PyTorch with CUDA, transformers and peft. No downloads: models are built from config dicts
(Llama-3.2-1B and -3B shapes, from their published config.json) with random weights. QLoRA-style
plans need bitsandbytes (4-bit NF4 base weights, as Dettmers et al. 2023); without it they are
written as skipped. CPU offload uses FSDP's CPUOffload on a one-process group (no extra packages).

Columns (memory in bytes, as DESIGN.md's result contract names them):
  gpu_allocated_peak_bytes   torch.cuda.max_memory_allocated: live tensors
  gpu_reserved_peak_bytes    torch.cuda.max_memory_reserved: plus the caching allocator's slack
  gpu_peak_bytes             the device view (NVML if pynvml is installed, else torch.cuda.mem_get_info),
                             sampled every 5 ms during the steps, less what other processes held before
                             this one started: reserved + CUDA context + library workspaces
  step_time_s                median over the timed steps (after warm-up), synchronised
"""
import argparse
import contextlib
import csv
import gc
import os
import statistics
import sys
import tempfile
import threading
import time

try:
    import torch
except ImportError:  # pragma: no cover - the script is for GPU machines
    sys.exit("measure_memory.py needs PyTorch (with CUDA)")

try:
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig
except ImportError:
    sys.exit("measure_memory.py needs transformers")

try:
    import peft
    from peft import LoraConfig, get_peft_model
except ImportError:
    peft = None

# Published config.json figures (meta-llama/Llama-3.2-1B and -3B); ftplan's zoo holds the same.
MODELS = {
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True, rope_theta=500000.0,
                         max_position_embeddings=131072, rms_norm_eps=1e-5),
    "llama-3.2-3b": dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28, num_attention_heads=24,
                         num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True, rope_theta=500000.0,
                         max_position_embeddings=131072, rms_norm_eps=1e-5),
}

# How each method trains (what ftplan calls the recipe):
#   full-amp      fp32 weights, grads and AdamW state; bf16 autocast (PyTorch AMP, HF Trainer bf16=True)
#   full-bf16     bf16 weights and grads, AdamW state in bf16 (pure bf16 training)
#   full-offload  as full-bf16 under FSDP with CPUOffload(offload_params=True): params, grads and the
#                 optimizer step on the CPU, layers streamed to the GPU (ZeRO-3-offload-like)
#   lora          bf16 frozen base, LoRA r=16 on all linear layers (fp32 adapters), AdamW
#   qlora         4-bit NF4 frozen base (bitsandbytes), LoRA r=16, bf16 compute
METHODS = ["full-amp", "full-bf16", "full-offload", "lora", "qlora"]
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class DevicePeak:
    """Samples the device's used memory on a thread; NVML when available, else cudaMemGetInfo."""

    def __init__(self, device_index):
        self.device_index = device_index
        self.handle = None
        self.source = "torch.cuda.mem_get_info (CUDA context not counted)"
        try:
            import pynvml

            pynvml.nvmlInit()
            bus_id = None
            with contextlib.suppress(Exception):
                bus_id = torch.cuda.get_device_properties(device_index).pci_bus_id  # newer torch
            # CUDA numbers the visible devices; NVML numbers all of them (CUDA_VISIBLE_DEVICES maps one to the other).
            visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip().isdigit()]
            nvml_index = int(visible[device_index]) if device_index < len(visible) else device_index
            self.handle = (pynvml.nvmlDeviceGetHandleByPciBusId(bus_id) if bus_id
                           else pynvml.nvmlDeviceGetHandleByIndex(nvml_index))
            self.pynvml = pynvml
            self.source = "nvml"
        except Exception:
            self.handle = None
        self.peak = 0
        self._stop = threading.Event()
        self._thread = None

    def used(self):
        if self.handle is not None:
            return self.pynvml.nvmlDeviceGetMemoryInfo(self.handle).used
        free, total = torch.cuda.mem_get_info(self.device_index)
        return total - free

    def __enter__(self):
        self.peak = self.used()
        self._stop.clear()

        def loop():
            while not self._stop.is_set():
                self.peak = max(self.peak, self.used())
                time.sleep(0.005)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.used())


def cleanup():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def build_model(name, method, gradient_checkpointing, workdir):
    cfg = LlamaConfig(**MODELS[name])
    cfg.use_cache = False
    cfg._attn_implementation = "sdpa"
    if method == "qlora":
        import bitsandbytes  # noqa: F401  (ImportError -> skipped by the caller)
        from transformers import BitsAndBytesConfig

        # Quantization happens when loading, so the random model is saved locally once and loaded back.
        path = os.path.join(workdir, name)
        if not os.path.exists(os.path.join(path, "config.json")):
            AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16).save_pretrained(path)
        bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                 bnb_4bit_compute_dtype=torch.bfloat16)
        model = AutoModelForCausalLM.from_pretrained(path, quantization_config=bnb, torch_dtype=torch.bfloat16,
                                                     device_map={"": 0})
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=gradient_checkpointing)
    else:
        dtype = torch.float32 if method == "full-amp" else torch.bfloat16
        device = "cpu" if method == "full-offload" else "cuda"
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype)
    if gradient_checkpointing and method != "qlora":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if method in ("lora", "qlora"):
        if peft is None:
            raise ImportError("peft")
        if method == "lora":
            for p in model.parameters():
                p.requires_grad_(False)
            if gradient_checkpointing:
                model.enable_input_require_grads()
        lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=LORA_TARGETS, task_type="CAUSAL_LM")
        model = get_peft_model(model, lora)
    if method == "full-offload":
        import torch.distributed as dist
        from torch.distributed.fsdp import CPUOffload, FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer
        import functools

        if not dist.is_initialized():
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29533")
            dist.init_process_group("nccl", rank=0, world_size=1)
        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})
        model = FSDP(model, auto_wrap_policy=policy, cpu_offload=CPUOffload(offload_params=True),
                     device_id=torch.cuda.current_device(), use_orig_params=True)
    return model


def run_plan(name, method, ckpt, seq, micro_batch, steps, warmup, baseline_used, workdir):
    row = dict(model=name, method=method, gradient_checkpointing=ckpt, seq_len=seq, micro_batch=micro_batch,
               params="", trainable_params="", step_time_s="", tokens_per_s="", gpu_allocated_peak_bytes="",
               gpu_reserved_peak_bytes="", gpu_peak_bytes="", device_peak_source="", status="ok")
    cleanup()
    model = opt = None
    try:
        model = build_model(name, method, ckpt, workdir)
        params = list(model.parameters())
        row["params"] = sum(p.numel() for p in params)
        trainable = [p for p in params if p.requires_grad]
        row["trainable_params"] = sum(p.numel() for p in trainable)
        # fused AdamW on the GPU; the offloaded plan steps on the CPU (foreach).
        fused = method != "full-offload"
        opt = torch.optim.AdamW(trainable, lr=1e-5, fused=fused, foreach=None if fused else True)
        vocab = MODELS[name]["vocab_size"]
        gen = torch.Generator(device="cuda").manual_seed(0)
        ids = torch.randint(0, vocab, (micro_batch, seq), device="cuda", generator=gen)
        autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if method in ("full-amp", "qlora")
                    else contextlib.nullcontext())
        torch.cuda.reset_peak_memory_stats()
        times = []
        with DevicePeak(torch.cuda.current_device()) as dev:
            for i in range(warmup + steps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                with autocast:
                    loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                torch.cuda.synchronize()
                if i >= warmup:
                    times.append(time.perf_counter() - t0)
        step = statistics.median(times)
        row.update(step_time_s=f"{step:.6f}", tokens_per_s=f"{micro_batch * seq / step:.1f}",
                   gpu_allocated_peak_bytes=torch.cuda.max_memory_allocated(),
                   gpu_reserved_peak_bytes=torch.cuda.max_memory_reserved(),
                   gpu_peak_bytes=dev.peak - baseline_used, device_peak_source=dev.source)
    except torch.cuda.OutOfMemoryError:
        row["status"] = "oom"
        row["gpu_allocated_peak_bytes"] = torch.cuda.max_memory_allocated()
        row["gpu_reserved_peak_bytes"] = torch.cuda.max_memory_reserved()
    except ImportError as e:
        row["status"] = f"skipped: needs {e.name or e}"
    except Exception as e:  # a plan that cannot run here is recorded, and the matrix goes on
        row["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    finally:
        del model, opt
        cleanup()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="reference.csv")
    ap.add_argument("--quick", action="store_true", help="1B model, two methods, one sequence length")
    ap.add_argument("--models", default=None, help="comma-separated, from: " + ", ".join(MODELS))
    ap.add_argument("--methods", default=None, help="comma-separated, from: " + ", ".join(METHODS))
    ap.add_argument("--seq", default=None, help="sequence lengths, comma-separated (default 512,2048)")
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per plan (after 2 warm-up steps)")
    ap.add_argument("--budget-s", type=float, default=285, help="start no new plan after this many seconds")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("measure_memory.py: no CUDA device found")
    start = time.time()
    # The default matrix (1B: 5 methods x 2 sequence lengths x checkpointing on/off = 20 plans) fits in
    # 5 minutes on an H100; add the 3B model with --models llama-3.2-1b,llama-3.2-3b when time allows.
    models = args.models.split(",") if args.models else ["llama-3.2-1b"]
    methods = args.methods.split(",") if args.methods else (["full-bf16", "lora"] if args.quick else METHODS)
    seqs = [int(s) for s in args.seq.split(",")] if args.seq else ([1024] if args.quick else [512, 2048])
    torch.backends.cuda.matmul.allow_tf32 = True
    # What other processes hold, read before this process creates its CUDA context, so that the context
    # counts toward gpu_peak_bytes as nvidia-smi shows it. Without pynvml the only reading is through
    # CUDA itself, after the context exists: then gpu_peak_bytes leaves the context out (source says so).
    baseline_used = None
    with contextlib.suppress(Exception):
        import pynvml

        pynvml.nvmlInit()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        index = int(visible) if visible.isdigit() else 0
        baseline_used = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).used
    torch.cuda.init()
    if baseline_used is None:
        baseline_used = DevicePeak(torch.cuda.current_device()).used()
    gpu = torch.cuda.get_device_name()
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}, peft {getattr(peft, '__version__', 'none')}"
    print(f"{gpu}; {versions}", file=sys.stderr)
    plans = [(m, meth, ck, s) for m in models for meth in methods for s in seqs for ck in (False, True)]
    fields = ["model", "method", "gradient_checkpointing", "seq_len", "micro_batch", "params", "trainable_params",
              "step_time_s", "tokens_per_s", "gpu_allocated_peak_bytes", "gpu_reserved_peak_bytes", "gpu_peak_bytes",
              "device_peak_source", "status", "gpu", "versions"]
    with tempfile.TemporaryDirectory(prefix="ftplan-reference-") as workdir, open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for i, (m, meth, ck, s) in enumerate(plans):
            if time.time() - start > args.budget_s:
                row = dict(model=m, method=meth, gradient_checkpointing=ck, seq_len=s, micro_batch=args.micro_batch,
                           status="skipped: time budget")
            else:
                row = run_plan(m, meth, ck, s, args.micro_batch, args.steps, 2, baseline_used, workdir)
            row.update(gpu=gpu, versions=versions)
            w.writerow(row)
            f.flush()
            peak = row.get("gpu_peak_bytes")
            print(f"[{i + 1}/{len(plans)}] {time.time() - start:6.1f} s  {m} {meth} ckpt={ck} seq={s}: {row['status']}"
                  + (f", step {row['step_time_s']} s, device peak {peak / 2**30:.2f} GiB" if isinstance(peak, int) else ""),
                  file=sys.stderr)
    print(f"wrote {args.out} in {time.time() - start:.0f} s", file=sys.stderr)
    with contextlib.suppress(Exception):
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
