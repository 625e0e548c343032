// The CPU device: a GPU played by this machine (see device.hpp). Device memory is one reserved
// host buffer of `capacity_bytes` handed out by an Arena; GEMMs are Eigen matrix products in fp32,
// one thread each (Eigen without OpenMP: a fixed count; the copy and NVMe streams need the other
// cores); memory-bound kernels stream their bytes through memcpy; copies are
// memcpy on the calling stream's thread. Scratch operands of each worker live outside the cap (on
// a GPU they are the tensors the IR already holds, or registers).
#pragma once

#include <memory>
#include <vector>

#include "arena.hpp"
#include "device.hpp"

namespace ftplan::exec {

class CpuDevice final : public Device {
 public:
  // REQUIRES: capacity_bytes > 0, workers >= 1.
  CpuDevice(std::uint64_t capacity_bytes, int workers);
  ~CpuDevice() override;
  std::string describe() const override;
  std::byte* allocate(std::uint64_t bytes) override;
  void release(std::byte* block) override;
  double capacity_bytes() const override { return static_cast<double>(arena_.limit_bytes()); }
  double peak_bytes() const override { return arena_.peak_bytes(); }
  double scratch_bytes() const override;
  void gemm(int worker, const GemmCall& call) override;
  void attention(int worker, std::int64_t m, std::int64_t n, std::int64_t k, int repeats) override;
  void memory_bound(int worker, double bytes) override;
  const float* weight_gradient(int worker, std::int64_t& elements) const override;
  void copy_to_device(std::byte* device, const std::byte* host, std::size_t bytes) override;
  void copy_to_host(std::byte* host, const std::byte* device, std::size_t bytes) override;
  bool computes_on_host() const override { return true; }
  void check_work(bool on) override { check_ = on; }
  WorkCheck work_check() const override;

 private:
  struct Scratch;
  Arena arena_;
  std::byte* base_ = nullptr;
  std::vector<std::unique_ptr<Scratch>> scratch_;
  bool check_ = false;
};

}  // namespace ftplan::exec
