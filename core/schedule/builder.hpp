// The step IR's builder (not part of schedule's interface: step_ir.hpp is). Builder turns one
// rank's inventory into the ops of one step; its files: layer_ops.cpp (one layer's compute and
// its tensor/context/expert-parallel communication), step_passes.cpp (parameter streaming,
// forward and backward passes, activation offload, pipeline sends), builder.cpp (the step:
// persistent state, the schedule's order, the optimizer step); step_ir.cpp holds the public
// functions (pipeline_order, build_step, dry_run).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/error.hpp"
#include "model/model.hpp"
#include "plan/checks.hpp"
#include "schedule/step_ir.hpp"

namespace ftplan::schedule {

using inventory::Category;
using inventory::Element;
using inventory::Lifetime;
using inventory::TensorGroup;
using plan::Checkpointing;
using plan::Method;
using plan::Tier;

namespace detail {

// Host cost of one parameter all-gather in DeepSpeed ZeRO-3 before PR #1188: issue #1069 measured
// pre-launch 130 us + launch 250 us per parameter on one 8-GPU node; its 8 list-API launches
// (~6 us each, the simulator's default dispatch cost) are counted per rank instead.
constexpr double kDeepSpeedPerParameterFetch_s = 380e-6 - 8 * 6e-6;

// Host time DeepSpeed ZeRO-3's coalesced fetch (v0.13.2, the MLPerf v4.0 HF + DeepSpeed runs')
// adds per module call, on the compute stream's host thread: the forward hooks (fetch: the
// trace and prefetch bookkeeping, the coalesced all-gather's launch and wait; release:
// __params_to_release; the autograd Functions wrapped around each output) and, in backward, the
// backward hooks. Measured over a Llama layer with PEFT LoRA on two gloo ranks by
// calibrate/reference/zero3_hooks.py (zero3_hooks.md): 122-144 us forward, 74 us backward per
// module. A floor on a GPU host, which also records and queries CUDA events in them.
constexpr double kZero3HookForward_s = 130e-6;
constexpr double kZero3HookBackward_s = 75e-6;

// Shapes and per-token work of one layer on one rank: model::layer_shape after TP.
struct LayerWork : model::LayerShape {
  double attended = 0;  // tokens each query attends
  bool operator==(const LayerWork&) const = default;
};

// An op with its identity filled in; callers add what is particular to it.
inline Op make_op(OpKind kind, Stream stream, Pass pass, std::string name, int layer, int micro) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.pass = pass;
  op.name = std::move(name);
  op.layer = layer;
  op.micro = micro;
  return op;
}

// The step being built: the stage's place in the pipeline, the inventory's groups sorted by
// lifetime, the tensors and ops every pass refers to, and the running ends of the streams.
// Set by plan_geometry and persistent_state, then read and advanced by the passes.
struct StepState {
  // Pipeline geometry (plan_geometry).
  int layers = 0;         // this stage's layers
  int pp = 1, stage = 0;  // the pipeline simulated and this stage's place in it (PipelineView)
  int chunks = 1;         // model chunks per stage (interleaved 1F1B)
  int virtual_stages = 1;
  std::vector<int> chunk_begin;  // where each chunk starts in layer_of
  std::vector<int> layer_of;     // the model layer of each of this stage's layers
  int micro_batches = 1;
  int shard = 1;  // ranks the state is sharded over
  // Persistent tensors and what the passes need of the inventory (persistent_state).
  int start = -1;  // the step's first op
  int weights_tensor = -1;
  // The trainable parameters' tensor (LoRA: the adapters, beside the frozen base, weights_tensor),
  // which the update's copy back to the GPU writes.
  int trainable_weights_tensor = -1;
  Ids state_allocs;         // the optimizer state's allocations (the step reads that state)
  int weights_alloc = -1;   // the weights' allocation (parameter fetches read them)
  int optimizer_swap = -1;  // the pinned buffers the NVMe optimizer swap goes through
  // A paged optimizer's state beyond what the GPU holds (footprint::paged_placement): its host
  // part, and the resident part the pages come into.
  double paged_out_bytes = 0;
  int paged_out_tensor = -1, paged_resident_tensor = -1;
  const TensorGroup* saved_group = nullptr;      // saved activations on the GPU
  const TensorGroup* offloaded_group = nullptr;  // saved activations kept in host memory or on flash
  const TensorGroup* grads_group = nullptr;
  std::vector<const TensorGroup*> backward_groups, loss_groups, loss_peak_groups, optimizer_groups, fb_groups;
  const TensorGroup* unit_group = nullptr;  // the per-layer GPU copy of streamed parameters
  Tier param_tier = Tier::gpu;
  bool stream_params = false;  // a per-layer GPU copy of the parameters is made
  double unit_bytes = 0;
  int units_in_flight = 1;
  std::vector<int> fb_tensors;   // alive from the first forward to the last backward
  std::vector<int> grad_tensor;  // by layer: its gradients' share
  double grad_reduce_B = 2;      // bytes per gradient element reduced (plan::precision_recipe)
  double layer_grad_bytes = 0;
  bool reduce_each_micro = false;
  int grad_group = 1;  // plan::gradient_group_size
  bool any_dp = false;
  plan::Sharding sharding = plan::Sharding::none;
  bool sharded_units = false;
  double grad_params = 0;
  bool per_parameter = false;  // DeepSpeed ZeRO-3's gather per parameter tensor
  bool module_hooks = false;   // DeepSpeed ZeRO-3's coalesced fetch: hooks on every module call
  double p2p_bytes = 0;        // a pipeline send
  // FSDP2 inside a pipeline stage (Inventory::gathered_for_step): the stage's parameters, gathered
  // once per step at its start, and each layer's all-gather and FSDP2 copy-out.
  bool gathered_for_step = false;
  int stage_params_tensor = -1, unsharded_grads_tensor = -1;
  double layer_gather_bytes = 0;
  int root_gather = -1;
  std::vector<int> gather_of, copied_out_of;
  // Running state of the passes.
  // Bounded buffer pools, each as the tensors that took a buffer of it in issue order (take_slot):
  // parameter fetch buffers (units_in_flight) and the GPU slots of offloaded layers' saved
  // activations (activation_slots).
  std::vector<int> fetch_buffers;
  std::vector<int> activation_stash;
  int last_compute = -1;
  int last_reduce = -1;
  int last_grad_offload = -1;
  // Per micro-batch, per layer, kept from its forward to its backward.
  std::vector<std::vector<int>> saved_of, host_saved_of, stash_done_of;
  std::vector<int> backwards;  // backward passes issued so far, per layer
};

class Builder : private StepState {
 public:
  Builder(const model::ModelSpec& m, const plan::Plan& p, const inventory::Inventory& inv, int micro_batches,
          bool names, PipelineView view)
      : m_(m), p_(p), inv_(inv), job_(p.job), micro_override_(micro_batches), names_(names), view_(view) {
    tp_ = std::max(1, p.parallel.tp);
    cp_ = std::max(1, p.parallel.cp);
    dp_ = plan::data_parallel_degree(p);
    tokens_ = inv.tokens_per_micro_batch;
    act_B_ = inv.recipe.activation_B;
    w_B_ = inv.recipe.compute_B;
    full_ = job_.method == Method::full;
    fused_ = inv.profile.fused_pointwise || job_.compile;
    load_ = p.parallel.capacity_factor > 0 ? p.parallel.capacity_factor : 1.0;
  }

