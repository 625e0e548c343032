// The training state of one rank (build_state.hpp): weights, optimizer state, gradients, the
// buffers of the framework that shards them, working copies of the weights, the optimizer step's
// temporaries, the offload engines' pinned buffers and the fixed overheads.
#include <algorithm>
#include <cmath>

#include "inventory/build_state.hpp"
#include "plan/checks.hpp"

namespace ftplan::inventory::detail {

using plan::Checkpointing;
using plan::Method;
using plan::Sharding;
using plan::Tier;

namespace {

// bitsandbytes 8-bit Adam keeps m and v in 8 bits with one fp32 absmax per block of 2048 elements
// (Dettmers et al. 2021, "8-bit Optimizers via Block-wise Quantization"; bitsandbytes
// functional.py optimizer_update_8bit_blockwise, blocksize 2048).
constexpr double kAdam8bitBlock = 2048;

// DeepSpeed's bucket sizes as HF Trainer's "auto" sets them (transformers integrations/deepspeed.py,
// HfTrainerDeepSpeedConfig.trainer_config_finalize), in hidden_size^2 elements:
// reduce_bucket_size = h^2 (ZeRO-1/2 keeps two reduce buckets under overlap_comm and one
// all-gather bucket: 3), stage3_prefetch_bucket_size = 0.9 h^2.
constexpr double kZero12BucketsPerHidden2 = 3.0;
constexpr double kZero3PrefetchPerHidden2 = 0.9;
// ZeRO-Offload reduces gradients into two buckets of reduce_bucket_size (h^2) before copying them
// to the host (Ren et al. 2021, sec. 4; overlap_comm's double buffer).
constexpr double kOffloadGradBucketsPerHidden2 = 2.0;

// DeepSpeed offload_param (nvme): buffer_count x buffer_size pinned buffers, defaults 5 (Offload's)
// and 1e8 elements (deepspeed/runtime/zero/offload_config.py, DeepSpeedZeroOffloadParamConfig).
constexpr double kParamSwapBufferElements = 1e8;

// Optimizer state bytes per trainable parameter, by optimizer (`state_B`: bytes of one state element).
double optimizer_state_bytes(const Build& b, double state_B) {
  switch (b.job.optimizer.kind) {
    case plan::OptimizerKind::adamw:
    case plan::OptimizerKind::adam: return 2 * state_B;                             // m and v (Kingma & Ba 2015)
    case plan::OptimizerKind::adamw_8bit: return 2 * (1.0 + 4.0 / kAdam8bitBlock);  // m and v + absmax per block
    case plan::OptimizerKind::sgd: return 0;
    case plan::OptimizerKind::sgd_momentum:
    case plan::OptimizerKind::lion: return state_B;  // one momentum buffer (Chen et al. 2023 for Lion)
    case plan::OptimizerKind::adafactor: {
      // Factored second moment: a row and a column vector per matrix instead of the matrix
      // (Shazeer & Stern 2018); for a d x 4d-ish transformer matrix ~ (d + 4d) / (4 d^2) per element.
      const double width = std::max(1.0, b.h);
      return b.inv.recipe.state_B * 2.0 / width;
    }
  }
  return 0;
}

// DeepSpeed ZeRO: its buckets (1/2) or the gathered modules and reduce buffer (3), and the fp32
// gradient partition of the optimizer step.
void add_deepspeed_buffers(Build& b) {
  const plan::PrecisionRecipe& rec = b.inv.recipe;
  const RankParams& rp = b.inv.params;
  const double h = b.h;
  const Element compute = b.inv.compute_element();
  if (b.zero <= 2) {
    // ZeRO-1/2: two reduce buckets (overlap_comm) + one all-gather bucket, hidden^2 elements each
    // (HF Trainer "auto": reduce_bucket_size = hidden_size^2).
    b.add("ZeRO reduce/all-gather buckets", Category::buffers, Tier::gpu,
          kZero12BucketsPerHidden2 * h * h * rec.compute_B, 1, Lifetime::persistent, compute);
  } else {
    // ZeRO-3: modules fetched on use plus the prefetch bucket (0.9 hidden^2 elements, "auto").
    // A QLoRA base is gathered (and, offloaded, copied in) as its quantized storage, as under
    // FSDP: bitsandbytes packs the 4-bit weights into bnb_4bit_quant_storage (bf16) tensors that
    // ZeRO-3 partitions like any other (PEFT docs, accelerate/deepspeed.md "QLoRA with ZeRO-3").
    b.add("ZeRO-3 gathered parameters", Category::temporaries, Tier::gpu,
          (rp.largest_layer + kZero3PrefetchPerHidden2 * h * h / b.tp) * b.base_B(rec.compute_B), 1, Lifetime::layer,
          b.base_element(compute), false, true);
    b.add("ZeRO-3 gradient reduce buffer", Category::temporaries, Tier::gpu, rp.trainable_largest_layer * rec.compute_B,
          1, Lifetime::backward_layer, compute);
  }
  // DeepSpeed upcasts the gradient partition to fp32 for the optimizer step (stage_1_and_2.py, stage3.py).
  if (b.off.optimizer_step == Tier::gpu && rec.grad_B < 4)
    b.add("fp32 gradient partition", Category::temporaries, Tier::gpu, b.trainable_shard * 4.0, 1, Lifetime::optimizer,
          Element::fp32);
}

// FSDP2 inside a pipeline stage, as torchtitan runs it:
// - torchtitan's reshard_after_forward policy "default" is `not pp_enabled`: "For PP, by
//   default do not reshard after forward to avoid per-microbatch all-gathers"
//   (torchtitan/distributed/fsdp.py, get_fsdp_reshard_after_forward_policy; the
//   embeddings and [norm, output] units likewise);
// - torch.distributed.pipelining runs every backward with set_reshard_after_backward(False)
//   and set_requires_gradient_sync(False), and only after the stage's last backward calls
//   post_backward on each FSDP group: reshard, then reduce-scatter (torch/distributed/
//   pipelining/stage.py, _PipelineStageBase.backward_maybe_with_nosync and _post_backward;
//   the REDUCE_GRAD action of the multi-stage schedules, schedules.py _add_reduce_grad).
// So the stage's parameters are gathered from the first forward to the end of the step's
// backward (in the gather type: the compute type, or the quantized storage under QLoRA),
// and the unsharded gradients accumulate across micro-batches in the reduce dtype
// (torch/distributed/fsdp/_fully_shard/_fsdp_param.py, to_accumulated_grad_if_needed:
// unsharded_grad.to(reduce_dtype); accumulate_unsharded_grad_if_needed: +=), fp32 under
// torchtitan's mixed_precision_reduce. With 1F1B they coexist with the stage's in-flight
// activations (the steady state's forwards follow backwards); under GPipe they are
// counted over the forwards too (conservative: there every forward precedes them).
void add_fsdp_stage_gathered(Build& b) {
  const plan::PrecisionRecipe& rec = b.inv.recipe;
  const RankParams& rp = b.inv.params;
  const double quantized = b.base_B(rec.gather_B);
  b.add(kStageGatheredParams, Category::temporaries, Tier::gpu,
        (rp.total - rp.frozen_quantized) * rec.gather_B + rp.frozen_quantized * quantized, 1,
        Lifetime::forward_backward, b.base_element(b.elem(rec.gather_B)));
  b.add(kStageUnshardedGrads, Category::gradients, Tier::gpu, rp.trainable * rec.reduce_B, 1,
        Lifetime::forward_backward, b.elem(rec.reduce_B));
}

// FSDP1/FSDP2: the gathered units (or stage, or all parameters under SHARD_GRAD_OP) and the
// unsharded gradients of one unit before its reduce-scatter.
void add_fsdp_buffers(Build& b) {
  const plan::PrecisionRecipe& rec = b.inv.recipe;
  const RankParams& rp = b.inv.params;
  const plan::FrameworkProfile& prof = b.inv.profile;
  if (b.inv.gathered_for_step) {
    add_fsdp_stage_gathered(b);
  } else if (b.zero == 3) {
    // Gathered 16-bit copies of the units in flight (FSDP unshard; limit_all_gathers allows two).
    // (QLoRA under FSDP gathers the quantized storage: bitsandbytes quant_storage.)
    // (In fp32 under an fp32 param_dtype: plan::PrecisionRecipe::gather_B.)
    const Element gathered = b.elem(rec.gather_B);
    const double unit_bytes = rp.largest_layer * b.base_B(rec.gather_B);
    b.add("FSDP gathered units", Category::temporaries, Tier::gpu, unit_bytes, prof.gathered_units, Lifetime::layer,
          b.base_element(gathered), false, true);
    if (prof.root_stays_gathered)
      b.add("FSDP root unit (embeddings, head)", Category::temporaries, Tier::gpu, rp.root * rec.gather_B, 1,
            Lifetime::forward_backward, gathered);
    else if (b.stage == b.pp - 1 && b.m.has_lm_head())
      b.add("FSDP gathered head", Category::temporaries, Tier::gpu,
            static_cast<double>(b.m.vocab) * b.h / b.tp * rec.gather_B, 1, Lifetime::loss, gathered);
  } else if (b.zero == 2) {
    // SHARD_GRAD_OP: parameters stay gathered from forward through backward.
    b.add("FSDP gathered parameters", Category::temporaries, Tier::gpu, rp.total * rec.gather_B, 1,
          Lifetime::forward_backward, b.elem(rec.gather_B));
  }
  // Unsharded gradients of one unit before reduce-scatter, in the compute and reduce dtypes.
  if (b.zero >= 2)
    b.add("FSDP unit gradients before reduce-scatter", Category::temporaries, Tier::gpu,
          rp.trainable_largest_layer * (rec.gather_B + rec.reduce_B), 1, Lifetime::backward_layer, Element::packed);
}

}  // namespace

void add_weights(Build& b) {
  const plan::PrecisionRecipe& rec = b.inv.recipe;
  const RankParams& rp = b.inv.params;
  // Frozen base (LoRA/QLoRA) is loaded in the 16-bit compute dtype; QLoRA quantizes its linear weights.
  const double frozen_B = rec.compute_B;
  const double frozen_bytes =
      (rp.frozen - rp.frozen_quantized) * frozen_B + rp.frozen_quantized * quantized_bytes_per_param(b.job.quant);
  const double expert_frozen_bytes = b.expert_frozen * b.base_B(frozen_B);
  b.add("frozen base weights", Category::weights, b.off.params,
        b.shard_parts(frozen_bytes - expert_frozen_bytes, expert_frozen_bytes, 3), 1, Lifetime::persistent,
        b.base_element(b.inv.compute_element()));
  b.add(kTrainableWeights, Category::weights, b.off.params,
        b.shard_parts((rp.trainable - b.expert_trainable) * rec.weight_B, b.expert_trainable * rec.weight_B, 3), 1,
        Lifetime::persistent, b.elem(rec.weight_B));
}

void add_optimizer_state(Build& b) {
  const plan::PrecisionRecipe& rec = b.inv.recipe;
  const RankParams& rp = b.inv.params;
  const plan::Job& job = b.job;
  b.trainable_shard = b.shard_parts(rp.trainable - b.expert_trainable, b.expert_trainable, 1);
  // bitsandbytes' 32-bit optimizers (the paged AdamW, Adam and Lion) keep fp32 state whatever the
  // parameters' type (Optimizer2State/Optimizer1State.init_state: optim_bits 32 -> torch.float32),
  // where torch.optim's follow the parameters (zeros_like): 4 B even under pure bf16.
  const double state_B = job.optimizer.paged ? 4.0 : rec.state_B;
  b.states = optimizer_state_bytes(b, state_B);
  const Tier opt_tier = b.off.optimizer;
  const Element state_element =
      job.optimizer.kind == plan::OptimizerKind::adamw_8bit ? Element::packed : b.elem(state_B);
  // A paged optimizer's state of large tensors lives in CUDA unified memory (bitsandbytes
  // functional.get_paged: cudaMallocManaged), the rest in ordinary device memory.
  const double paged_share = rp.trainable > 0 ? std::clamp(b.paged_trainable / rp.trainable, 0.0, 1.0) : 0.0;
  b.add("optimizer state", Category::optimizer, opt_tier, b.trainable_shard * b.states * (1 - paged_share), 1,
        Lifetime::persistent, state_element);
  if (paged_share > 0 && b.states > 0) {
    b.inv.groups.push_back(TensorGroup{"optimizer state (paged)", Category::optimizer, opt_tier,
                                       b.trainable_shard * b.states * paged_share, 1, Lifetime::persistent, false,
                                       false, state_element, true});
  }
  b.add("fp32 master weights", Category::optimizer, opt_tier, b.trainable_shard * rec.master_B, 1, Lifetime::persistent,
        Element::fp32);
}

void add_gradients(Build& b) {
  const plan::PrecisionRecipe& rec = b.inv.recipe;
  const RankParams& rp = b.inv.params;
  const plan::Job& job = b.job;
  const plan::Offload& off = b.off;
  const double grad_elems = b.shard_parts(rp.trainable - b.expert_trainable, b.expert_trainable, 2);
  if (off.gradients == Tier::gpu) {
    const bool in_backward = job.optimizer.in_backward && b.inv.grad_accumulation == 1;
    if (in_backward) {
      // Optimizer-in-backward frees each gradient right after its step: one layer's at a time (torchtune).
      b.add("gradients (one layer, optimizer in backward)", Category::gradients, Tier::gpu,
            rp.trainable_largest_layer * rec.grad_B, 1, Lifetime::backward_layer, b.elem(rec.grad_B));
    } else {
      // FSDP2 inside a pipeline stage: the sharded gradients are the reduce-scatters' outputs,
      // made after the stage's last backward (the unsharded ones accumulate until then,
      // add_fsdp_stage_gathered): they live from there through the optimizer step.
      b.add("gradients", Category::gradients, Tier::gpu, grad_elems * rec.grad_B, 1,
            job.gradients_persist     ? Lifetime::persistent
            : b.inv.gathered_for_step ? Lifetime::optimizer
                                      : Lifetime::gradients,
            b.elem(rec.grad_B));
    }
  } else {
    // ZeRO-Offload: gradients are reduced into buckets and copied to fp32 host buffers (Ren et al. 2021, sec. 4).
    b.add("gradients (host fp32)", Category::gradients, off.gradients, grad_elems * 4.0, 1, Lifetime::gradients,
          Element::fp32);
    b.add("gradient buckets", Category::buffers, Tier::gpu, kOffloadGradBucketsPerHidden2 * b.h * b.h * rec.compute_B,
          1, Lifetime::persistent, b.inv.compute_element());
  }
  // Beside the optimizer state it updates (host DRAM, or CXL memory: the step's traffic, host_path).
  if (off.optimizer_step == Tier::cpu && off.gradients == Tier::gpu)
    b.add("gradients (host fp32 copy for CPU step)", Category::gradients,
          plan::host_memory(off.optimizer) ? off.optimizer : Tier::cpu, b.trainable_shard * 4.0, 1, Lifetime::gradients,
          Element::fp32);
}

// The data-parallel machinery (over the data-parallel ranks with the context-parallel ones,
// plan::sharding_in_effect), as each sharding framework builds it.
void add_sharding_buffers(Build& b) {
  const plan::PrecisionRecipe& rec = b.inv.recipe;
  const RankParams& rp = b.inv.params;
  const plan::FrameworkProfile& prof = b.inv.profile;
  const int grad_group = plan::gradient_group_size(b.plan);
  if (grad_group <= 1 && b.zero != 3) return;
  const Element compute = b.inv.compute_element();
  switch (prof.sharding) {
    case Sharding::none:
      // torch DDP Reducer: flat bucket copies of every gradient unless gradient_as_bucket_view.
      if (prof.ddp_bucket_copy && grad_group > 1)
        b.add("DDP gradient buckets", Category::buffers, Tier::gpu, rp.trainable * rec.grad_B, 1, Lifetime::persistent,
              b.elem(rec.grad_B));
      break;
    case Sharding::deepspeed: add_deepspeed_buffers(b); break;
    case Sharding::fsdp1:
    case Sharding::fsdp2: add_fsdp_buffers(b); break;
    case Sharding::yafsdp:
      // YaFSDP preallocates two parameter and two gradient buffers of one layer, reused by every layer
      // (yandex/YaFSDP README, "buffers").
      // Each layer is all-gathered into one of the two parameter buffers (the next layer's into
      // the other while this one computes), as FSDP gathers units: streamed per layer.
      b.add("YaFSDP parameter buffers", Category::buffers, Tier::gpu, rp.largest_layer * rec.compute_B, 2,
            Lifetime::layer, compute, false, true);
      b.add("YaFSDP gradient buffers", Category::buffers, Tier::gpu, 2.0 * rp.trainable_largest_layer * rec.compute_B,
            1, Lifetime::persistent, compute);
      break;
    case Sharding::megatron:
      break;  // the contiguous grad buffer is the gradients; the distributed optimizer reuses it for gathers
  }
}

// GPU copies of the weights made while layers run: streamed-in parameters, autocast's 16-bit
// casts, QLoRA's dequantized weight.
void add_working_copies(Build& b) {
  const plan::PrecisionRecipe& rec = b.inv.recipe;
  const RankParams& rp = b.inv.params;
  const plan::Job& job = b.job;
  Inventory& inv = b.inv;
  const Element compute = inv.compute_element();
  // Parameters kept off the GPU are streamed in layer by layer: the layer in use plus the
  // prefetched ones sit in GPU working buffers (ZeRO-Infinity's parameter buffers, aiDAPTIV's
  // layer swap), unless sharded gathers already provide them.
  if (b.off.params != Tier::gpu &&
      std::none_of(inv.groups.begin(), inv.groups.end(), [](const TensorGroup& g) { return g.per_unit; })) {
    b.add("streamed parameter buffers", Category::buffers, Tier::gpu, rp.largest_layer * b.base_B(rec.compute_B),
          1 + std::max(1, b.off.prefetch_depth), Lifetime::layer, b.base_element(compute), false, true);
  }
  // The head's fetch (streams_root_params), from before the head's forward to after its backward;
  // tied, the head is the embedding matrix. (The embedding's own fetch, around its lookup before
  // the first layer, is below this peak.)
  if (streams_root_params(b.plan, inv) && b.stage == b.pp - 1 && b.m.has_lm_head()) {
    const double head = static_cast<double>(model::head_params(b.m)) +
                        (b.m.tied_embeddings ? static_cast<double>(b.m.vocab) * b.m.hidden : 0.0);
    b.add(kStreamedHead, Category::temporaries, Tier::gpu,
          (head / b.tp + (b.m.final_norm ? b.norm_params : 0.0)) * rec.compute_B, 1, Lifetime::loss, compute);
  }
  // torch.autocast keeps bf16 casts of the fp32 weights from forward to backward: the matmuls save
  // them, and autocast's cast cache holds the casts of leaf weights until the autocast region
  // ends (torch/csrc/autograd autocast_mode.cpp cached_cast: leaf, not a view, requires grad).
  // Under full checkpointing the checkpointed forward saves nothing, and FSDP1's parameters are
  // views into its flat parameter, which the cache skips: no copies outlive a layer.
  const bool fsdp_views = inv.profile.sharding == Sharding::fsdp1;
  if (autocast_casts_weights(rec, job) && !(fsdp_views && job.checkpointing == Checkpointing::full))
    b.add("autocast 16-bit weight copies", Category::temporaries, Tier::gpu,
          rp.total * rec.compute_B / std::max(1, inv.layers), inv.layers, Lifetime::saved, compute, true);
  // QLoRA dequantizes one weight at a time (inventory::dequantization says how, per library).
  if (rp.frozen_quantized > 0) {
    const Dequantization dq = dequantization(job.quant, rec.compute_B);
    b.add("dequantized weight", Category::temporaries, Tier::gpu, rp.largest_linear * dq.transient_bytes_per_param, 1,
          Lifetime::layer, dq.transient_bytes_per_param == rec.compute_B ? compute : Element::packed);
    // A 16-bit weight autograd saves: a checkpointed layer's from its recompute through its
    // backward, one layer at a time; every other layer's from its forward to its backward.
    if (dq.saved_bytes_per_param > 0) {
      const int layers = std::max(1, inv.layers);
      const int checkpointed =
          job.checkpointing == Checkpointing::full ? layers / std::max(1, job.checkpoint_every) : 0;
      const double per_layer = rp.frozen_quantized / layers * dq.saved_bytes_per_param;
      b.add("dequantized weights saved for backward", Category::temporaries, Tier::gpu, per_layer,
            layers - checkpointed, Lifetime::saved, Element::fp16, true);
      if (checkpointed > 0)
        b.add("recomputed dequantized weights", Category::temporaries, Tier::gpu, per_layer, 1,
              Lifetime::backward_layer, Element::fp16);
    }
  }
}

void add_optimizer_temporaries(Build& b) {
  const plan::PrecisionRecipe& rec = b.inv.recipe;
  const RankParams& rp = b.inv.params;
  const plan::Job& job = b.job;
  // PyTorch's foreach AdamW materialises one full-size temporary list (torch/optim/adamw.py,
  // _multi_tensor_adamw: exp_avg_sq_sqrt = torch._foreach_sqrt(...)); a per-parameter loop needs
  // one parameter's worth; fused kernels none.
  // bitsandbytes' 8-bit optimizers update tensor by tensor with one fused kernel that reads and
  // writes the block-quantized states in place (bitsandbytes/optim/optimizer.py,
  // Optimizer8bit.step -> update_step -> F.optimizer_update_8bit_blockwise): no step temporary,
  // whatever the framework's default for torch optimizers.
  // Its paged optimizers (32-bit ones too) run the same per-tensor update kernels.
  const plan::OptimizerImpl impl =
      job.optimizer.kind == plan::OptimizerKind::adamw_8bit || job.optimizer.paged ? plan::OptimizerImpl::fused
      : job.optimizer.implementation == plan::OptimizerImpl::framework_default     ? b.inv.profile.optimizer_impl
                                                                                   : job.optimizer.implementation;
  if (b.off.optimizer_step != Tier::gpu || b.states <= 0) return;
  if (impl == plan::OptimizerImpl::foreach)
    b.add("optimizer step temporaries", Category::temporaries, Tier::gpu, b.trainable_shard * rec.state_B, 1,
          Lifetime::optimizer, b.elem(rec.state_B));
  else if (impl == plan::OptimizerImpl::per_parameter)
    b.add("optimizer step temporaries", Category::temporaries, Tier::gpu,
          std::max(rp.largest_linear, job.method == Method::full ? rp.root : 0.0) * rec.state_B, 1, Lifetime::optimizer,
          b.elem(rec.state_B));
}

// The offload engines' buffers (pinned host memory).
void add_offload_buffers(Build& b) {
  const plan::Offload& off = b.off;
  if (off.params == Tier::nvme) {
    // DeepSpeed offload_param (nvme): buffer_count x buffer_size pinned buffers.
    const double buffer = off.buffer_bytes > 0 ? off.buffer_bytes : kParamSwapBufferElements * b.inv.recipe.compute_B;
    b.add("parameter swap buffers (pinned)", Category::buffers, Tier::cpu, off.buffer_count * buffer, 1,
          Lifetime::persistent, Element::packed);
  }
  if (off.optimizer == Tier::nvme) {
    // DeepSpeed offload_optimizer (nvme): buffer_count pinned fp32 buffers of the largest
    // sub-group, all allocated at start (optimizer_utils.py OptimizerSwapper: SwapBufferManager(
    // largest_numel, swap_config.buffer_count, fp32)); the sub-groups in flight at once
    // (plan::optimizer_swaps_in_flight; schedule::Builder::swapped_optimizer_step) take 4 each.
    const double params = swap_sub_group_params(off, b.trainable_shard);
    const double sub_groups = std::ceil(b.trainable_shard / std::max(1.0, params));
    const double in_flight = std::min(sub_groups, static_cast<double>(plan::optimizer_swaps_in_flight(off)));
    b.inv.optimizer_swap_buffers = static_cast<int>(in_flight) * plan::kOptimizerSwapBuffersPerSubGroup;
    b.add(kOptimizerSwapBuffers, Category::buffers, Tier::cpu,
          off.optimizer_buffer_count * params * (kSwapBytesPerElement / plan::kOptimizerSwapBuffersPerSubGroup), 1,
          Lifetime::persistent, Element::packed);
  }
}

void add_overheads(Build& b) {
  const plan::FrameworkProfile& prof = b.inv.profile;
  b.add("CUDA context", Category::overhead, Tier::gpu, prof.cuda_context_bytes, 1, Lifetime::persistent,
        Element::packed);
  b.add("cuBLAS and attention workspaces", Category::overhead, Tier::gpu, prof.workspace_bytes, 1, Lifetime::persistent,
        Element::packed);
  if (b.world > 1)
    b.add("NCCL buffers", Category::overhead, Tier::gpu, prof.nccl_buffer_bytes, 1, Lifetime::persistent,
          Element::packed);
}

}  // namespace ftplan::inventory::detail
