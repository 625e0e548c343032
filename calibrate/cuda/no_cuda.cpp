// Builds without CUDA (no nvcc found, or FTPLAN_BUILD_CUDA=OFF): the GPU part reports why it cannot run.
#include <stdexcept>

#include "calibrate/cuda/cuda_bench.hpp"
#include "common/error.hpp"

namespace ftplan::calibrate::gpu {

CudaStatus probe_cuda() {
  CudaStatus s;
  s.reason = "this ftplan was built without CUDA (no nvcc found, or FTPLAN_BUILD_CUDA=OFF)";
  return s;
}

int CudaPlan::steps() const { return 0; }

CudaResults measure_cuda(const CudaPlan&, Progress&, int, int) {
  throw UnsupportedError("this ftplan was built without CUDA");
}

}  // namespace ftplan::calibrate::gpu