  StepIR build();

 private:
  int add(Op&& op) {
    op.kernels = std::max(op.kernels, op.kind == OpKind::gemm || op.kind == OpKind::attention ||
                                              op.kind == OpKind::elementwise || op.kind == OpKind::loss
                                          ? 1
                                          : 0);
    ir_.ops.push_back(std::move(op));
    return static_cast<int>(ir_.ops.size()) - 1;
  }
  // An op's element type when its builder did not set one: GEMMs and attention compute in the
  // compute type (FP8 linears in fp8), memory-bound kernels in the activation type, the optimizer
  // in fp32; collectives and copies move the type of the tensor they write (or read). Set for
  // every op at the end of build(), when all reads and writes are known.
  Element element_of(const Op& op) const {
    switch (op.kind) {
      case OpKind::gemm: return op.fp8 ? Element::fp8 : inv_.compute_element();
      case OpKind::attention: return inv_.compute_element();
      case OpKind::elementwise:
      case OpKind::loss: return inv_.activation_element();
      case OpKind::optimizer: return Element::fp32;
      case OpKind::collective:
      case OpKind::copy:
        if (!op.writes.empty()) return ir_.tensors[op.writes.front()].element;
        if (!op.reads.empty()) return ir_.tensors[op.reads.front()].element;
        return op.group == Group::dp ? inv_.compute_element() : inv_.activation_element();
      default: return Element::packed;
    }
  }
  int tensor(std::string name, Category c, Tier tier, double bytes, int layer, Element e = Element::packed) {
    const double count = std::round(bytes / inventory::element_bytes(e));
    ir_.tensors.push_back(Tensor{std::move(name), c, tier, bytes, layer, e, static_cast<std::int64_t>(count)});
    return static_cast<int>(ir_.tensors.size()) - 1;
  }
  // Allocation and free ops are a third of a short pipeline's ops: made in place in the IR, not
  // made and then moved into it (an Op is ~270 bytes).
  int alloc(Stream s, int t, Ids deps = {}) {
    memory_op(OpKind::alloc, s, t, std::move(deps)).writes = {t};
    return static_cast<int>(ir_.ops.size()) - 1;
  }
  int release(Stream s, int t, Ids deps = {}) {
    memory_op(OpKind::free, s, t, std::move(deps));
    const int id = static_cast<int>(ir_.ops.size()) - 1;
    if (static_cast<std::size_t>(t) >= freed_by_.size()) freed_by_.resize(static_cast<std::size_t>(t) + 1, -1);
    freed_by_[static_cast<std::size_t>(t)] = id;
    return id;
  }
  Op& memory_op(OpKind kind, Stream s, int t, Ids&& deps) {
    Op& op = ir_.ops.emplace_back();
    op.kind = kind;
    op.stream = s;
    op.pass = Pass::other;
    if (names_) op.name = (kind == OpKind::alloc ? "alloc " : "free ") + ir_.tensors[t].name;
    op.layer = ir_.tensors[t].layer;
    op.tensor = t;
    op.deps = std::move(deps);
    return op;
  }
  // The op that freed tensor t, or -1.
  int freed_by(int t) const {
    return t >= 0 && static_cast<std::size_t>(t) < freed_by_.size() ? freed_by_[static_cast<std::size_t>(t)] : -1;
  }
  // A bounded pool of `slots` buffers, filled in issue order as an engine's ring of swap buffers
  // is: tensor t takes the buffer that the tensor `slots` fills before it freed, so t's allocation
  // waits for that free (added to `deps`). The bound is a plain dependency edge, which both the
  // simulator and the executor (exec/) honour; the engine's own buffer pools are not needed.
  void take_slot(std::vector<int>& pool, int slots, int t, Ids& deps) const {
    const std::size_t q = pool.size(), n = static_cast<std::size_t>(std::max(1, slots));
    pool.push_back(t);
    if (q < n) return;
    const int freed = freed_by(pool[q - n]);
    FTPLAN_ASSERT(freed >= 0, "a bounded buffer is taken before the tensor that held it was freed");
    if (std::find(deps.begin(), deps.end(), freed) == deps.end()) deps.push_back(freed);
  }
  // GPU slots for the saved activations of offloaded layers: the inventory's resident count (the
  // layer being produced or consumed plus the ones in flight), so the GPU never holds more of them
  // than the footprint counts. Forward: a layer's saved tensors take a slot, freed when their
  // device-to-host copy has finished, so the forward waits for the copies when the slots are full
  // (torchtune OffloadActivations: the main stream waits on the copy event of the tensor
  // max_fwd_stash_size packs back; Unsloth: the main stream waits for the copy stream after each
  // layer). Backward: a layer's copy back takes a slot, freed after its backward, so at most
  // slots - 1 layers are brought back ahead of the one computing.
  int activation_slots() const { return saved_group ? std::max(1, saved_group->count) : 1; }
  const TensorGroup* gathered_group() const {
    for (const auto& g : inv_.groups)
      if (g.per_unit) return &g;
    return nullptr;
  }
  LayerWork work_of(int layer) const;
  double pointwise_bytes(const LayerWork& w, bool backward) const;
  double activation_bytes(const LayerWork& w, bool backward) const;
  int pointwise_kernels(bool backward) const;
  // The parameter tensors of one layer, in the order its modules run, as shares of its parameters.
  std::vector<double> parameter_tensor_shares(int layer) const;
  bool fused_qkv() const;
  bool fused_gate_up() const;
  // Module calls of the MLP's input linear(s): gate and up apart unless fused.
  int mlp_in_modules(const LayerWork& w) const;
  // A layer's module calls besides its linears, activation and adapters: the layer, its attention
  // and MLP modules and its two norms (transformers' decoder layers).
  static constexpr int kGlueModules = 5;
  // `op` with the host time of `modules` module calls under ZeRO-3's module hooks (module_hooks).
  Op hooked(Op op, int modules) const {
    if (module_hooks) op.host_s += modules * (op.pass == Pass::backward ? kZero3HookBackward_s : kZero3HookForward_s);
    return op;
  }
  // HBM bytes of one micro-batch's FP8 casts in one layer's forward (inputs and weights) or
  // backward (output gradients), and their kernels.
  double fp8_cast_bytes(int layer, int micro, bool backward) const;
  int fp8_cast_kernels(bool backward) const;
  int linear_count() const;  // nn.Linear modules of a (dense) layer
  // Matmul weights of one layer on this rank (after TP; MoE: this rank's experts).
  double matmul_weights(int layer) const;
  double matmul_weights(int layer, const LayerWork& w) const;  // w: work_of(layer)
  // Fills an attention op's shape fields: T queries, the keys each attends, the head dimension.
  void shape_attention(Op& at, const LayerWork& w, bool flash, bool causal) const {
    at.flash = flash;
    at.flash_v1 = flash && job_.attention == plan::AttentionImpl::flash_v1;
    at.causal = causal;
    at.m = static_cast<std::int64_t>(tokens_);
    at.n = static_cast<std::int64_t>(w.attended);
    at.k = m_.head_dim_or_default();
  }
  // QLoRA: each quantized base weight becomes a 16-bit operand right before its matmul, forward
  // and recompute, and in backward too where the library dequantizes again
  // (inventory::dequantization: bitsandbytes' MatMul4Bit does; AutoGPTQ's unpacking saves the
  // result instead). Returns `after` when the layer has no quantized weights.
  int dequantize(const std::string& tag, int layer, int micro, Pass pass, Ids deps) {
    const inventory::Dequantization how = inventory::dequantization(job_.quant, w_B_);
    Op dq = make_op(OpKind::elementwise, Stream::compute, pass, label(tag, " dequantize 4-bit weights"), layer, micro);
    dq.bytes = matmul_weights(layer) * how.bytes_per_param;
    dq.kernels = linear_count() * how.kernels_per_linear;
    dq.deps = std::move(deps);
    return add(std::move(dq));
  }
  bool dequantizes_in_backward() const {
    return quantized_base() && inventory::dequantization(job_.quant, w_B_).again_in_backward;
  }
  bool quantized_base() const { return inv_.params.frozen_quantized > 0; }
  int fp8_casts(const std::string& tag, int layer, int micro, Pass pass, bool backward, int after) {
    Op op = make_op(OpKind::elementwise, Stream::compute, pass, label(tag, " fp8 casts"), layer, micro);
    op.bytes = fp8_cast_bytes(layer, micro, backward);
    op.kernels = fp8_cast_kernels(backward);
    op.deps = {after};
    return add(std::move(op));
  }
  double eager_score_bytes(const LayerWork& w) const;
  // Compute ops of one layer's forward (pass forward or recompute) or backward for one
  // micro-batch; returns the last op. Built by the build_ functions once per kind of layer and
  // pass, then copied (LayerTemplate).
  int layer_forward(int layer, int micro, Pass pass, Ids deps, Ids reads, int saved);
  int layer_backward(int layer, int micro, Ids deps, Ids reads);
  int build_layer_forward(int layer, int micro, Pass pass, Ids deps, Ids reads, int saved);
  int build_layer_backward(int layer, int micro, Ids deps, Ids reads);
  // One layer's LoRA adapters in a pass (forward, recompute or backward), after op `after`.
  int lora_adapters(const std::string& tag, int layer, int micro, Pass pass, const LayerWork& w, int after);
  int gemm(const std::string& name, int layer, int micro, Pass pass, double m, double k, double n, bool weight_grad,
           const Ids& deps);
  Op make_gemm(const std::string& name, int layer, int micro, Pass pass, double m, double k, double n, bool weight_grad,
               const Ids& deps) const;
  // A GEMM of a tensor-parallel block with the communication Megatron puts around it
  // (Shoeybi et al. 2019 fig. 3; Korthikanti et al. 2022 fig. 5): `before` its input is
  // all-gathered (sequence parallelism), `after` its output all-reduced or reduce-scattered.
  // With async TP the collective becomes tp point-to-point steps overlapping tp GEMM blocks.
  enum class TpComm { none, all_gather_before, reduce_after };
  int tp_gemm(Op gemm, TpComm comm, const std::string& name);
  // `op` in `blocks` pieces on the compute stream, a point-to-point pass of `pass_bytes` over
  // group `g` on the comm stream between consecutive pieces (the next piece waits for it).
  int blocked(Op op, int blocks, double pass_bytes, Group g, const std::string& pass_name);
  // Block b of `op` split into `blocks` equal pieces (blocked, gathered_ring): its share of the
  // work and shape; its dependencies are the caller's.
  Op block_of(const Op& op, int b, int blocks) const;
  int collective(Stream s, Collective c, Group g, int size, double bytes, const std::string& name, int layer, int micro,
                 Ids deps);
  int copy(Stream s, Tier src, Tier dst, double bytes, const std::string& name, int layer, int micro, Ids deps,
           Ids reads, Ids writes);
  // Expert parallelism: the all-to-all that sends each token to the ranks of its top-k experts
  // (dispatch) or brings the results back (combine) (GShard, Lepikhin et al. 2021; Megatron-core
  // MoE token dispatcher). Returns `after` when the layer has no experts or ep is 1.
  int dispatch(bool moe, const std::string& name, int layer, int micro, int after);
  // Attention; under context parallelism as ring attention (Liu et al. 2023; Megatron-core CP):
  // cp blocks, each waiting for the K/V block (forward) or K/V and their gradients (backward)
  // passed around the ring while the previous block computes.
  int attention(Op op, bool backward);
  // The same under PyTorch's context_parallel (FrameworkProfile::RingAttention::all_gather).
  int gathered_ring(Op op, bool backward);

