#include "schedule/builder.hpp"

#include "footprint/footprint.hpp"

namespace ftplan::schedule::detail {

StepIR Builder::build() {
  plan_geometry();
  persistent_state();
  for (int t : fb_tensors) last_compute = alloc(Stream::compute, t, {last_compute});
  if (gathered_for_step) gather_stage();
  for (const PipeAction& a : pipeline_order(p_.parallel.schedule, pp, stage, micro_batches, chunks)) {
    if (a.backward)
      backward(a.micro, a.chunk);
    else
      forward(a.micro, a.chunk);
  }
  // (Gathered for the step: freed by the post-backward's reshard, once its reduce-scatters are issued.)
  const Ids fb_end = gathered_for_step && last_reduce >= 0 ? Ids{last_compute, last_reduce} : Ids{last_compute};
  for (int t : fb_tensors) last_compute = release(Stream::compute, t, fb_end);

  const int last = optimizer_step();
  Op end;
  end.kind = OpKind::marker;
  end.name = "step end";
  end.deps = {last};
  add(std::move(end));

  // Totals.
  ir_.tokens_per_rank = tokens_ * micro_batches * plan::real_token_fraction(job_);
  FlopTotals totals;
  for (auto& op : ir_.ops) {
    if (op.element == Element::packed) op.element = element_of(op);
    totals += FlopTotals::of(op);
  }
  // Folded runs: the later layers' ops left out still count, and each op's fold count.
  totals += skipped_flops_;
  ir_.model_flops_per_rank = totals.model;
  ir_.hardware_flops_per_rank = totals.hardware;
  ir_.frozen_weight_grad_flops_per_rank = totals.frozen;
  if (!fold_runs_.empty()) {
    ir_.fold.assign(ir_.ops.size(), 1);
    for (const FoldRun& r : fold_runs_) {
      const auto chain_end = static_cast<std::size_t>(r.chain_end);
      std::fill(ir_.fold.begin() + static_cast<std::ptrdiff_t>(r.first),
                ir_.fold.begin() + static_cast<std::ptrdiff_t>(chain_end) + 1, r.layers);
      std::fill(ir_.fold.begin() + static_cast<std::ptrdiff_t>(chain_end) + 1,
                ir_.fold.begin() + static_cast<std::ptrdiff_t>(r.end), 0);
    }
  }
  return std::move(ir_);
}

void Builder::plan_geometry() {
  layers = inv_.layers;
  // Pipeline: this stage runs `chunks` model chunks (virtual stages chunk x pp + stage under
  // interleaved 1F1B, Narayanan et al. 2021 sec. 2.2.2), each an even share of the layers.
  // The layers come from the plan's stage (the inventory's); the schedule, the point-to-point
  // peers and tags from the stage's place in the pipeline simulated (PipelineView: the plan's own
  // unless the simulator runs a shortened pipeline).
  const int real_pp = std::max(1, p_.parallel.pp);
  pp = view_.stages > 0 ? view_.stages : real_pp;
  stage = view_.stages > 0 ? view_.position : inv_.stage;
  chunks = real_pp > 1 && p_.parallel.schedule == plan::PipelineSchedule::interleaved
               ? std::max(1, p_.parallel.virtual_stages)
               : 1;
  virtual_stages = pp * chunks;
  // The model layer of each of this stage's layers, chunk by chunk, and where each chunk starts
  // (chunks may differ by a layer: inventory::stage_layer_list).
  layer_of = inventory::stage_layer_list(m_, p_, inv_.stage, &chunk_begin);
  FTPLAN_ASSERT(static_cast<int>(layer_of.size()) == layers, "the inventory counts the stage's layers");
  // build_step bounds micro-batches x layers (too_large), so the count is an int.
  std::int64_t wanted = std::max<std::int64_t>(1, inv_.grad_accumulation);
  if (micro_override_ > 0) wanted = std::min<std::int64_t>(wanted, micro_override_);
  FTPLAN_ASSERT(wanted <= kMaxLayerPasses, "build_step checks the step's size first");
  micro_batches = static_cast<int>(wanted);
  ir_.micro_batches = micro_batches;
  // Room for every op up front (about 60 per layer and micro-batch with recompute, fetches and
  // collectives): growing the array would move each op several times.
  ir_.ops.reserve(static_cast<std::size_t>(micro_batches) * (inv_.layers + 2) * 64 + 256);
  ir_.tensors.reserve(static_cast<std::size_t>(micro_batches) * (inv_.layers + 2) * 8 + 64);
  ir_.stage = stage;
  shard = inv_.shard_degree;
}

void Builder::persistent_state() {
  // ---- persistent state and buffers: alive from the start.
  Op begin;
  begin.name = "step start";
  start = add(std::move(begin));
  sort_groups();
  unit_group = gathered_group();
  param_tier = p_.offload.params;
  stream_params = unit_group != nullptr;  // a per-layer GPU copy of the parameters is made
  unit_bytes = unit_group ? unit_group->bytes : 0;
  units_in_flight = unit_group ? std::max(1, unit_group->count) : 1;
  forward_backward_tensors();
  gradient_state();
  sharding_state();
  last_compute = start;
  pipeline_state();
}

// The inventory's groups by lifetime: persistent ones allocated at the start, the others kept
// for the passes that create them.
void Builder::sort_groups() {
  for (const auto& g : inv_.groups) {
    switch (g.lifetime) {
      case Lifetime::persistent:
        if (g.paged)
          allocate_paged(g);
        else
          allocate_persistent(g);
        break;
      case Lifetime::gradients: grads_group = &g; break;
      case Lifetime::saved:
        if (g.category != Category::activations) break;  // autocast copies: accounted in the footprint only
        if (g.tier == Tier::gpu)
          saved_group = &g;
        else
          offloaded_group = &g;
        break;
      case Lifetime::layer: break;  // gathered/streamed units and dequantized weights: per layer below
      case Lifetime::backward_layer: backward_groups.push_back(&g); break;
      case Lifetime::loss: loss_groups.push_back(&g); break;
      case Lifetime::loss_peak: loss_peak_groups.push_back(&g); break;
      case Lifetime::optimizer: optimizer_groups.push_back(&g); break;
      case Lifetime::forward_backward: fb_groups.push_back(&g); break;
    }
  }
}

void Builder::allocate_persistent(const TensorGroup& g) {
  const int t = tensor(g.name, g.category, g.tier, g.total(), -1, g.element);
  const int a = alloc(Stream::compute, t, {start});
  if (g.category == Category::weights && std::string_view(g.name) == inventory::kTrainableWeights)
    trainable_weights_tensor = t;
  if (g.category == Category::weights && weights_tensor < 0) {
    weights_tensor = t;
    weights_alloc = a;
  }
  if (g.category == Category::optimizer) state_allocs.push_back(a);
  if (std::string_view(g.name) == inventory::kOptimizerSwapBuffers) optimizer_swap = t;
}

// Unified memory: resident on the GPU as far as it has room, the rest in host memory (the
// footprint's rule, footprint::paged_placement, so both engines place it alike).
void Builder::allocate_paged(const TensorGroup& g) {
  const footprint::PagedPlacement placed = footprint::paged_placement(inv_, p_);
  const double out_share = placed.state_bytes > 0 ? placed.host_bytes / placed.state_bytes : 0.0;
  paged_out_bytes = g.total() * out_share;
  paged_resident_tensor = tensor(g.name, g.category, Tier::gpu, g.total() - paged_out_bytes, -1, g.element);
  state_allocs.push_back(alloc(Stream::compute, paged_resident_tensor, {start}));
  if (paged_out_bytes > 0) {
    paged_out_tensor = tensor("optimizer state (paged out)", g.category, Tier::cpu, paged_out_bytes, -1, g.element);
    state_allocs.push_back(alloc(Stream::compute, paged_out_tensor, {start}));
  }
}

// Tensors alive from the first forward to the last backward; FSDP2's stage gathered for the step.
void Builder::forward_backward_tensors() {
  for (const auto* g : fb_groups) {
    fb_tensors.push_back(tensor(g->name, g->category, g->tier, g->total(), -1, g->element));
    if (std::string_view(g->name) == inventory::kStageGatheredParams) {
      stage_params_tensor = fb_tensors.back();
      // The stage's layers share what is not the root's (embeddings; final norm and head).
      layer_gather_bytes = (g->total() - inv_.params.root * inv_.recipe.gather_B) / std::max(1, layers);
    }
    if (std::string_view(g->name) == inventory::kStageUnshardedGrads) unsharded_grads_tensor = fb_tensors.back();
  }
  gathered_for_step = inv_.gathered_for_step && stage_params_tensor >= 0;
}

// Gradients: one share per layer, created by that layer's first backward, in their tier; and how
// they are reduced.
void Builder::gradient_state() {
  grad_tensor.assign(layers, -1);
  // Each layer's share holds that layer's gradients; a full fine-tune's embedding gradient is
  // made last, by the backward of the first layer (its lookup's scatter-add takes that layer's
  // input gradient), and the final norm's and head's first, before the last layer's backward: so
  // where the shares leave the GPU layer by layer (ZeRO-Offload's and ZeRO-Infinity's copies to
  // the host), the first layer's share holds the embedding's and the last layer's share the rest
  // of the root's: the order each share's gradient exists in, which the executor's real training
  // reads (equal shares put part of the embedding's gradient in middle layers' shares, copied to
  // the host before it exists). The layers split the rest equally (the stack's layers are one
  // size; an MoE stack's alternating layers are averaged, as the copies' sizes always were). On
  // the GPU the shares are one buffer's parts, written in place until the optimizer reads them:
  // equal parts, so that every layer allocates alike (the simulator folds identical layers).
  if (grads_group) {
    const inventory::RankParams& rp = inv_.params;
    const double root = full_ && grads_group->tier != Tier::gpu ? rp.root : 0.0;
    const double embedding =
        std::min(root, inv_.stage == 0 ? static_cast<double>(model::embedding_params(m_)) / tp_ : 0.0);
    const double per_param = rp.trainable > 0 ? grads_group->total() / rp.trainable : 0.0;
    const double block = (grads_group->total() - root * per_param) / std::max(1, layers);
    for (int l = 0; l < layers; ++l) {
      const double bytes =
          block + (l == 0 ? embedding * per_param : 0.0) + (l == layers - 1 ? (root - embedding) * per_param : 0.0);
      grad_tensor[l] = tensor(name("gradients L{}", layer_of[l]), Category::gradients, grads_group->tier, bytes,
                              layer_of[l], grads_group->element);
    }
  }

  grad_reduce_B = inv_.recipe.reduce_B;  // plan::precision_recipe says why
  layer_grad_bytes = inv_.params.trainable_largest_layer * grad_reduce_B;
  reduce_each_micro = shard > 1 && inv_.zero >= 2 && !gathered_for_step;
  // Gradients are reduced over the data-parallel ranks with the context-parallel ones
  // (plan::sharding_in_effect): each of those computes part of the same parameters' gradients.
  grad_group = plan::gradient_group_size(p_);
  any_dp = grad_group > 1;
}

// The memory copies each sharding framework makes around its collectives, per unit (read from
// their source; YaFSDP's preallocated buffers exist to avoid them: its README, "designed to
// reduce communications and memory operations overhead").
// - FSDP2 all-gathers into one flat buffer and then copies it out into each parameter's own
//   tensor on the compute stream, once the gather is waited for (torch
//   distributed/fsdp/_fully_shard/_fsdp_collectives.py, foreach_all_gather_copy_out:
//   split_with_sizes_copy); its reduce-scatter input is built by chunk_cat of the gradients,
//   widened to the reduce dtype, also on the compute stream (foreach_reduce). No pre-divide:
//   bf16/fp32 reduce with NCCL's AVG (_get_gradient_divide_factors).
// - FSDP1 all-gathers straight into the unit's flat parameter, but autograd builds the flat
//   gradient from the original parameters' views (the backward of the split that made them: a
//   cat), and _reduce_grad pre-divides the whole unsharded gradient in place on the
//   post-backward stream before the reduce-scatter (torch distributed/fsdp/_runtime_utils.py:
//   _div_if_needed(padded_unsharded_grad, _gradient_predivide_factor), a factor > 1 for any
//   world size >= 2).
// - DeepSpeed ZeRO-3 gathers into a flat buffer the parameters view; its reduce-scatter
//   interleaves the gradients into one flat buffer with torch.cat and pre-divides it by the
//   world size (deepspeed/runtime/comm/coalesced_collectives.py reduce_scatter_coalesced), on
//   its reduce-and-partition stream.
// - YaFSDP gathers into and reduces from preallocated buffers the parameters and gradients
//   view, without pre-divide for bf16/fp32 (ya_fsdp/_collectives.py).
// Left out: the casts of the local shard (1/shard of a unit) and the post-reduce cast.
void Builder::sharding_state() {
  sharding = inv_.profile.sharding;
  sharded_units = stream_params && shard > 1;
  grad_params = inv_.params.trainable_largest_layer;
  // Parameter fetches (fetch, step_passes.cpp) bring a layer's parameters to a GPU buffer: NVMe ->
  // pinned host -> GPU, then the all-gather of the other ranks' shards; at most `units_in_flight`
  // buffers are outstanding. DeepSpeed ZeRO-3 before its coalesced prefetch: a gather per
  // parameter tensor, each after a device synchronize (plan::Zero3Fetch::per_parameter).
  per_parameter = shard > 1 && inv_.profile.sharding == plan::Sharding::deepspeed &&
                  p_.job.zero3_fetch == plan::Zero3Fetch::per_parameter;
  // Its coalesced successor fetches and releases at every module's hooks (kZero3HookForward_s).
  module_hooks = stream_params && inv_.profile.sharding == plan::Sharding::deepspeed && !per_parameter;
}

void Builder::pipeline_state() {
  // Pipeline point-to-point: the activation of a micro-batch goes to the next virtual stage
  // after its forward, its gradient to the previous one after its backward. Megatron's
  // scatter/gather optimization sends 1/tp of the tensor from each tensor-parallel rank
  // (Narayanan et al. 2021 sec. 4.1); with sequence parallelism each rank holds only 1/tp anyway.
  // The receiver waits on the compute stream for the matching send (same tag).
  p2p_bytes = tokens_ * static_cast<double>(m_.hidden) * act_B_ / tp_;

  // Per micro-batch state kept from its forward to its backward.
  saved_of.assign(micro_batches, std::vector<int>(layers, -1));
  host_saved_of = saved_of;
  stash_done_of = saved_of;
  backwards.assign(layers, 0);
}

namespace {

// About 12 FLOPs per parameter for an Adam step (two moment updates, bias corrections, the
// update, weight decay) in about as many kernels (torch/optim/adamw.py _multi_tensor_adamw: a
// foreach kernel for each of those); estimates.
constexpr double kAdamFlopsPerParam = 12.0;
constexpr int kAdamStepKernels = 12;
// The NVMe swap reads a parameter's fp32 master, m and v (12 bytes) and writes them back with the
// updated 16-bit parameter (ZeRO-Infinity, Rajbhandari et al. 2021; DeepSpeed
// runtime/swap_tensor/optimizer_utils.py swaps the fp32 state; the gradient stays in host memory).
constexpr double kSwappedStateBytesPerParam = 12.0;

}  // namespace

int Builder::optimizer_op(double params, const std::string& op_name, Ids deps) {
  const bool cpu_step = p_.offload.optimizer_step == Tier::cpu;
  Op opt;
  opt.kind = OpKind::optimizer;
  opt.pass = Pass::optimizer;
  opt.name = op_name;
  opt.bytes = params * kAdamBytesPerParam;
  opt.flops = params * kAdamFlopsPerParam;
  opt.kernels = cpu_step ? 0 : kAdamStepKernels;
  opt.stream = cpu_step ? Stream::cpu : Stream::compute;
  opt.deps = std::move(deps);
  return add(std::move(opt));
}

// What the optimizer step waits for: the step's compute, reductions and gradient offloads, or,
// with the delayed update, only its state's existence.
Ids Builder::optimizer_deps() const {
  const plan::Offload& off = p_.offload;
  Ids opt_deps = {last_compute};
  if (last_reduce >= 0) opt_deps.push_back(last_reduce);
  if (last_grad_offload >= 0) opt_deps.push_back(last_grad_offload);
  // ZeRO-Offload's one-step delayed parameter update (Ren et al. 2021, sec. 5.2): the CPU step
  // applies the previous step's gradients while the GPU runs this step's forward and backward,
  // so it waits for nothing of this step but its state's existence (the executor, exec/, found
  // it starting before the allocation of the state it updates). In steady state each step is the
  // longer of the two paths.
  if (off.delayed_update && off.optimizer_step == Tier::cpu) {
    opt_deps = {start};
    for (int a : state_allocs) opt_deps.push_back(a);
  }
  return opt_deps;
}

// ZeRO-Infinity swaps optimizer state through pinned memory one sub-group at a time
// (inventory::kSwapSubGroupElements): read master, m, v; CPU Adam; write them back and the
// updated 16-bit parameters. When the next chunk's read may start (DeepSpeed stage3.py step(),
// swap_tensor/{partitioned,pipelined}_optimizer_swapper.py; Offload::pipeline_read/write): by
// default after this chunk's write has landed (swap_out_optimizer_state waits on the aio handle,
// and the next swap_in comes after it); with pipeline_write once this chunk's write is issued,
// after its update (and the write before it); with pipeline_read once the chunk before it was
// swapped out (its read is issued in this chunk's swap_in, under this chunk's update), and with
// both once the update before this one is done (and the write before that one).
int Builder::swapped_optimizer_step(const Ids& opt_deps, double trainable_shard) {
  const plan::Offload& off = p_.offload;
  const double chunk_params = inventory::swap_sub_group_params(off, trainable_shard);
  const int swaps = static_cast<int>(std::ceil(trainable_shard / std::max(1.0, chunk_params)));
  int last = -1;
  int state = -1;
  for (const auto& t : ir_.tensors)
    if (t.category == Category::optimizer && t.tier == Tier::nvme) {
      state = static_cast<int>(&t - &ir_.tensors[0]);
      break;
    }
  std::vector<int> updates, writes;
  for (int c = 0; c < swaps; ++c) {
    const double params = std::min(chunk_params, trainable_shard - c * chunk_params);
    Ids deps = opt_deps;
    // The ops this chunk's read waits for (above): chunk c - 1's, or c - 2's under pipeline_read.
    const int before = c - (off.pipeline_read ? 2 : 1);
    // Under pipeline_write, that chunk's swap-out returns once the write before it has landed
    // (PipelinedOptimizerSwapper::swap_out_optimizer_state completes the pending async one first).
    if (before >= 0)
      deps.push_back(off.pipeline_write ? updates[static_cast<std::size_t>(before)]
                                        : writes[static_cast<std::size_t>(before)]);
    if (off.pipeline_write && before >= 1) deps.push_back(writes[static_cast<std::size_t>(before - 1)]);
    // Through the pinned swap buffers (the inventory's): read into them, updated there, written
    // back from them. (They were unnamed; the executor, exec/, needs to know where the chunk is.)
    const Ids swap = optimizer_swap >= 0 ? Ids{optimizer_swap} : Ids{};
    const int rd = copy(Stream::nvme_read, Tier::nvme, Tier::cpu, params * kSwappedStateBytesPerParam,
                        name("nvme read optimizer chunk {}", c), -1, 0, deps, state >= 0 ? Ids{state} : Ids{}, swap);
    Ids udeps = {rd};
    if (!updates.empty()) udeps.push_back(updates.back());
    const int up = optimizer_op(params, name("optimizer step chunk {}", c), udeps);
    ir_.ops[up].reads = swap;
    ir_.ops[up].writes = swap;
    last =
        copy(Stream::nvme_write, Tier::cpu, Tier::nvme, params * (kSwappedStateBytesPerParam + inv_.recipe.compute_B),
             name("nvme write optimizer chunk {}", c), -1, 0, {up}, swap, state >= 0 ? Ids{state} : Ids{});
    updates.push_back(up);
    writes.push_back(last);
  }
  return last;
}

int Builder::optimizer_step() {
  // ---- optimizer step over this rank's shard
  const plan::Offload& off = p_.offload;
  Ids opt_deps = optimizer_deps();
  std::vector<int> opt_tensors;
  for (const auto* g : optimizer_groups) {
    opt_tensors.push_back(tensor(g->name, g->category, g->tier, g->total(), -1, g->element));
    opt_deps.push_back(alloc(Stream::compute, opt_tensors.back(), {last_compute}));
  }
  const double trainable_shard = inv_.zero >= 1 ? inv_.params.trainable / shard : inv_.params.trainable;
  int last;
  if (off.optimizer == Tier::nvme) {
    last = swapped_optimizer_step(opt_deps, trainable_shard);
  } else {
    Ids deps = opt_deps;
    if (paged_out_bytes > 0) {
      // bitsandbytes prefetches each tensor's paged state to the GPU before its update
      // (Optimizer8bit.prefetch_state -> cudaMemPrefetchAsync) and the driver evicts as many
      // pages to host memory to make room: the paged-out bytes cross PCIe once each way per step.
      deps.push_back(copy(Stream::h2d, Tier::cpu, Tier::gpu, paged_out_bytes, "h2d paged optimizer state", -1, 0,
                          opt_deps, {paged_out_tensor}, {paged_resident_tensor}));
      deps.push_back(copy(Stream::d2h, Tier::gpu, Tier::cpu, paged_out_bytes, "d2h paged optimizer state (evicted)", -1,
                          0, opt_deps, {paged_resident_tensor}, {paged_out_tensor}));
    }
    last = optimizer_op(trainable_shard, "optimizer step", deps);
  }
  for (int t : opt_tensors) last = release(Stream::compute, t, {last});
  return after_optimizer_step(last, trainable_shard);
}

// After the update: updated parameters back to the GPU or gathered, gradients freed.
int Builder::after_optimizer_step(int last, double trainable_shard) {
  // ZeRO-Offload: the updated 16-bit parameters return to the GPU, from the host memory the
  // optimizer state is in.
  const Tier updated = plan::host_memory(p_.offload.optimizer) ? p_.offload.optimizer : Tier::cpu;
  if (p_.offload.optimizer_step == Tier::cpu && param_tier == Tier::gpu)
    last = copy(Stream::h2d, updated, Tier::gpu, trainable_shard * inv_.recipe.compute_B, "h2d updated parameters", -1,
                0, {last}, {}, {trainable_weights_tensor >= 0 ? trainable_weights_tensor : weights_tensor});
  // ZeRO-1/2 and Megatron's distributed optimizer all-gather the updated 16-bit parameters: the
  // optimizer's, so the trainable ones only (DeepSpeed stage_1_and_2.py: bit16_groups keep the
  // param groups' requires_grad parameters, and all_gather_dp_groups gathers those; HF's
  // deepspeed_init passes only trainable parameters). A LoRA step gathers its adapters, not the
  // frozen base. (FSDP2 in pipeline stages gathers them at the next step's start: gather_stage.)
  if (any_dp && !stream_params && !gathered_for_step && inv_.zero >= 1 && shard > 1)
    last = collective(Stream::comm, Collective::all_gather, Group::dp, shard,
                      inv_.params.trainable * inv_.recipe.compute_B, "all-gather updated parameters", -1, 0, {last});
  // Gradients are freed after the step (zero_grad(set_to_none=True)), and after their copy to the
  // host has finished (which the optimizer step waits for anyway, but the delayed one does not:
  // the executor, exec/, found the free racing the copy).
  for (int l = 0; l < layers; ++l)
    if (grad_tensor[l] >= 0)
      last =
          release(Stream::compute, grad_tensor[l], last_grad_offload >= 0 ? Ids{last, last_grad_offload} : Ids{last});
  return last;
}

}  // namespace ftplan::schedule::detail
