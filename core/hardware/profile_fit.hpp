// Models fitted to a calibration profile's samples by least squares (common/least_squares.hpp),
// every raw sample of every row taking part rather than two chosen rows. Each model is the one the
// simulator's own formula assumes, so its parameters can stand in for the simulator's constants.
#pragma once

#include <optional>
#include <vector>

#include "hardware/profile.hpp"

namespace ftplan::hardware {

// A copy of n bytes takes latency_s + n / bandwidth_Bps: Hockney's model of a message's time
// (R. Hockney, "The communication challenge for MPP: Intel Paragon and Meiko CS-2", Parallel
// Computing 20, 1994: t = t0 + n / r_inf), the alpha-beta model of the collective-cost literature.
// The latency is the fixed cost of each copy (DMA setup, the launch) and the bandwidth the rate
// it approaches when large.
struct CopyModel {
  double latency_s = 0;      // >= 0 (a negative intercept, noise around zero, is reported as 0)
  double bandwidth_Bps = 0;  // > 0
  std::size_t samples = 0;   // raw samples fitted
  double rms_relative = 0;   // root-mean-square of (model - measured) / measured time
};

// Fits CopyModel to the copies of `direction` and `pinned` in `rows`: each raw sample s (B/s) of a
// row of `bytes` is one time t = bytes / s, and t = latency + bytes / bandwidth is fitted with
// weights 1/t^2 (relative residuals: small copies count as much as large ones). A row without raw
// samples contributes its median. nullopt when fewer than two distinct sizes were measured or the
// fitted rate is not positive.
std::optional<CopyModel> fit_copy_model(const std::vector<CopySample>& rows, CopyDirection direction, bool pinned);

// A GEMM's achieved fraction of the dense peak against its inner dimension k:
//   fraction(k) = peak_fraction * k / (k + k0),
// i.e. each output tile pays a fixed time worth k0 steps of its k-loop besides its k steps (the
// operand pipeline's fill and the epilogue: the model of the simulator's GEMM time,
// sim::gemm_fraction, taken from XLA's measured H100 table). Written as 1 / fraction =
// 1 / peak_fraction + (k0 / peak_fraction) / k, it is linear in 1/k: Hockney's (r_inf, n_1/2)
// model again with k in place of n (Hockney and Jesshope, "Parallel Computers 2", 1988, 1.3.3).
struct GemmCurve {
  Dtype dtype = Dtype::bf16;
  double peak_fraction = 0;  // the k -> infinity rate over the dtype's dense peak (> 1: a wrong peak)
  double k0 = 0;             // the k at which half of it is reached; >= 0
  std::size_t samples = 0;
  double rms_relative = 0;  // of 1 / fraction
  double fraction(double k) const { return k > 0 ? peak_fraction * k / (k + k0) : 0; }
};

// Fits GemmCurve to the GEMMs of `dtype` in `rows` against `peak_flops_per_s` (the GPU's dense peak
// for the dtype; a row's own peak_flops_per_s when this is 0): every raw sample (FLOP/s) is one
// fraction, and 1/fraction = a + b/k is fitted with relative weights. When the samples fall with k
// (b < 0: the fixed cost is lost in the noise), k0 is 0 and 1/peak_fraction their weighted mean,
// the least-squares constant. nullopt when no sample has a peak and a k > 0, or a <= 0.
// One distinct k gives the constant model too (k0 = 0).
std::optional<GemmCurve> fit_gemm_curve(const std::vector<GemmSample>& rows, Dtype dtype, double peak_flops_per_s = 0);

}  // namespace ftplan::hardware