  // build() in order: the pipeline's geometry, the persistent state, the passes in the
  // schedule's order, the optimizer step (builder.cpp).
  void plan_geometry();
  void persistent_state();
  int optimizer_step();  // returns the step's last op
  // persistent_state's parts: the inventory's groups by lifetime (persistent ones allocated at the
  // start, paged ones split by footprint::paged_placement), the tensors alive from forward to
  // backward, the gradients' shares and reduction, the sharding framework's copies, the pipeline's
  // sends and per-micro-batch state.
  void sort_groups();
  void allocate_persistent(const TensorGroup& g);
  void allocate_paged(const TensorGroup& g);
  void forward_backward_tensors();
  void gradient_state();
  void sharding_state();
  void pipeline_state();
  // optimizer_step's parts: what it waits for, one update op, ZeRO-Infinity's swapped update, and
  // what follows the update (parameters back or gathered, gradients freed); each returns its last op.
  Ids optimizer_deps() const;
  int optimizer_op(double params, const std::string& op_name, Ids deps);
  int swapped_optimizer_step(const Ids& opt_deps, double trainable_shard);
  int after_optimizer_step(int last, double trainable_shard);
  // The passes (step_passes.cpp): parameter streaming, a micro-batch's forward and backward
  // through this stage's layers with activation offload, the pipeline's sends and receives.
  std::string micro_name(const std::string& base, int mb) const;
  int copy_out(int layer, int mb, Pass pass, int gathered, int buffer);
  // Returns the op the reduce-scatter of a layer's gradients waits for; `cur` is the last compute
  // op of its backward, updated when the framework's copy runs on the compute stream.
  int reduce_copy_in(int layer, int mb, int& cur);
  int fetch(int layer, int mb, bool backward, int release_before, int after, int& buffer);
  // A fetch's copies into the GPU buffer `buffer` (allocated on the first copy's stream after
  // `deps`): from flash through a pinned staging buffer, or from host memory, then the gather of
  // the other ranks' shards. Returns the last op.
  int stream_in(int buffer, double bytes, const std::string& what, int layer, int mb, Ids deps, int after);
  // Parameters kept off the GPU that no layer's fetch carries, the root's (DeepSpeed fetches the
  // embedding and the LM head on use like any module): whether this step fetches them, and a
  // fetch of `bytes` of them into a buffer of their own (its tensor in `buffer`).
  bool streams_root() const;
  int fetch_root(const std::string& what, double bytes, int mb, Ids deps, int& buffer);
  // FSDP2 inside a pipeline stage: the per-step all-gathers (gather_stage), the ops a layer's
  // compute waits for (stage_params_ready: its gather's copy-out, the first time), the
  // accumulation of a micro-batch's unsharded gradients (accumulate_unsharded).
  void gather_stage();
  int stage_params_ready(int l, int mb);
  int accumulate_unsharded(int l, int mb, int cur);
  std::int64_t pipe_tag(int mb, int to_vs, bool gradient) const;
  void receive(int mb, int from_vs, int vs, bool gradient);
  void send(int mb, int to_vs, bool gradient);
  void forward(int mb, int chunk);
  void offload_activations(int l, int layer, int mb);
  void head_and_loss(int mb);
  int activations_back(int l, int layer, int mb);
  int backward_ready(int layer, int mb, const Ids& deps, const Ids& reads, int l);
  int reduce_gradients(int layer, int mb, bool last_backward, int& cur);
  void offload_gradients(int l, int layer, int mb, int produced);
  void backward(int mb, int chunk);

