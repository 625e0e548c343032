// One optimizer step of one rank as a step IR: the ops it runs (with FLOPs and bytes), the
// tensors they read and write and in which tier, the stream each op is issued on and in which
// order, and the dependencies between streams. The IR knows nothing of the simulator: sim/
// lowers it onto des/ resources; the tiered-offload executor (calibrate/) can run the same IR
// for real. It is built from the plan's tensor inventory, so the memory it allocates and frees
// is the inventory's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "inventory/inventory.hpp"
#include "model/model.hpp"
#include "plan/plan.hpp"
#include "plan/rank_layout.hpp"

namespace ftplan::schedule {

// Streams of one rank; ops on one stream run in the order they appear in StepIR::ops.
// comm carries parameter all-gathers and tensor-parallel collectives, comm_reduce gradient
// reductions (FSDP and DeepSpeed issue them on separate NCCL streams that run concurrently),
// p2p the pipeline's sends to neighbouring stages.
enum class Stream { compute, comm, comm_reduce, h2d, d2h, cpu, nvme_read, nvme_write, p2p };
inline constexpr int kStreams = 9;
const char* to_string(Stream s);

enum class OpKind {
  gemm,         // matrix multiply on the GPU
  attention,    // fused attention kernel (flash/SDPA) or eager score/softmax/AV kernels
  elementwise,  // memory-bound kernels: norms, activations, residuals, RoPE, dropout
  loss,         // LM head's softmax/cross-entropy part
  optimizer,    // the optimizer update over this rank's shard (GPU or CPU)
  collective,   // NCCL collective over a process group
  copy,         // tier-to-tier copy (H2D, D2H, NVMe read/write)
  alloc,        // a tensor comes to life in a tier
  free,         // it dies
  marker,       // ordering only
};
const char* to_string(OpKind k);

enum class Collective { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };
const char* to_string(Collective c);
// dp: the data-parallel ranks with the context-parallel ones (or, under hybrid sharding, the
// shard group inside a node); replicate: hybrid sharding's replicas of one shard across nodes.
// Bytes an AdamW step touches per fp32-mastered parameter: reads master, gradient, m, v (16),
// writes master, m, v (12) (DeepSpeed CPU Adam, csrc/adam/cpu_adam_impl.cpp; 26-30 B measured,
// hardware-figures.md "Host"). The optimizer ops' bytes; the simulator's CPU Adam rate.
inline constexpr double kAdamBytesPerParam = 28.0;

using Group = plan::Group;  // the communication groups (plan/rank_layout.hpp)
using plan::to_string;

enum class Pass { forward, recompute, backward, optimizer, other };
const char* to_string(Pass p);

// Op and tensor indices of one op: almost always one to three, kept inline (no allocation per op;
// a step has tens of thousands of ops and a sweep builds thousands of steps), more on the heap.
// Its own small vector rather than boost's small_vector<int, 3>: an Op is moved a few times as it
// is built, and moving three of these inline is a few word copies (boost's moved them element by
// element through a generic routine: 5% of a deep pipeline's simulation, callgrind).
class Ids {
 public:
  using value_type = int;
  using size_type = std::size_t;
  using iterator = int*;
  using const_iterator = const int*;
  using reverse_iterator = std::reverse_iterator<int*>;
  using const_reverse_iterator = std::reverse_iterator<const int*>;

