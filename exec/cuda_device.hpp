// The CUDA device: the executor's Device on a real GPU (issue 18). Device memory is one
// cudaMalloc'd block handed out by an Arena under the plan's cap (a bounded allocator); GEMMs and
// attention's two matmuls are cuBLASLt matmuls at the IR's shapes, bf16 inputs with fp32
// accumulation (the plans' bf16-mixed precision); memory-bound kernels are device-to-device
// copies of their bytes; copies are cudaMemcpyAsync on the calling worker's own CUDA stream, with
// the host tier page-locked by cudaHostRegister when the plan pins it; each call is timed by CUDA
// events on its stream and waited for by blocking on its end event (the worker thread sleeps,
// leaving the host's cores to the copy, NVMe and optimizer threads).
// This header is plain C++: the implementation is cuda_device.cpp in CUDA builds
// (FTPLAN_BUILD_CUDA=ON) and no_cuda_device.cpp otherwise.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "device.hpp"

namespace ftplan::exec {

// A CUDA device of `capacity_bytes` with scratch for `workers` stream workers on GPU `index`, or
// nullptr with `why` (built without CUDA, no device, cuBLASLt not loadable, memory short).
std::unique_ptr<Device> make_cuda_device(std::uint64_t capacity_bytes, int workers, std::string& why, int index = 0);

}  // namespace ftplan::exec
