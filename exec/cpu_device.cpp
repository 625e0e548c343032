#include "cpu_device.hpp"

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
}  // namespace

struct CpuDevice::Scratch {
  Buffer a, b, c, grad;
  std::int64_t grad_elements = 0;
  std::vector<std::byte> stream_src, stream_dst;
};

// Twice the capacity as address space: the cap is on bytes (see Arena).
CpuDevice::CpuDevice(std::uint64_t capacity_bytes, int workers)
    : arena_(2 * capacity_bytes + (64 << 20), 4096, capacity_bytes) {
  const std::uint64_t bytes = std::max<std::uint64_t>(4096, arena_.capacity_bytes());
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error(fmt::format("cannot reserve {} bytes of device memory", bytes));
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
  for (int r = 0; r < std::max(1, g.repeats); ++r) {
    if (!g.backward) {
      Matrix A(s.a.get(m * k), m, k), B(s.b.get(k * n), k, n), C(s.c.get(m * n), m, n);
      C.noalias() = A * B;
      continue;
    }
    // dA[m x k] = dC[m x n] B^T; dB[k x n] = A^T dC.
    Matrix dC(s.c.get(m * n), m, n), B(s.b.get(k * n), k, n), dA(s.a.get(m * k + m * k) + m * k, m, k);
    if (g.input_grad) dA.noalias() = dC * B.transpose();
    if (g.weight_grad) {
      Matrix A(s.a.get(m * k), m, k), dB(s.grad.get(k * n), k, n);
      dB.noalias() = A.transpose() * dC;
      s.grad_elements = k * n;
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