  Ids() = default;
  Ids(std::initializer_list<int> ids) { assign(ids.begin(), ids.end()); }
  template <class It>
  Ids(It first, It last) {
    assign(first, last);
  }
  Ids(const Ids& o) { copy(o); }
  Ids(Ids&& o) noexcept { take(o); }
  Ids& operator=(const Ids& o) {
    if (this != &o) copy(o);
    return *this;
  }
  Ids& operator=(Ids&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  Ids& operator=(std::initializer_list<int> ids) {
    assign(ids.begin(), ids.end());
    return *this;
  }
  ~Ids() { release(); }

  template <class It>
  void assign(It first, It last) {
    size_ = 0;
    for (; first != last; ++first) push_back(*first);
  }
  void push_back(int id) {
    if (size_ == capacity_) grow();
    data()[size_++] = id;
  }
  void clear() { size_ = 0; }
  bool empty() const { return size_ == 0; }
  size_type size() const { return size_; }
  int* data() { return heap_ ? heap_ : inline_; }
  const int* data() const { return heap_ ? heap_ : inline_; }
  int& operator[](size_type i) { return data()[i]; }
  int operator[](size_type i) const { return data()[i]; }
  int& front() { return data()[0]; }
  int front() const { return data()[0]; }
  int& back() { return data()[size_ - 1]; }
  int back() const { return data()[size_ - 1]; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }
  bool operator==(const Ids& o) const { return std::equal(begin(), end(), o.begin(), o.end()); }

 private:
  static constexpr std::uint32_t kInline = 3;
  void grow();  // step_ir.cpp: twice the room, on the heap
  void release() {
    delete[] heap_;
    heap_ = nullptr;
    capacity_ = kInline;
  }
  // Inline into inline: three word copies (a layer template's replay copies every op's three).
  void copy(const Ids& o) {
    if (o.heap_ || heap_) {
      assign(o.begin(), o.end());
      return;
    }
    size_ = o.size_;
    for (std::uint32_t i = 0; i < kInline; ++i) inline_[i] = o.inline_[i];
  }
  void take(Ids& o) {
    heap_ = o.heap_;
    size_ = o.size_;
    capacity_ = o.capacity_;
    // Element by element: std::copy of the 12 bytes compiles to a memmove call, four of which
    // (with the name's) were most of an Op's move (callgrind, sweep_bench).
    if (!heap_)
      for (std::uint32_t i = 0; i < kInline; ++i) inline_[i] = o.inline_[i];
    o.heap_ = nullptr;
    o.size_ = 0;
    o.capacity_ = kInline;
  }
  int* heap_ = nullptr;
  std::uint32_t size_ = 0, capacity_ = kInline;
  int inline_[kInline] = {0, 0, 0};
};

// A tensor as an executor allocates it: a flat buffer of `elements` elements of `element` in
// `tier` (packed: raw bytes holding tensors of several types, e.g. a layer's saved activations).
// Frameworks hold parameters, gradients and optimizer state as flat buffers too (FSDP flat
// parameters, DeepSpeed partitions, YaFSDP's buffers); an op's own operand shapes are its m, n, k.
struct Tensor {
  std::string name;
  inventory::Category category = inventory::Category::activations;
  plan::Tier tier = plan::Tier::gpu;
  double bytes = 0;
  int layer = -1;
  inventory::Element element = inventory::Element::packed;
  // bytes / element_bytes(element); a count, not a one-element vector: a step has thousands of
  // tensors and a vector cost each an allocation (~3% of a deep pipeline's simulation, callgrind).
  std::int64_t elements = 0;

  bool operator==(const Tensor&) const = default;
};

struct Op {
  OpKind kind = OpKind::marker;
  Stream stream = Stream::compute;
  Pass pass = Pass::other;
  std::string name;  // "fwd L3 mlp_in", "ag L3", ...
  int layer = -1;    // model layer, -1 for none
  int micro = 0;     // micro-batch index

  // Compute: FLOPs the hardware executes, the part that counts as model FLOPs (PaLM; recompute
  // excluded), HBM bytes moved, kernel launches, the dtype's peak to use, and the GEMM shape.
  double flops = 0;
  double model_flops = 0;
  double recompute_flops = 0;  // recompute's FLOPs counted the model way (for HFU, Narayanan et al. eq. 3)
  double bytes = 0;
  int kernels = 0;
  bool fp8 = false;
  // The element type it computes in (GEMMs: its inputs; FP8 GEMMs fp8) or moves (collectives,
  // copies: the payload's).
  inventory::Element element = inventory::Element::packed;
  bool flash = false;        // attention: a fused flash-style kernel (else the eager matmuls and softmax)
  bool flash_v1 = false;     // attention: a FlashAttention-1-class kernel (plan::AttentionImpl::flash_v1)
  bool causal = false;       // attention: causal mask
  bool weight_grad = false;  // backward GEMM: also computes the weight gradient (dB = A^T dC)
  // Elementwise: converts its layer's 16-bit gradient to fp32 for the copy to the host's fp32
  // gradients (Builder::offload_gradients).
  bool upcasts_gradients = false;
  // GEMM: C[m x n] = A[m x k] B[k x n] of the forward. Attention: m queries, n keys, k head dim.
  std::int64_t m = 0, n = 0, k = 0;

  // Host time before the op can be issued (a framework's Python hooks and bookkeeping, measured);
  // a collective's `kernels` are further host launches it makes (list-API copies, one per rank).
  double host_s = 0;

  // Collective / copy: payload bytes (the full tensor), the group and its size.
  Collective collective = Collective::all_reduce;
  Group group = Group::dp;
  int group_size = 1;
  plan::Tier src = plan::Tier::gpu, dst = plan::Tier::gpu;

  // Alloc / free: the tensor.
  int tensor = -1;

  // Pipeline point-to-point: a send_recv collective sends to stage `peer`; a marker with
  // peer >= 0 is the receive that waits for the send from stage `peer` with the same tag.
  int peer = -1;
  std::int64_t tag = -1;

  Ids deps;    // ops (indices) that must finish first; same-stream order is implicit
  Ids reads;   // tensors read (must be live in their tier)
  Ids writes;  // tensors written

