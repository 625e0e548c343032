// What the executor needs of an accelerator: bounded device memory, the step's kernels at the IR's
// shapes, and copies between its memory and host buffers. The CPU device (cpu_device.hpp) plays a
// GPU on any machine: an arena of host memory as HBM, Eigen GEMMs on a fixed thread count, memcpy
// as the copy engine. The CUDA device (cuda_device.hpp) implements the same calls with one
// cudaMalloc'd block under the same cap, cuBLASLt GEMMs and cudaMemcpyAsync on each worker's
// CUDA stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ftplan::exec {

// One GEMM call of the step: C[m x n] = A[m x k] B[k x n] (the IR's forward shape) or its backward,
// dA = dC B^T and, with `weight_grad`, dB = A^T dC; `repeats` times (the op's FLOPs over its shape's).
struct GemmCall {
  std::int64_t m = 0, n = 0, k = 0;
  bool backward = false;
  bool weight_grad = false;
  int repeats = 1;
  bool input_grad = true;  // backward: run dA (false: dB alone, as validate times it)
};

// A device's check of its own kernels' results: entries of each product recomputed by a plain
// loop in double precision that shares no code with the kernels (nor with validate's rate probes),
// so a device that does less work than asked, or the wrong work, is caught (issue 40).
struct WorkCheck {
  std::uint64_t checked = 0;  // entries recomputed
  std::uint64_t wrong = 0;    // of them, outside the fp32 tolerance
  std::string first_wrong;    // the first wrong entry, in words
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string describe() const = 0;
  // Device memory, capped at capacity_bytes(): nullptr when the block does not fit.
  virtual std::byte* allocate(std::uint64_t bytes) = 0;
  virtual void release(std::byte* block) = 0;
  virtual double capacity_bytes() const = 0;
  virtual double peak_bytes() const = 0;  // high-water mark of the bytes asked for
  // Memory the kernels use beyond the tensors asked for (operand and workspace buffers), now.
  virtual double scratch_bytes() const { return 0; }
  // Kernels, run by the calling stream's worker (`worker` indexes its scratch). A GEMM with
  // `weight_grad` leaves dB in weight_gradient(worker) (k x n, column-major) for the step's
  // gradients.
  virtual void gemm(int worker, const GemmCall& call) = 0;
  // Attention as its two matmuls, S = Q K^T (m x n over k) and O = S V, `repeats` times.
  virtual void attention(int worker, std::int64_t m, std::int64_t n, std::int64_t k, int repeats) = 0;
  // A memory-bound kernel that reads and writes `bytes` of device memory in all.
  virtual void memory_bound(int worker, double bytes) = 0;
  virtual const float* weight_gradient(int worker, std::int64_t& elements) const = 0;
  // Copies between device memory and host memory (either may be the other's address on a CPU device).
  virtual void copy_to_device(std::byte* device, const std::byte* host, std::size_t bytes) = 0;
  virtual void copy_to_host(std::byte* host, const std::byte* device, std::size_t bytes) = 0;
  // Whether the host may read and write device memory through its pointers (a CPU device); else
  // every access goes through copy_to_device / copy_to_host.
  virtual bool host_addressable() const { return true; }
  // Whether the kernels run on the host's cores (a CPU device), where the copy, NVMe and CPU
  // optimizer workers could take a core from them; a GPU's kernels run on its SMs.
  virtual bool computes_on_host() const { return false; }
  // Page-locks host memory for the device's DMA engines (cudaHostRegister); false when the device
  // has none to lock it for. unpin_host undoes it.
  virtual bool pin_host(std::byte* /*host*/, std::size_t /*bytes*/) { return false; }
  virtual void unpin_host(std::byte* /*host*/) {}
  // Spot-check the kernels' results from now on (WorkCheck); work_check() says what was found.
  // A device without a check counts nothing.
  virtual void check_work(bool /*on*/) {}
  virtual WorkCheck work_check() const { return {}; }
};

}  // namespace ftplan::exec
