// The step IR as JSON (docs/step-ir.md): what `ftplan simulate --ir` writes, for a real executor
// or any other tool to run or inspect the same graph the simulator runs.
#include <nlohmann/json.hpp>

#include "schedule/step_ir.hpp"

namespace ftplan::schedule {

namespace {

using nlohmann::json;

json tensor_json(const Tensor& x, std::size_t t) {
  json j = {{"id", t},
            {"name", x.name},
            {"category", inventory::to_string(x.category)},
            {"tier", plan::to_string(x.tier)},
            {"element", inventory::to_string(x.element)},
            {"shape", json::array({x.elements})},
            {"bytes", x.bytes}};
  if (x.layer >= 0) j["layer"] = x.layer;
  return j;
}

// The fields of `op`'s kind: shapes and work of compute, a collective's group, a copy's tiers, the
// tensor of an alloc or free, a marker's peer.
void kind_fields(const Op& op, json& j) {
  switch (op.kind) {
    case OpKind::gemm:
    case OpKind::attention:
      // GEMM: C[m x n] = A[m x k] B[k x n]; attention: m queries, n keys each, k head dim.
      j["m"] = op.m;
      j["n"] = op.n;
      j["k"] = op.k;
      if (op.kind == OpKind::gemm)
        j["weight_grad"] = op.weight_grad;
      else {
        j["flash"] = op.flash;
        if (op.flash_v1) j["flash_v1"] = true;
        j["causal"] = op.causal;
      }
      [[fallthrough]];
    case OpKind::elementwise:
    case OpKind::loss:
    case OpKind::optimizer:
      j["flops"] = op.flops;
      j["model_flops"] = op.model_flops;
      j["bytes"] = op.bytes;
      j["kernels"] = op.kernels;
      break;
    case OpKind::collective:
      j["collective"] = to_string(op.collective);
      j["group"] = to_string(op.group);
      j["group_size"] = op.group_size;
      j["bytes"] = op.bytes;
      if (op.peer >= 0) j["peer"] = op.peer;
      if (op.tag >= 0) j["tag"] = op.tag;
      break;
    case OpKind::copy:
      j["src"] = plan::to_string(op.src);
      j["dst"] = plan::to_string(op.dst);
      j["bytes"] = op.bytes;
      break;
    case OpKind::alloc:
    case OpKind::free: j["tensor"] = op.tensor; break;
    case OpKind::marker:
      if (op.peer >= 0) {
        j["peer"] = op.peer;
        j["tag"] = op.tag;
      }
      break;
  }
}

json op_json(const Op& op, std::size_t i) {
  json j = {{"id", i}, {"kind", to_string(op.kind)}, {"stream", to_string(op.stream)}, {"name", op.name}};
  if (op.pass != Pass::other) j["pass"] = to_string(op.pass);
  if (op.layer >= 0) j["layer"] = op.layer;
  j["micro"] = op.micro;
  if (op.element != inventory::Element::packed) j["element"] = inventory::to_string(op.element);
  kind_fields(op, j);
  if (op.host_s > 0) j["host_s"] = op.host_s;
  if (!op.deps.empty()) j["deps"] = op.deps;
  if (!op.reads.empty()) j["reads"] = op.reads;
  if (!op.writes.empty()) j["writes"] = op.writes;
  return j;
}

}  // namespace

std::string to_json(const StepIR& ir, const std::string& plan_name) {
  json tensors = json::array();
  for (std::size_t t = 0; t < ir.tensors.size(); ++t) tensors.push_back(tensor_json(ir.tensors[t], t));
  json ops = json::array();
  for (std::size_t i = 0; i < ir.ops.size(); ++i) ops.push_back(op_json(ir.ops[i], i));
  const json doc = {{"format", "ftplan-step-ir"},
                    {"version", 1},
                    {"plan", plan_name},
                    {"stage", ir.stage},
                    {"micro_batches", ir.micro_batches},
                    {"tokens_per_rank", ir.tokens_per_rank},
                    {"model_flops_per_rank", ir.model_flops_per_rank},
                    {"tensors", std::move(tensors)},
                    {"ops", std::move(ops)}};
  return doc.dump(1) + "\n";
}

}  // namespace ftplan::schedule
