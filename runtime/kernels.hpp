// The CPU kernels the calibration times: STREAM copy and triad (McCalpin, "Memory Bandwidth and
// Machine Balance", 1995; stream.c v5.10) and an AdamW step over fp32 state. Each is compiled for
// AVX-512, AVX2 and baseline x86-64 and picked at load time (GCC target_clones), so one binary is
// vectorized on the machine it runs on.
#pragma once

#include <cstddef>

namespace ftplan::runtime {

// a[i] = b[i]                 STREAM counts 16 bytes per element.
void stream_copy(double* a, const double* b, std::size_t n);
// a[i] = b[i] + scalar * c[i]  STREAM counts 24 bytes per element.
void stream_triad(double* a, const double* b, const double* c, double scalar, std::size_t n);

// AdamW hyper-parameters (PyTorch's torch.optim.AdamW defaults but weight decay, which is the
// common fine-tuning value).
struct AdamW {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
};

// One AdamW step `step` (1-based) over n parameters, in place on p, m, v (Loshchilov & Hutter 2019,
// "Decoupled Weight Decay Regularization", Algorithm 2, in the form torch.optim.AdamW computes it):
//   p <- p * (1 - lr * wd)
//   m <- beta1 * m + (1 - beta1) * g
//   v <- beta2 * v + (1 - beta2) * g^2
//   p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Reads p, g, m, v (16 B) and writes p, m, v (12 B): 28 bytes of DRAM traffic per parameter, and
// since every written line was just read there is no write-allocate traffic on top.
void adamw_step(float* p, const float* g, float* m, float* v, std::size_t n, const AdamW& h, int step);

}  // namespace ftplan::runtime
