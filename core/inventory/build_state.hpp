// The inventory's builder (not part of inventory's interface: inventory.hpp is). build_inventory
// (inventory.cpp) fills one `Build` and runs its steps in order, each adding the tensor groups of
// one kind of state:
//   rank_params.cpp     the rank's parameters, layer kind by layer kind (count_rank_params)
//   training_state.cpp  weights, optimizer state, gradients, the sharding framework's buffers,
//                       working copies, optimizer temporaries, offload buffers, fixed overheads
//   activations.cpp     saved activations per layer, activation gradients, the loss
// The order of the steps is the order of the groups in Inventory::groups (traces and dry runs
// name them in that order).
#pragma once

#include <array>
#include <cstddef>
#include <iterator>

#include "inventory/inventory.hpp"

namespace ftplan::inventory::detail {

// Which linear modules have trainable weights: all of them in a full fine-tune, the adapted ones
// under LoRA; a gate only where the MLP is gated.
struct Trainable {
  std::array<bool, std::size(model::kLinears)> on{};
  Trainable(const model::ModelSpec& m, const plan::Job& job) {
    on.fill(job.method == plan::Method::full);
    if (job.method != plan::Method::full)
      for (const auto& name : job.lora.targets)
        if (const auto l = model::linear_from_string(name)) on[static_cast<std::size_t>(*l)] = true;
    if (!model::is_gated(m.ffn_kind)) on[static_cast<std::size_t>(model::Linear::gate)] = false;
  }
  bool operator()(model::Linear l) const { return on[static_cast<std::size_t>(l)]; }
};

// Layers differ only by kind, a set of these bits: MoE or dense, local (sliding-window) or global
// attention, with cross-attention (an encoder-decoder's decoder) or not. The per-layer figures
// are computed once per kind present on the stage.
inline constexpr int kMoeLayer = 1;
inline constexpr int kLocalLayer = 2;
inline constexpr int kCrossLayer = 4;
inline constexpr int kLayerKinds = 8;

// One kind of layer on this rank: how many the stage has, one of them, and its parameters.
struct LayerKind {
  int count = 0;              // layers of this kind on the stage
  int model_layer = 0;        // one of them, as the model numbers its layers
  double total = 0;           // parameters on this rank (tp split; experts by tp x ep)
  double linear = 0;          // of total: the linear weights
  double largest_linear = 0;  // the largest single linear weight
  double lora = 0;            // LoRA adapter parameters on this rank
  double expert = 0;          // of total: the experts' MLPs
  double paged = 0;           // trainable parameters in tensors a paged optimizer pages
};

// The state the steps share: the plan's degrees and sharding, the stage's layer kinds, and the
// figures one step derives for the later ones.
struct Build {
  Build(const model::ModelSpec& model, const plan::Plan& plan, int stage, Inventory& inv);

  const model::ModelSpec& m;
  const plan::Plan& plan;
  const plan::Job& job;
  const plan::Parallel& par;
  const plan::Offload& off;
  Inventory& inv;
  const Trainable trainable;
  const int stage;
  int tp = 1, pp = 1, cp = 1, ep = 1;
  int world = 1;  // GPUs of the plan
  int zero = 0;   // ZeRO stage in effect (plan::sharding_in_effect)
  int shard = 1;  // data-parallel ranks the dense state is sharded over
  // Expert parameters are split by ep first, then sharded only over the data-parallel ranks that
  // hold the same experts: the expert-data-parallel group, dp / ep of them (DeepSpeed-MoE
  // expert_data_parallel_group, deepspeed/utils/groups.py; Megatron-core's expert data-parallel
  // group, parallel_state.py). Dense parameters shard over all dp ranks.
  int expert_shard = 1;
  double h = 0;  // the model's hidden size

  // count_rank_params:
  std::array<LayerKind, kLayerKinds> kinds{};
  double norm_params = 0;                          // parameters of one norm (the final norm's)
  double frozen_linear = 0;                        // linear weights on the rank (those QLoRA quantizes)
  double paged_trainable = 0;                      // trainable parameters in tensors a paged optimizer pages
  double expert_trainable = 0, expert_frozen = 0;  // of RankParams::expert
  // add_optimizer_state:
  double trainable_shard = 0;  // trainable parameters whose state this rank keeps
  double states = 0;           // optimizer state bytes per trainable parameter

  // Adds a group of `count` tensors of `bytes` each (none when either is 0). `e`: the element
  // type (Element::packed for mixed buffers).
  void add(const char* name, Category c, plan::Tier tier, double bytes, int count, Lifetime life, Element e,
           bool per_layer = false, bool per_unit = false) {
    if (bytes <= 0 || count <= 0) return;
    inv.groups.push_back(TensorGroup{name, c, tier, bytes, count, life, per_layer, per_unit, e});
  }
  Element elem(double bytes_per_element) const { return inv.element_of(bytes_per_element); }
  // Dense and expert bytes of a state sharded from ZeRO stage `min_stage` on.
  double shard_parts(double dense_bytes, double expert_bytes, int min_stage) const {
    return zero >= min_stage ? dense_bytes / shard + expert_bytes / expert_shard : dense_bytes + expert_bytes;
  }
  // Bytes per parameter of the frozen base's linear weights as stored (quantized under QLoRA), or
  // `otherwise`; and their element type.
  double base_B(double otherwise) const {
    return inv.params.frozen_quantized > 0 ? quantized_bytes_per_param(job.quant) : otherwise;
  }
  Element base_element(Element otherwise) const {
    return inv.params.frozen_quantized > 0 ? Element::packed : otherwise;
  }
};

// The steps of build_inventory, in order.
void count_rank_params(Build& b);  // rank_params.cpp
void add_weights(Build& b);        // training_state.cpp
void add_optimizer_state(Build& b);
void add_gradients(Build& b);
void add_sharding_buffers(Build& b);
void add_working_copies(Build& b);
void add_optimizer_temporaries(Build& b);
void add_activations(Build& b);  // activations.cpp
void add_loss(Build& b);
void add_offload_buffers(Build& b);  // training_state.cpp
void add_overheads(Build& b);

}  // namespace ftplan::inventory::detail
