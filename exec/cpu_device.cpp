#include "cpu_device.hpp"
#include "common/error.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <Eigen/Core>

namespace ftplan::exec {

namespace {
using Matrix = Eigen::Map<Eigen::MatrixXf>;

// A worker's operand buffers, grown to the largest call seen and filled once with fixed values
// (the same for every run, so the gradients drawn from them are reproducible).
struct Buffer {
  std::vector<float> data;
  float* get(std::int64_t elements) {
    if (static_cast<std::int64_t>(data.size()) < elements) {
      const std::size_t old = data.size();
      data.resize(static_cast<std::size_t>(elements));
      for (std::size_t i = old; i < data.size(); ++i)
        data[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    }
    return data.data();
  }
};

// The work check (WorkCheck): entry (r, c) of a column-major product X Y, X rows x inner, Y
// inner x cols, each operand read plain or transposed, summed in double by a plain loop; it is
// compared with what the kernel wrote. fp32 accumulation of `inner` terms may differ from the
// double sum by ~inner x 2^-24 of the terms' magnitude; 1e-4 of it passes every honest product
// here (k up to 16384) and fails one that skips a term of any size.
struct Product {
  const float* x;
  std::int64_t x_rows;
  bool x_transposed;  // X = (stored x_rows x inner)^T: element (i, l) at x[l + i * x_rows]
  const float* y;
  std::int64_t y_rows;
  bool y_transposed;
  std::int64_t inner;
};

struct Tally {
  std::uint64_t checked = 0, wrong = 0, calls = 0;
  std::string first_wrong;
};

void check_entry(const Product& p, const float* out, std::int64_t out_rows, std::int64_t r, std::int64_t c,
                 const char* what, Tally& t) {
  double sum = 0, size = 0;
  for (std::int64_t l = 0; l < p.inner; ++l) {
    const double a = p.x_transposed ? p.x[l + r * p.x_rows] : p.x[r + l * p.x_rows];
    const double b = p.y_transposed ? p.y[c + l * p.y_rows] : p.y[l + c * p.y_rows];
    sum += a * b;
    size += std::abs(a * b);
  }
  const double got = out[r + c * out_rows];
  ++t.checked;
  if (std::abs(got - sum) <= 1e-4 * size + 1e-30) return;
  if (t.wrong++ == 0)
    t.first_wrong = fmt::format("{} entry ({}, {}) of {} terms is {:.6g}, a plain dot product gives {:.6g}", what, r, c,
                                p.inner, got, sum);
}

// Two entries of each checked product, spread over its rows and columns call by call.
void check_product(const Product& p, const float* out, std::int64_t rows, std::int64_t cols, const char* what,
                   Tally& t) {
  if (rows <= 0 || cols <= 0) return;
  const std::uint64_t n = t.calls++;
  for (std::uint64_t e = 0; e < 2; ++e) {
    const std::uint64_t h = (n * 2 + e) * 0x9E3779B97F4A7C15ULL;
    check_entry(p, out, rows, static_cast<std::int64_t>(h % static_cast<std::uint64_t>(rows)),
                static_cast<std::int64_t>((h >> 32) % static_cast<std::uint64_t>(cols)), what, t);
  }
}
}  // namespace

struct CpuDevice::Scratch {
  Buffer a, b, c, grad;
  std::int64_t grad_elements = 0;
  std::vector<std::byte> stream_src, stream_dst;
  Tally tally;  // this worker's work check
};

// Twice the capacity as address space: the cap is on bytes (see Arena).
CpuDevice::CpuDevice(std::uint64_t capacity_bytes, int workers)
    : arena_(2 * capacity_bytes + (64 << 20), 4096, capacity_bytes) {
  const std::uint64_t bytes = std::max<std::uint64_t>(4096, arena_.capacity_bytes());
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw SystemError(fmt::format("cannot reserve {} bytes of device memory", bytes));
  base_ = static_cast<std::byte*>(p);
  for (int w = 0; w < std::max(1, workers); ++w) scratch_.push_back(std::make_unique<Scratch>());
}

CpuDevice::~CpuDevice() { munmap(base_, std::max<std::uint64_t>(4096, arena_.capacity_bytes())); }

std::string CpuDevice::describe() const {
  return fmt::format("CPU device: {:.1f} MiB arena as device memory, Eigen {}.{}.{} fp32 GEMMs on 1 thread",
                     static_cast<double>(arena_.capacity_bytes()) / (1 << 20), EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION,
                     EIGEN_MINOR_VERSION);
}

std::byte* CpuDevice::allocate(std::uint64_t bytes) {
  const std::int64_t at = arena_.allocate(bytes);
  return at < 0 ? nullptr : base_ + at;
}

void CpuDevice::release(std::byte* block) {
  if (block) arena_.release(block - base_);
}

void CpuDevice::gemm(int worker, const GemmCall& g) {
  Scratch& s = *scratch_.at(static_cast<std::size_t>(worker));
  const auto m = static_cast<Eigen::Index>(g.m), n = static_cast<Eigen::Index>(g.n), k = static_cast<Eigen::Index>(g.k);
  // The work check reads the call's own sizes (g), not the maps': a kernel that shrank its maps
  // is checked against the product asked for.
  for (int r = 0; r < std::max(1, g.repeats); ++r) {
    if (!g.backward) {
      Matrix A(s.a.get(m * k), m, k), B(s.b.get(k * n), k, n), C(s.c.get(m * n), m, n);
      C.noalias() = A * B;
      if (check_)
        check_product({A.data(), g.m, false, B.data(), g.k, false, g.k}, C.data(), g.m, g.n, "GEMM C = A B", s.tally);
      continue;
    }
    // dA[m x k] = dC[m x n] B^T; dB[k x n] = A^T dC.
    Matrix dC(s.c.get(m * n), m, n), B(s.b.get(k * n), k, n), dA(s.a.get(m * k + m * k) + m * k, m, k);
    if (g.input_grad) {
      dA.noalias() = dC * B.transpose();
      if (check_)
        check_product({dC.data(), g.m, false, B.data(), g.k, true, g.n}, dA.data(), g.m, g.k, "GEMM dA = dC B^T",
                      s.tally);
    }
    if (g.weight_grad) {
      Matrix A(s.a.get(m * k), m, k), dB(s.grad.get(k * n), k, n);
      dB.noalias() = A.transpose() * dC;
      s.grad_elements = k * n;
      if (check_)
        check_product({A.data(), g.m, true, dC.data(), g.m, false, g.m}, dB.data(), g.k, g.n, "GEMM dB = A^T dC",
                      s.tally);
    }
  }
}

void CpuDevice::attention(int worker, std::int64_t m, std::int64_t n, std::int64_t k, int repeats) {
  Scratch& s = *scratch_.at(static_cast<std::size_t>(worker));
  const auto mi = static_cast<Eigen::Index>(m), ni = static_cast<Eigen::Index>(n), ki = static_cast<Eigen::Index>(k);
  for (int r = 0; r < std::max(1, repeats); ++r) {
    Matrix Q(s.a.get(mi * ki), mi, ki), K(s.b.get(ni * ki), ni, ki), S(s.c.get(mi * ni + mi * ki), mi, ni);
    S.noalias() = Q * K.transpose();
    Matrix O(s.c.get(mi * ni + mi * ki) + mi * ni, mi, ki);
    O.noalias() = S * K;  // V: the same operand buffer as K
    if (check_) {
      check_product({Q.data(), m, false, K.data(), n, true, k}, S.data(), m, n, "attention S = Q K^T", s.tally);
      check_product({S.data(), m, false, K.data(), n, false, n}, O.data(), m, k, "attention O = S V", s.tally);
    }
  }
}

void CpuDevice::memory_bound(int worker, double bytes) {
  // Read half and write half: memcpy in blocks of at most 32 MiB of source.
  Scratch& s = *scratch_.at(static_cast<std::size_t>(worker));
  std::size_t left = static_cast<std::size_t>(std::max(0.0, bytes) / 2);
  const std::size_t block = std::min<std::size_t>(left, std::size_t{32} << 20);
  if (block == 0) return;
  if (s.stream_src.size() < block) {
    s.stream_src.assign(block, std::byte{1});
    s.stream_dst.assign(block, std::byte{0});
  }
  while (left > 0) {
    const std::size_t n = std::min(left, block);
    std::memcpy(s.stream_dst.data(), s.stream_src.data(), n);
    left -= n;
  }
}

// Each worker's operand buffers (grown to the largest call seen, never shrunk) and its streaming
// buffers: what a GPU keeps in the IR's tensors, registers and workspace, the CPU device outside
// its arena.
double CpuDevice::scratch_bytes() const {
  double bytes = 0;
  for (const auto& s : scratch_)
    bytes += 4.0 * static_cast<double>(s->a.data.size() + s->b.data.size() + s->c.data.size() + s->grad.data.size()) +
             static_cast<double>(s->stream_src.size() + s->stream_dst.size());
  return bytes;
}

WorkCheck CpuDevice::work_check() const {
  WorkCheck w;
  for (const auto& s : scratch_) {
    w.checked += s->tally.checked;
    w.wrong += s->tally.wrong;
    if (w.first_wrong.empty()) w.first_wrong = s->tally.first_wrong;
  }
  return w;
}

const float* CpuDevice::weight_gradient(int worker, std::int64_t& elements) const {
  Scratch& s = *scratch_.at(static_cast<std::size_t>(worker));
  elements = s.grad_elements;
  return s.grad_elements > 0 ? s.grad.data.data() : nullptr;
}

void CpuDevice::copy_to_device(std::byte* device, const std::byte* host, std::size_t bytes) {
  std::memcpy(device, host, bytes);
}

void CpuDevice::copy_to_host(std::byte* host, const std::byte* device, std::size_t bytes) {
  std::memcpy(host, device, bytes);
}

}  // namespace ftplan::exec
