#include "common/least_squares.hpp"

#include <cmath>

#include <Eigen/Dense>

namespace ftplan {

std::optional<LineFit> fit_line(const std::vector<double>& x, const std::vector<double>& y,
                                const std::vector<double>& weights) {
  if (x.size() != y.size() || (!weights.empty() && weights.size() != x.size())) return std::nullopt;
  // Rows of positive weight, each scaled by sqrt(w_i): then ordinary least squares on the scaled
  // system is the weighted problem (Björck, "Numerical Methods for Least Squares Problems", 4.4).
  std::vector<std::size_t> keep;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double w = weights.empty() ? 1.0 : weights[i];
    if (!std::isfinite(x[i]) || !std::isfinite(y[i]) || !std::isfinite(w)) return std::nullopt;
    if (w > 0) keep.push_back(i);
  }
  const auto n = static_cast<Eigen::Index>(keep.size());
  if (n < 2) return std::nullopt;
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd b(n);
  for (Eigen::Index r = 0; r < n; ++r) {
    const std::size_t i = keep[static_cast<std::size_t>(r)];
    const double w = weights.empty() ? 1.0 : weights[i];
    const double s = std::sqrt(w);
    a(r, 0) = s;
    a(r, 1) = s * x[i];
    b(r) = s * y[i];
  }
  // Householder QR with column pivoting rather than the normal equations: x in bytes (1e3..1e9)
  // beside a column of ones squares a condition number that is already large (Golub and Van Loan,
  // "Matrix Computations", 4th ed., 5.3.7). The rank says whether two distinct x were given; the
  // threshold is relative, so a line through points at 1e3 and 1e9 bytes is still full rank.
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(a);
  if (qr.rank() < 2) return std::nullopt;
  const Eigen::Vector2d c = qr.solve(b);
  LineFit f;
  f.intercept = c(0);
  f.slope = c(1);
  f.points = keep.size();
  f.rms_residual = std::sqrt((a * c - b).squaredNorm() / static_cast<double>(n));
  return f;
}

std::vector<double> relative_weights(const std::vector<double>& y) {
  std::vector<double> w;
  w.reserve(y.size());
  for (const double v : y) w.push_back(v != 0 ? 1.0 / (v * v) : 0.0);
  return w;
}

}  // namespace ftplan
