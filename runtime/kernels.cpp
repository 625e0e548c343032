#include "runtime/kernels.hpp"

#include <cmath>

// One clone per vector ISA, dispatched through an ifunc when the program loads (x86-64 only).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FTPLAN_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FTPLAN_VECTOR_CLONES
#endif

namespace ftplan::runtime {

FTPLAN_VECTOR_CLONES
void stream_copy(double* __restrict a, const double* __restrict b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i];
}

FTPLAN_VECTOR_CLONES
void stream_triad(double* __restrict a, const double* __restrict b, const double* __restrict c, double scalar,
                  std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + scalar * c[i];
}

FTPLAN_VECTOR_CLONES
void adamw_step(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, std::size_t n,
                const AdamW& h, int step) {
  const float decay = 1.0f - h.lr * h.weight_decay;
  const float b1 = h.beta1, b2 = h.beta2, one_b1 = 1.0f - h.beta1, one_b2 = 1.0f - h.beta2;
  const float bc1 = 1.0f - std::pow(h.beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(h.beta2, static_cast<float>(step));
  const float step_size = h.lr / bc1;
  const float inv_sqrt_bc2 = 1.0f / std::sqrt(bc2);
  const float eps = h.eps;
  for (std::size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = b1 * m[i] + one_b1 * gi;
    const float vi = b2 * v[i] + one_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
  }
}

}  // namespace ftplan::runtime