  // Layer templates (compiled per-layer subgraphs, docs/performance.md). A layer pass's ops depend
  // on the layer only through its kind (its LayerWork, MoE or dense, its matmul weights) and on the
  // micro-batch only through the ops' `micro` field, so after the first pass of a kind the next
  // ones are copies of its ops with their layer, micro-batch, dependencies and tensors replaced:
  // most of a step's ops are built by copying instead of by the layer's rules (the same IR,
  // op for op: schedule_test compares it with a build that names its ops, which builds every pass).
  // A pass is taken as a template only when every dependency it has outside itself is one of
  // the pass's inputs and it makes no tensor of its own; names (traces), FP8 casts (their
  // bytes depend on the micro-batch) and passes split in blocks (ring attention, async TP) are
  // always built.
  // What an op adds to the step's FLOP totals (StepIR's model, hardware and frozen-weight-gradient
  // FLOPs per rank): build() sums it over the ops, and over the ops a folded run leaves out.
  struct FlopTotals {
    double model = 0, hardware = 0, frozen = 0;
    static FlopTotals of(const Op& op) {
      return {op.model_flops, op.model_flops + op.recompute_flops,
              op.kind == OpKind::gemm && op.pass == Pass::backward && !op.weight_grad ? op.flops : 0.0};
    }
    FlopTotals& operator+=(const FlopTotals& o) {
      model += o.model;
      hardware += o.hardware;
      frozen += o.frozen;
      return *this;
    }
    FlopTotals& operator-=(const FlopTotals& o) {
      model -= o.model;
      hardware -= o.hardware;
      frozen -= o.frozen;
      return *this;
    }
  };
  struct LayerTemplate {
    LayerWork work;
    bool moe = false;
    double weights = 0;
    Pass pass = Pass::forward;
    std::size_t first = 0;  // where its ops were in ir_.ops
    std::vector<Op> ops;    // as built (callers add writes to a pass's last op afterwards)
    Ids deps, reads;
    int saved = -1;
    // For folded runs (StepIR::fold): its ops form one serial chain on the compute and comm
    // streams (each waits on the one before it; other waits are on its inputs), and what its
    // ops add to the step's FLOP totals (build()), all of them and the last alone.
    bool serial = false;
    FlopTotals flops, last_flops;
  };
  std::vector<LayerTemplate> templates_;
  bool templates_on() const;
  // The template for this pass, or nullptr.
  const LayerTemplate* find_template(int layer, Pass pass, const Ids& deps, const Ids& reads, int saved) const;
  // Keeps the ops from `first` on, just built, as a template if they qualify.
  void keep_template(int layer, int micro, Pass pass, std::size_t first, Ids deps, Ids reads, int saved);
  // Appends a copy of the template's ops for this layer and micro-batch; returns the last.
  int replay(const LayerTemplate& t, int layer, int micro, const Ids& deps, const Ids& reads, int saved);
  // The index in templates_ of the template this layer pass would replay, or -1.
  int template_index(int layer, Pass pass, const Ids& deps, const Ids& reads, int saved) const;

