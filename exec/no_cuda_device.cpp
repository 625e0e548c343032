// Builds without CUDA (FTPLAN_BUILD_CUDA=OFF): there is no CUDA device to make.
#include "cuda_device.hpp"

namespace ftplan::exec {

std::unique_ptr<Device> make_cuda_device(std::uint64_t, int, std::string& why, int) {
  why = "this ftplan was built without CUDA (cmake -DFTPLAN_BUILD_CUDA=ON)";
  return nullptr;
}

}  // namespace ftplan::exec
