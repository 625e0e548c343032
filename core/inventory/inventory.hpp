// The tensors of one training step on one rank of a plan: what they hold, in which tier, how
// many bytes, and when they live. The footprint (analytic peak) and the schedule (simulated
// step) both derive from this one inventory, so their peaks cannot drift apart.
//
// Tensors are kept as groups: "the saved MLP activations of each of the 40 layers on this
// stage" is one group with count 40, so building an inventory is cheap enough to evaluate a
// million plans per second. The schedule expands groups layer by layer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/model.hpp"
#include "plan/framework.hpp"
#include "plan/plan.hpp"

namespace ftplan::inventory {

enum class Category { weights, gradients, optimizer, activations, temporaries, buffers, overhead };
inline constexpr int kCategories = 7;
const char* to_string(Category c);

// When a tensor lives within a step, in the order a step runs:
// forward (layers ascending), loss, backward (layers descending), optimizer.
enum class Lifetime {
  persistent,        // always (weights, optimizer state, fixed buffers, overheads)
  gradients,         // accumulated gradients: from the backward of their layer until the optimizer
                     // step; with gradient accumulation, for the whole step
  forward_backward,  // from the start of forward to the end of backward (FSDP1 root unit)
  saved,             // saved for backward: from its layer's forward to its layer's backward, per
                     // micro-batch in flight
  layer,             // only while one layer runs, forward or backward (gathered units, dequantized weights)
  backward_layer,    // only during one layer's backward (activation gradients, recomputed activations)
  loss,              // from the LM head's forward to its backward (logits, log-softmax)
  loss_peak,         // only while the loss is computed and differentiated (fp32 copies, logit gradients)
  optimizer,         // only during the optimizer step
};

// The element type of a tensor group as an executor allocates it. `packed`: one buffer holding
// tensors of several types (a layer's saved activations, 4-bit weights with their scales, the
// CUDA context), allocated as raw bytes.
enum class Element { packed, fp32, bf16, fp16, fp8 };
const char* to_string(Element e);
double element_bytes(Element e);  // packed: 1 (a byte)

// The name of the pinned host buffers the NVMe optimizer swap goes through (the step IR's swap
// copies and the CPU optimizer step name this tensor).
inline constexpr const char* kOptimizerSwapBuffers = "optimizer swap buffers (pinned)";
inline constexpr const char* kTrainableWeights = "trainable weights";
// The LM head's and final norm's parameters fetched to the GPU for the head's forward and
// backward, where the root's parameters are streamed (streams_root_params).
inline constexpr const char* kStreamedHead = "streamed head and final norm";
// DeepSpeed's NVMe optimizer swap moves the state one sub-group at a time: sub_group_size
// elements, default 1e9 (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig.sub_group_size),
// each the fp32 master, m, v and gradient: 16 bytes. The swap buffers hold one sub-group; the step
// IR's swap copies move one per chunk (Offload::chunk_bytes overrides the size in bytes).
inline constexpr double kSwapSubGroupElements = 1e9;
inline constexpr double kSwapBytesPerElement = 16.0;
// Parameters in one sub-group of a rank's `trainable_shard` (the inventory's swap buffers, the
// step IR's swap chunks).
inline double swap_sub_group_params(const plan::Offload& o, double trainable_shard) {
  return o.chunk_bytes > 0 ? o.chunk_bytes / kSwapBytesPerElement : std::min(trainable_shard, kSwapSubGroupElements);
}

// The name of FSDP2's parameters kept gathered for the step inside a pipeline stage (the step
// IR's per-step all-gathers write this tensor; Inventory::gathered_for_step).
inline constexpr const char* kStageGatheredParams = "FSDP2 stage parameters gathered for the step (PP)";
// ... and its unsharded gradients, accumulated across the step's micro-batches.
inline constexpr const char* kStageUnshardedGrads = "FSDP2 unsharded gradients accumulated (PP)";

struct TensorGroup {
  const char* name;  // static text, e.g. "saved activations: attention"
  Category category;
  plan::Tier tier;
  double bytes;   // one instance
  int count = 1;  // instances alive together at most (layers on the stage, units in flight, ...)
  Lifetime lifetime;
  bool per_layer = false;  // `count` is the stage's layers, freed/created layer by layer
  bool per_unit = false;   // gathered parameters of a sharded unit: live from its all-gather to its reshard
  Element element = Element::packed;
  // In CUDA unified memory (bitsandbytes' paged optimizers): outside the caching allocator, on
  // the GPU while it has room, paged to host memory when not (footprint::paged_placement).
  bool paged = false;
  double total() const { return bytes * count; }
};

// Parameter counts of one rank (after tensor, pipeline and expert parallel splits, before data-parallel sharding).
struct RankParams {
  double total = 0;             // all parameters on the rank
  double trainable = 0;         // full fine-tune: total; LoRA: adapters
  double frozen = 0;            // total - trainable (LoRA base)
  double frozen_quantized = 0;  // of frozen: the linear weights QLoRA quantizes
  double expert = 0;            // of total: the MoE experts' parameters on this rank (after the ep split)
  double largest_layer = 0;     // parameters of the largest layer (an FSDP unit)
  double largest_linear = 0;    // parameters of the largest single linear weight
  double root = 0;              // embeddings + final norm + head on this stage (FSDP root unit)
  double trainable_largest_layer = 0;
};

struct Inventory {
  std::vector<TensorGroup> groups;
  int stage = 0;                    // pipeline stage this rank runs
  int layers = 0;                   // layers on this stage
  int micro_batches_in_flight = 1;  // micro-batches whose activations the stage holds at once
  bool forwards_first = false;      // every forward of the step runs before any backward (GPipe)
  std::int64_t grad_accumulation = 1;
  int ranks_per_node = 1;  // ranks sharing one host (for host and NVMe totals)
  int shard_degree = 1;    // data-parallel ranks the sharded state is split over
  int zero = 0;            // ZeRO stage in effect (FSDP FULL_SHARD = 3, SHARD_GRAD_OP = 2, ...)
  // FSDP2 inside a pipeline stage (torchtitan): the stage's parameters are all-gathered once per
  // step and stay gathered across its micro-batches; the gradients accumulate unsharded and are
  // reduce-scattered once, after the stage's last backward (inventory.cpp says where from).
  bool gathered_for_step = false;
  double tokens_per_micro_batch = 0;  // on this rank (after context parallel)
  // DeepSpeed's NVMe optimizer swap: the pinned swap buffers its sub-groups in flight hold at once
  // (plan::kOptimizerSwapBuffersPerSubGroup each); 0 without that swap.
  int optimizer_swap_buffers = 0;
  RankParams params;
  plan::FrameworkProfile profile;
  plan::PrecisionRecipe recipe;
  // The element type of `bytes`-per-element figures of the recipe: 4 fp32, 2 the job's 16-bit
  // type (fp16 under fp16-mixed, else bf16), anything else packed.
  Element element_of(double bytes_per_element) const;
  Element compute_element() const { return element_of(recipe.compute_B); }
  Element activation_element() const { return element_of(recipe.activation_B); }
  bool fp16 = false;  // the job's 16-bit type is fp16
};

// Builds the inventory of pipeline stage `stage` of `plan`. REQUIRES: a plan that passed check_plan.
Inventory build_inventory(const model::ModelSpec& model, const plan::Plan& plan, int stage = 0);
// Same, into `out` (reusing its storage: no allocation once warm).
void build_inventory(const model::ModelSpec& model, const plan::Plan& plan, int stage, Inventory& out);

// Layers [first, last) of virtual pipeline stage `vs` of `stages` (pp x model chunks), out of
// `total`: an even split, earlier stages taking the remainder (Megatron-LM's default), or, with
// `first` / `last` > 0 (Parallel::first_stage_layers, last_stage_layers; not interleaved), those
// on the end stages and the rest split the same way among the middle ones.
std::pair<int, int> stage_layers(int total, int stages, int vs, int first = 0, int last = 0);
// The model layers pipeline stage `stage` runs, chunk by chunk: the layers of virtual stages
// c x pp + stage for each of the plan's model chunks (interleaved 1F1B; one chunk otherwise). With
// layers that do not divide by pp x chunks the virtual stages differ by one layer, earlier ones
// taking the remainder (stage_layers; torchtitan's even split of layers over pp x v stages,
// generate_llm_fqn_per_model_part). `chunk_begin` (if given) gets each chunk's first index in the
// list and the list's size last.
std::vector<int> stage_layer_list(const model::ModelSpec& model, const plan::Plan& plan, int stage,
                                  std::vector<int>* chunk_begin = nullptr);
// The same layers as [begin, end) ranges, one per chunk in chunk order (chunk 0 .. stage_chunks - 1):
// the list without materializing it (the inventory counts a stage's layers per build, and the
// planner builds millions).
int stage_chunks(const plan::Plan& plan);
std::pair<int, int> stage_layer_range(const model::ModelSpec& model, const plan::Plan& plan, int stage, int chunk);

// Trainable LoRA parameters of the whole model for the job's targets and rank:
// r x (fan_in + fan_out) per adapted matrix (Hu et al. 2021, sec. 4).
std::int64_t lora_params(const model::ModelSpec& model, const plan::Job& job);

// Bytes per parameter of a QLoRA-quantized weight, quantization constants included
// (Dettmers et al. 2023, sec. 3: 4-bit NF4 + 8-bit absmax per 64 + fp32 per 256 blocks).
double quantized_bytes_per_param(const plan::QuantSpec& q);

// How a quantized base weight becomes the 16-bit operand of its matmul (inventory.cpp cites each
// library's code): the HBM bytes one dequantization moves per weight element, its kernels per
// linear, whether backward dequantizes again for the input gradient (else autograd saved the
// 16-bit weight from forward or from the checkpointed recompute), and the GPU bytes per weight
// element of its transient buffers while it runs (the 16-bit result included when it is not saved).
struct Dequantization {
  double bytes_per_param = 0;
  int kernels_per_linear = 1;
  bool again_in_backward = true;
  double transient_bytes_per_param = 0;
  double saved_bytes_per_param = 0;  // the 16-bit weight autograd keeps for backward (0: none)
};
Dequantization dequantization(const plan::QuantSpec& q, double compute_B);

// Whether torch.autocast casts the layers' weights to 16 bits on every forward: under AMP with
// fp32 weights, which a full fine-tune keeps; a LoRA/QLoRA base is loaded in the 16-bit compute
// dtype (add_weights), which autocast passes through uncast (cached_cast casts only an fp32
// tensor), and the adapters' casts are the adapter ops'.
bool autocast_casts_weights(const plan::PrecisionRecipe& recipe, const plan::Job& job);
// Whether the root's parameters (the embedding; the final norm and LM head) are fetched to the GPU
// on use, as the layers' are, from host memory or flash: parameters kept off the GPU by DeepSpeed
// ZeRO-3's offload_param, whose coordinator fetches every module's parameters from its pre-forward
// hook (stage3 PartitionedParameterCoordinator.fetch_sub_module), or by a layer-streaming engine
// (no sharding). Not under FSDP, whose offload keeps the root unit as it keeps it on the GPU, nor
// for parameters gathered for the step.
bool streams_root_params(const plan::Plan& plan, const Inventory& inv);

}  // namespace ftplan::inventory