  // Folded runs (PipelineView::fold, StepIR::fold). A chunk pass's consecutive layers that
  // replay the same serial templates with the same allocations around them, where nothing
  // outside the pass waits on a layer's inner ops (no parameter streaming or per-layer gradient
  // reduction, no offload), run as one serial chain: the first is built whole and stands for
  // all, of the later ones only their allocations and frees are built, and the run's last op.
  struct FoldRun {
    std::size_t first = 0;  // the first layer's first op
    int chain_end = -1;     // its last op: what the later layers' left-out ops are, for whoever waits on them
    std::size_t end = 0;    // one past the run's last op
    int layers = 0;
  };
  std::vector<FoldRun> fold_runs_;
  std::vector<int> scratch_[3];  // forward's and backward's per-layer lists, reused pass after pass
  FlopTotals skipped_flops_;
  bool fold_on() const;
  // A later layer of a run leaves out the template's ops: their FLOPs still count; the last op
  // is built when it ends the run (`keep_last`), its waits on the left-out ops made on `removed`.
  int fold_replay(const LayerTemplate& t, int layer, int micro, const Ids& deps, const Ids& reads, int saved,
                  bool keep_last, int removed);
  std::vector<LayerWork> work_memo_;  // work_of by layer, for the templates' key

  const model::ModelSpec& m_;
  const plan::Plan& p_;
  const inventory::Inventory& inv_;
  const plan::Job& job_;
  StepIR ir_;
  std::vector<int> freed_by_;  // by tensor: the op that freed it
  int tp_ = 1, cp_ = 1, dp_ = 1;
  double tokens_ = 0, act_B_ = 2, w_B_ = 2;
  bool full_ = true;
  bool fused_ = false;
  int micro_override_ = 0;
  double load_ = 1.0;  // routed tokens an expert rank computes, relative to the even share
  bool names_ = true;
  PipelineView view_;
  // An op's or tensor's name, formatted only when names are wanted (traces, dry-run messages).
  template <class... Args>
  std::string name(fmt::format_string<Args...> f, Args&&... args) const {
    return names_ ? fmt::format(f, std::forward<Args>(args)...) : std::string();
  }
  // An op's name from its layer pass's tag ("fwd L3 m0") and what it does (" qkv"), or empty when
  // names are off: the tag is empty then, but a suffix over 15 characters still allocated a string
  // per op (2-4% of building a step IR, callgrind, calculon_bench).
  std::string label(const std::string& tag, const char* what) const { return names_ ? tag + what : std::string(); }
};

}  // namespace detail
}  // namespace ftplan::schedule
