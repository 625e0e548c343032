// What the GPU benchmarks run, derived from the model zoo rather than made up: the GEMM shapes of
// a transformer layer and its LM head for a token count, forward and both backward GEMMs; and which
// catalog GPU a device is, so measurements print beside its datasheet figures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hardware/hardware.hpp"
#include "model/model.hpp"

namespace ftplan::calibrate {

struct GemmShape {
  std::string op;  // "llama-3.1-8b/mlp_down.wgrad/t4096"
  std::int64_t m = 0, n = 0, k = 0;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

// The GEMMs one training step runs for a linear layer Y[T x out] = X[T x in] W[in x out] over T tokens
// (C[m x n] = A[m x k] B[k x n]):
//   fwd    Y  = X W       m = T,   n = out, k = in
//   dgrad  dX = dY W^T    m = T,   n = in,  k = out
//   wgrad  dW = X^T dY    m = in,  n = out, k = T
// for the linears of one layer: qkv (out = (heads + 2 kv_heads) x head_dim, fused as Megatron and
// vLLM do), attn_out, mlp_gate_up (gated FFNs: gate and up are two GEMMs of one shape; listed once),
// mlp_down, and the LM head (out = vocab). MoE layers: one expert's FFN over the tokens routed to it
// on average (T x experts_per_token / experts).
std::vector<GemmShape> transformer_gemms(const model::ModelSpec& m, std::int64_t tokens);

// The same shapes once each (first label kept), in order of first appearance.
std::vector<GemmShape> unique_shapes(const std::vector<GemmShape>& shapes);

// The catalog GPU a device reporting `device_name` (e.g. "NVIDIA H100 80GB HBM3") with
// `memory_bytes` is: the entry whose model number and form factor appear in the name and whose
// memory is within 10%; nullptr when none or several fit equally.
const hardware::GpuSpec* match_catalog_gpu(const hardware::Catalog& catalog, const std::string& device_name,
                                           double memory_bytes);

}  // namespace ftplan::calibrate
