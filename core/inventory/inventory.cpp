// The inventory's interface (inventory.hpp): names, element types, pipeline stages' layers, and
// build_inventory, which runs the builder's steps (build_state.hpp) in order.
#include "inventory/inventory.hpp"

#include <algorithm>

#include "inventory/build_state.hpp"
#include "plan/checks.hpp"

namespace ftplan::inventory {

using model::ModelSpec;
using plan::Plan;

const char* to_string(Category c) {
  switch (c) {
    case Category::weights: return "weights";
    case Category::gradients: return "gradients";
    case Category::optimizer: return "optimizer";
    case Category::activations: return "activations";
    case Category::temporaries: return "temporaries";
    case Category::buffers: return "buffers";
    case Category::overhead: return "overhead";
  }
  return "?";
}

const char* to_string(Element e) {
  switch (e) {
    case Element::packed: return "bytes";
    case Element::fp32: return "fp32";
    case Element::bf16: return "bf16";
    case Element::fp16: return "fp16";
    case Element::fp8: return "fp8";
  }
  return "?";
}

double element_bytes(Element e) {
  switch (e) {
    case Element::packed: return 1;
    case Element::fp32: return 4;
    case Element::bf16:
    case Element::fp16: return 2;
    case Element::fp8: return 1;
  }
  return 1;
}

Element Inventory::element_of(double bytes_per_element) const {
  if (bytes_per_element == 4) return Element::fp32;
  if (bytes_per_element == 2) return fp16 ? Element::fp16 : Element::bf16;
  return Element::packed;
}

double quantized_bytes_per_param(const plan::QuantSpec& q) {
  const double block = q.block_size;
  switch (q.kind) {
    case plan::QuantKind::nf4:
    case plan::QuantKind::fp4:
      // 4-bit codes + one absmax per block: fp32 (4 B), or with double quantization an 8-bit absmax
      // plus one fp32 constant per 256 blocks (QLoRA sec. 3, "Double Quantization": 0.127 bits/param at block 64).
      return 0.5 + (q.double_quant ? 1.0 / block + 4.0 / (block * 256.0) : 4.0 / block);
    case plan::QuantKind::int4:
      // GPTQ-style int4 (AutoGPTQ's QuantLinear): 4-bit codes, and per group of `block` inputs and
      // each output an fp16 scale (`scales`) and a 4-bit zero point packed eight to an int32
      // (`qzeros`): 0.5 + 2.5 / group bytes a parameter.
      return 0.5 + 2.5 / block;
    case plan::QuantKind::int8:
      // LLM.int8 (Dettmers et al. 2022): int8 codes + one fp32 scale per row (~per 4096 values).
      return 1.0 + 4.0 / 4096.0;
  }
  return 2.0;
}

bool streams_root_params(const plan::Plan& plan, const Inventory& inv) {
  return plan.offload.params != plan::Tier::gpu && !inv.gathered_for_step &&
         (inv.profile.sharding == plan::Sharding::deepspeed || inv.profile.sharding == plan::Sharding::none);
}

bool autocast_casts_weights(const plan::PrecisionRecipe& recipe, const plan::Job& job) {
  return recipe.autocast_copies && job.method == plan::Method::full;
}

Dequantization dequantization(const plan::QuantSpec& q, double compute_B) {
  const double stored = quantized_bytes_per_param(q);
  if (q.kind != plan::QuantKind::int4)
    // bitsandbytes: one dequantize kernel per linear reads the codes and constants and writes the
    // 16-bit copy; MatMul4Bit (and MatMul8bitLt) dequantize again for the input gradient and keep
    // nothing (bitsandbytes/autograd/_functions.py, MatMul4Bit.forward/backward: F.dequantize_4bit).
    return {stored + compute_B, 1, true, compute_B, 0};
  // GPTQ int4 through AutoGPTQ's QuantLinear as transformers/optimum load it for training
  // (GPTQConfig with exllama off; desc_act false picks qlinear_cuda_old, otherwise qlinear_cuda):
  // above kernel_switch_threshold (128 rows, every training micro-batch of sequences) forward
  // unpacks in PyTorch ops and calls torch.matmul (auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py,
  // forward). Per weight element:
  //   bitwise_right_shift(qweight expanded 8-fold, wf): reads the packed 0.5 B, writes int32   4.5
  //   .to(int8): reads 4, writes 1                                                              5
  //   bitwise_and(weight, 15, out=weight): in place                                              2
  //   weight - zeros: int8 in, int8 out (zeros per group)                                        2
  //   scales * (...): int8 in, fp16 out (scales per group)                                       3
  // 16.5 B, plus the per-group zeros and scales the last two read (1 + 2 B per group). Kernels:
  // shift, cast, and, +1 on the packed zeros; shift, cast, and on the weight; the subtract and
  // the multiply: 9 per linear. The weight needs no grad, but x does, so autograd saves the fp16
  // result for the input gradient: backward does not dequantize again. While it runs the int32
  // unpacked weight and its int8 cast are alive together (5 B).
  return {16.5 + 3.0 / q.block_size, 9, false, 5.0, 2.0};
}

std::pair<int, int> stage_layers(int total, int stages, int vs, int first, int last) {
  if (stages > 1 && (first > 0 || last > 0)) {
    if (vs == 0 && first > 0) return {0, first};
    if (vs == stages - 1 && last > 0) return {total - last, total};
    // The middle: what the end stages left, split evenly among the stages between them.
    const int lo = first > 0 ? 1 : 0, hi = last > 0 ? stages - 1 : stages;
    const auto [a, b] = stage_layers(total - first - last, hi - lo, vs - lo);
    return {first + a, first + b};
  }
  const int base = total / stages, extra = total % stages;
  const int begin = vs * base + std::min(vs, extra);
  return {begin, begin + base + (vs < extra ? 1 : 0)};
}

int stage_chunks(const Plan& plan) {
  const plan::Parallel& par = plan.parallel;
  return par.pp > 1 && par.schedule == plan::PipelineSchedule::interleaved ? std::max(1, par.virtual_stages) : 1;
}

std::pair<int, int> stage_layer_range(const ModelSpec& m, const Plan& plan, int stage, int chunk) {
  const plan::Parallel& par = plan.parallel;
  const int pp = std::max(1, par.pp);
  const int chunks = stage_chunks(plan);
  // Interleaved with fixed end stages, as Megatron-core builds it (transformer_block.py,
  // get_num_layers_to_build): the first (last) stage's layers, and each middle stage's even share
  // of the rest, are split evenly over the stage's chunks; virtual stage c x pp + s runs its
  // stage's chunk size, in model order (check_plan asks for Megatron's divisibilities).
  const int first = par.first_stage_layers, last = par.last_stage_layers;
  const bool uneven_chunks = chunks > 1 && (first > 0 || last > 0);
  const int middle_stages = pp - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
  const auto chunk_size = [&](int vs) {
    const int s = vs % pp;
    if (s == 0 && first > 0) return first / chunks;
    if (s == pp - 1 && last > 0) return last / chunks;
    return middle_stages > 0 ? (m.total_layers() - first - last) / middle_stages / chunks : 0;
  };
  const int vs = chunk * pp + stage;
  if (!uneven_chunks) return stage_layers(m.total_layers(), pp * chunks, vs, first, last);
  int a = 0;
  for (int v = 0; v < vs; ++v) a += chunk_size(v);
  return {a, a + chunk_size(vs)};
}

std::vector<int> stage_layer_list(const ModelSpec& m, const Plan& plan, int stage, std::vector<int>* chunk_begin) {
  std::vector<int> list;
  if (chunk_begin) chunk_begin->clear();
  for (int c = 0, chunks = stage_chunks(plan); c < chunks; ++c) {
    const auto [begin, end] = stage_layer_range(m, plan, stage, c);
    if (chunk_begin) chunk_begin->push_back(static_cast<int>(list.size()));
    for (int l = begin; l < end; ++l) list.push_back(l);
  }
  if (chunk_begin) chunk_begin->push_back(static_cast<int>(list.size()));
  return list;
}

namespace detail {

Build::Build(const ModelSpec& model, const Plan& p, int stage_, Inventory& out)
    : m(model),
      plan(p),
      job(p.job),
      par(p.parallel),
      off(p.offload),
      inv(out),
      trainable(model, p.job),
      stage(stage_),
      tp(std::max(1, p.parallel.tp)),
      pp(std::max(1, p.parallel.pp)),
      cp(std::max(1, p.parallel.cp)),
      ep(std::max(1, p.parallel.ep)),
      world(p.cluster.gpus()),
      h(static_cast<double>(model.hidden)) {
  inv.groups.clear();
  inv.stage = stage;
  inv.profile = plan::framework_profile(job);
  inv.recipe = plan::precision_recipe(job, inv.profile);
  inv.fp16 = job.precision == plan::Precision::fp16_mixed;
  inv.ranks_per_node = std::max(1, plan.cluster.gpus_per_node);
  inv.grad_accumulation = plan::grad_accumulation_steps(plan);
  // ZeRO stage in effect and the group the state is sharded over.
  const plan::ShardingInEffect in_effect = plan::sharding_in_effect(plan);
  zero = in_effect.zero;
  shard = in_effect.shard_degree;
  inv.shard_degree = shard;
  inv.zero = zero;
  // FSDP2 with pipeline stages keeps each stage gathered for the step (add_fsdp_stage_gathered says why).
  inv.gathered_for_step = in_effect.gathered_for_step;
  expert_shard = ep > 1 && shard % ep == 0 ? shard / ep : (ep > 1 ? 1 : shard);
}

}  // namespace detail

Inventory build_inventory(const ModelSpec& model, const Plan& plan, int stage) {
  Inventory inv;
  build_inventory(model, plan, stage, inv);
  return inv;
}

// The steps in the order of the inventory's groups (build_state.hpp names their files).
void build_inventory(const ModelSpec& m, const Plan& plan, int stage, Inventory& inv) {
  detail::Build b(m, plan, stage, inv);
  detail::count_rank_params(b);
  detail::add_weights(b);
  detail::add_optimizer_state(b);
  detail::add_gradients(b);
  detail::add_sharding_buffers(b);
  detail::add_working_copies(b);
  detail::add_optimizer_temporaries(b);
  detail::add_activations(b);
  detail::add_loss(b);
  detail::add_offload_buffers(b);
  detail::add_overheads(b);
}

}  // namespace ftplan::inventory
