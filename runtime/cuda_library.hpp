// CUDA libraries opened at run time (dlopen) rather than linked: linked, cuBLAS, cuBLASLt and NCCL
// would load at every start of the ftplan command (~0.4 s) for the verbs that use them
// (calibrate's GPU benchmark, calibrate/cuda/cuda_bench.cu; the executor's CUDA device,
// exec/cuda_device.cpp). Header-only, so CUDA sources compiled by nvcc use it too.
#pragma once

#include <dlfcn.h>

#include <string>
#include <type_traits>

namespace ftplan::runtime {

// `soname` through the loader's search path, else from `fallback_dir` (where the build found the
// toolkit; "" for nowhere else). nullptr when neither opens; then `error`, if still empty, says
// why (the first failure of a run is the one worth reading).
inline void* open_library(const std::string& soname, const std::string& fallback_dir, std::string& error) {
  void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h && !fallback_dir.empty()) h = dlopen((fallback_dir + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h && error.empty()) {
    const char* why = dlerror();
    error = "cannot load " + soname + " (" + (why ? why : "not found") + ")";
  }
  return h;
}

// Points `fn` at `symbol` of the library `handle` (named `library` in the error); false, with
// `error` set if still empty, when the library did not open or lacks the symbol.
template <class Fn>
bool bind_symbol(void* handle, Fn& fn, const char* symbol, const std::string& library, std::string& error) {
  static_assert(std::is_pointer_v<Fn>);
  if (!handle) return false;
  fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (!fn && error.empty()) error = std::string("no ") + symbol + " in " + library;
  return fn != nullptr;
}

}  // namespace ftplan::runtime
