// Fitting a straight line to measurements by weighted least squares. Every model the project fits
// to calibration samples is linear in its two parameters once written in the right variables
// (hardware/profile_fit.hpp: a copy's time against its bytes, a GEMM's reciprocal efficiency
// against 1/k; cost/cost.hpp: a GPU's power against its activity's load share).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace ftplan {

struct LineFit {
  double intercept = 0;
  double slope = 0;
  std::size_t points = 0;
  // sqrt(sum_i w_i r_i^2 / points), r_i = y_i - (intercept + slope x_i): unweighted, the
  // root-mean-square residual; with the weights 1 / y_i^2 of relative_weights, the relative one.
  double rms_residual = 0;
  double at(double x) const { return intercept + slope * x; }
};

// The line y = intercept + slope * x minimizing sum_i w_i (y_i - intercept - slope x_i)^2 (all
// weights 1 when `weights` is empty). nullopt when the line is not determined: fewer than two
// distinct x among the points of positive weight, sizes that differ, or a value that is not finite.
std::optional<LineFit> fit_line(const std::vector<double>& x, const std::vector<double>& y,
                                const std::vector<double>& weights = {});

// Weights 1 / y_i^2: the fit then minimizes the squared *relative* residuals. The best linear
// unbiased weights are the inverse of each value's variance (Aitken 1935, "On least squares and
// linear combination of observations"); timings whose noise is a share of what they time (clock
// ramp-up, other tenants) have a variance proportional to y^2. Unweighted, the largest sizes alone
// would decide the intercept: a copy's latency would be lost in the noise of its 1 GB transfers.
std::vector<double> relative_weights(const std::vector<double>& y);

}  // namespace ftplan
