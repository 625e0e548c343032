#include "hardware/profile_fit.hpp"

#include <algorithm>
#include <cmath>

#include "common/least_squares.hpp"

namespace ftplan::hardware {

std::optional<CopyModel> fit_copy_model(const std::vector<CopySample>& rows, CopyDirection direction, bool pinned) {
  std::vector<double> bytes, time_s;
  for (const auto& r : rows) {
    if (r.direction != direction || r.pinned != pinned || r.bytes <= 0) continue;
    const auto add = [&](double Bps) {
      if (Bps <= 0) return;
      bytes.push_back(r.bytes);
      time_s.push_back(r.bytes / Bps);
    };
    if (r.samples.empty()) add(r.bandwidth_Bps);
    for (const double s : r.samples) add(s);
  }
  const auto line = fit_line(bytes, time_s, relative_weights(time_s));
  if (!line || !(line->slope > 0)) return std::nullopt;
  CopyModel m;
  m.latency_s = std::max(0.0, line->intercept);
  m.bandwidth_Bps = 1.0 / line->slope;
  m.samples = line->points;
  m.rms_relative = line->rms_residual;
  return m;
}

std::optional<GemmCurve> fit_gemm_curve(const std::vector<GemmSample>& rows, Dtype dtype, double peak_flops_per_s) {
  std::vector<double> inv_k, inv_fraction;
  for (const auto& r : rows) {
    const double peak = peak_flops_per_s > 0 ? peak_flops_per_s : r.peak_flops_per_s;
    if (r.dtype != dtype || r.k <= 0 || peak <= 0) continue;
    const auto add = [&](double flops_per_s) {
      if (flops_per_s <= 0) return;
      inv_k.push_back(1.0 / static_cast<double>(r.k));
      inv_fraction.push_back(peak / flops_per_s);
    };
    if (r.samples.empty()) add(r.flops_per_s);
    for (const double s : r.samples) add(s);
  }
  if (inv_k.empty()) return std::nullopt;
  const std::vector<double> w = relative_weights(inv_fraction);
  GemmCurve c;
  c.dtype = dtype;
  c.samples = inv_k.size();
  const auto line = fit_line(inv_k, inv_fraction, w);
  double a = 0, b = 0;
  if (line && line->slope >= 0) {
    a = line->intercept;
    b = line->slope;
    c.rms_relative = line->rms_residual;
  } else {
    // The constant model 1/fraction = a: its weighted least-squares a is the weighted mean.
    double sw = 0, swy = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      sw += w[i];
      swy += w[i] * inv_fraction[i];
    }
    a = swy / sw;
    double sr = 0;
    for (std::size_t i = 0; i < w.size(); ++i) sr += w[i] * (inv_fraction[i] - a) * (inv_fraction[i] - a);
    c.rms_relative = std::sqrt(sr / static_cast<double>(w.size()));
  }
  if (!(a > 0)) return std::nullopt;
  c.peak_fraction = 1.0 / a;
  c.k0 = b / a;
  return c;
}

}  // namespace ftplan::hardware