  bool operator==(const Op&) const = default;
};

struct StepIR {
  std::vector<Tensor> tensors;
  std::vector<Op> ops;  // issue order; also a topological order of `deps`
  int micro_batches = 1;
  double tokens_per_rank = 0;          // tokens this rank processes per step
  double model_flops_per_rank = 0;     // sum of ops' model_flops
  double hardware_flops_per_rank = 0;  // model + recompute FLOPs, counted the model way
  // The weight gradients a full fine-tune would add: those of the frozen weights (LoRA's base).
  double frozen_weight_grad_flops_per_rank = 0;
  int stage = 0;
  // Bytes this rank writes to NVMe over the whole step, where the IR holds only some of the
  // step's micro-batches (the simulator's steady-state shortcut sets it from two partial IRs); a
  // drive's write rate depends on how much of a step fits its write cache. < 0: the IR's own.
  double nvme_step_written_bytes = -1;
  // Folded runs (built with PipelineView::fold; empty when none): per op, n >= 2 for the ops of
  // the first layer of a run of n identical consecutive layers (each standing for n), 0 for the
  // ops kept of its later layers (their allocations and frees, and the run's last op, which what
  // follows waits on; the rest of those layers is not in `ops`), 1 otherwise. The convention of
  // the simulator's fold_layers (sim/lowering.hpp), which finds such runs in a whole IR. The
  // totals above count every layer.
  std::vector<int> fold;
};

// Bytes the IR's ops copy to NVMe.
double nvme_written_bytes(const StepIR& ir);

// One entry of a pipeline stage's issue order: the forward or backward of a micro-batch through
// one of the stage's model chunks (chunk 0 unless the schedule is interleaved).
struct PipeAction {
  bool backward = false;
  int micro = 0;
  int chunk = 0;
};
// The order a stage runs its micro-batches in: GPipe (all forwards, then all backwards; Huang
// et al. 2019), 1F1B (pp - stage - 1 warm-up forwards, then one forward one backward; Narayanan
// et al. 2021 sec. 2.2.1, PipeDream-Flush) or interleaved 1F1B with `chunks` model chunks per
// stage (sec. 2.2.2; Megatron-LM schedules.py forward_backward_pipelining_with_interleaving).
std::vector<PipeAction> pipeline_order(plan::PipelineSchedule schedule, int pp, int stage, int micro_batches,
                                       int chunks);

// The most layer passes (one layer's forward and backward for one micro-batch, on one stage)
// the step IRs of one simulated step may hold, summed over the pipeline's stages. An IR holds
// every op of its step, about 40 per layer pass, and the simulator a task per op: memory and
// time grow with micro-batches x layers, about 17 KB and 0.15 ms a pass (measured: 131,072
// passes took 2.2 GB and 19 s). At this bound a step takes about 1.2 GB and 10-20 s on a
// shared 2-core machine (tests/cli/bounds.sh checks it). It is the largest step the validation
// simulates whole: Megatron-1T in Narayanan et al. 2021 Table 1, 512 micro-batches x 128 layers
// over 64 stages. Larger steps are simulated with the steady-state shortcut
// (sim::Options::max_micro_batches, every verb's default), which builds a few micro-batches.
inline constexpr std::int64_t kMaxLayerPasses = std::int64_t{1} << 16;

// Layer passes of every stage's step for `plan`, building `micro_batches` of its micro-batches
// (0: all of them, its gradient accumulation count).
std::int64_t layer_passes(const model::ModelSpec& model, const plan::Plan& plan, std::int64_t micro_batches = 0);
// Empty when `layer_passes` is within kMaxLayerPasses; else why the step is not built, naming the limit.
std::string too_large(const model::ModelSpec& model, const plan::Plan& plan, std::int64_t micro_batches = 0);

// The step of pipeline stage `stage` of a data-parallel plan (DDP, ZeRO-1/2/3, FSDP).
// `inventory` must be build_inventory(model, plan, stage).
// `micro_batches` > 0 builds only that many of the step's micro-batches (for steady-state
// extrapolation); 0 builds them all.
// `names` false leaves ops' and tensors' names empty (faster; the simulator wants them only for traces).
// Throws std::length_error (too_large's message) beyond kMaxLayerPasses.
// Where a stage sits in the pipeline being simulated, when that is not the plan's own: the
// simulator's shortened pipeline (sim/simulate.cpp, stage symmetry) runs the plan's first stage,
// some of its identical middle stages and its last stage as a pipeline of `stages`; the stage's
// schedule (warm-up length), peers and tags follow `position` in it, its layers and memory the
// inventory's stage. stages 0: the plan's pipeline.
struct PipelineView {
  int stages = 0;
  int position = 0;
  // Fold the chunk passes' runs of identical layers (StepIR::fold): for the simulator's short
  // pipelines, whose lowering folds them anyway (sim/lower.cpp).
  bool fold = false;
};

StepIR build_step(const model::ModelSpec& model, const plan::Plan& plan, const inventory::Inventory& inventory,
                  int micro_batches = 0, bool names = true, PipelineView view = {});

// Walks the IR in order and checks that every op finds the tensors it reads live in their tier,
// that nothing is freed twice or used after free, and that deps point backwards. Returns the
// problems found (empty when the IR is executable).
std::vector<std::string> dry_run(const StepIR& ir);

// The IR as a JSON document (format "ftplan-step-ir", version 1; docs/step-ir.md): every tensor
// with its tier, element type, shape and bytes; every op with its stream, pass, layer, element
// type, shape (GEMMs, attention), FLOPs and bytes, collective and group, dependencies and the
// tensors it reads and writes.
std::string to_json(const StepIR& ir, const std::string& plan_name);

}  // namespace ftplan::schedule
