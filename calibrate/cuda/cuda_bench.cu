// The GPU calibration: cuBLASLt GEMMs over the shapes a transformer layer runs, device-memory and
// host<->device copy bandwidth, attention matmuls, NCCL collectives, and NVML power per kernel class.
// Timing: CUDA events around back-to-back calls after warm-up; medians over repeats.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#ifdef FTPLAN_HAVE_NCCL
#include <nccl.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>

#include "calibrate/cuda/cuda_bench.hpp"
#include "calibrate/cuda/nvml.hpp"
#include "common/error.hpp"
#include "common/units.hpp"
#include "runtime/cuda_library.hpp"
#include "runtime/measure.hpp"

namespace ftplan::calibrate::gpu {

using hardware::CopyDirection;
using hardware::Dtype;

namespace {

// Text from parts (fmt's compile-time format checks do not survive nvcc's front end, so this file
// does without fmt).
template <class... T>
std::string cat(const T&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// cuBLAS, cuBLASLt and NCCL are opened at run time, when the GPU calibration first needs them:
// linked, these libraries (hundreds of MB with static initializers) load at every start of the
// ftplan command, ~0.4 s on the dev VM, for the one verb that uses them. Names go through the
// headers' macros (cublasCreate is cublasCreate_v2), so the symbols are those the headers declare.
#define FTPLAN_STR2(x) #x
#define FTPLAN_STR(x) FTPLAN_STR2(x)
#define FTPLAN_FN(name) decltype(&::name) name = nullptr;
struct Libraries {
  std::string error;  // why cuBLAS could not be loaded ("" = loaded)
  bool nccl = false;  // NCCL loaded (optional: collectives are skipped without it)
  FTPLAN_FN(cublasLtMatrixLayoutDestroy)
  FTPLAN_FN(cublasLtMatrixLayoutCreate)
  FTPLAN_FN(cublasSetStream)
  FTPLAN_FN(cublasLtMatmulDescSetAttribute)
  FTPLAN_FN(cublasLtMatmulDescCreate)
  FTPLAN_FN(cublasLtMatmul)
  FTPLAN_FN(cublasLtCreate)
  // (Overloaded in C++: the exported one takes a cublasComputeType_t.)
  cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                               const void*, const void*, cudaDataType, int, long long, const void*,
                                               cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                               long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  FTPLAN_FN(cublasCreate)
  FTPLAN_FN(cublasLtMatmulPreferenceSetAttribute)
  FTPLAN_FN(cublasLtMatmulPreferenceDestroy)
  FTPLAN_FN(cublasLtMatmulPreferenceCreate)
  FTPLAN_FN(cublasLtMatmulDescDestroy)
  FTPLAN_FN(cublasLtMatmulAlgoGetHeuristic)
  FTPLAN_FN(cublasLtDestroy)
  FTPLAN_FN(cublasDestroy)
#ifdef FTPLAN_HAVE_NCCL
  FTPLAN_FN(ncclReduceScatter)
  FTPLAN_FN(ncclGroupStart)
  FTPLAN_FN(ncclGroupEnd)
  FTPLAN_FN(ncclCommInitAll)
  FTPLAN_FN(ncclAllReduce)
  FTPLAN_FN(ncclAllGather)
  FTPLAN_FN(ncclGetErrorString)
  FTPLAN_FN(ncclCommDestroy)
#endif
};

Libraries load_libraries() {
  Libraries l;
  // By soname through the loader's search path, else from where the build found the toolkit.
  const auto open = [&](const char* soname) { return runtime::open_library(soname, FTPLAN_CUDA_LIBRARY_DIR, l.error); };
  const auto bind = [&](void* h, auto& fn, const char* symbol) {
    return runtime::bind_symbol(h, fn, symbol, "cuBLAS", l.error);
  };
  void* lt = open("libcublasLt.so." FTPLAN_STR(CUBLAS_VER_MAJOR));
  void* blas = open("libcublas.so." FTPLAN_STR(CUBLAS_VER_MAJOR));
  bind(lt, l.cublasLtMatrixLayoutDestroy, FTPLAN_STR(cublasLtMatrixLayoutDestroy));
  bind(lt, l.cublasLtMatrixLayoutCreate, FTPLAN_STR(cublasLtMatrixLayoutCreate));
  bind(lt, l.cublasLtMatmulDescSetAttribute, FTPLAN_STR(cublasLtMatmulDescSetAttribute));
  bind(lt, l.cublasLtMatmulDescCreate, FTPLAN_STR(cublasLtMatmulDescCreate));
  bind(lt, l.cublasLtMatmul, FTPLAN_STR(cublasLtMatmul));
  bind(lt, l.cublasLtCreate, FTPLAN_STR(cublasLtCreate));
  bind(lt, l.cublasLtMatmulPreferenceSetAttribute, FTPLAN_STR(cublasLtMatmulPreferenceSetAttribute));
  bind(lt, l.cublasLtMatmulPreferenceDestroy, FTPLAN_STR(cublasLtMatmulPreferenceDestroy));
  bind(lt, l.cublasLtMatmulPreferenceCreate, FTPLAN_STR(cublasLtMatmulPreferenceCreate));
  bind(lt, l.cublasLtMatmulDescDestroy, FTPLAN_STR(cublasLtMatmulDescDestroy));
  bind(lt, l.cublasLtMatmulAlgoGetHeuristic, FTPLAN_STR(cublasLtMatmulAlgoGetHeuristic));
  bind(lt, l.cublasLtDestroy, FTPLAN_STR(cublasLtDestroy));
  bind(blas, l.cublasSetStream, FTPLAN_STR(cublasSetStream));
  bind(blas, l.cublasGemmStridedBatchedEx, FTPLAN_STR(cublasGemmStridedBatchedEx));
  bind(blas, l.cublasCreate, FTPLAN_STR(cublasCreate));
  bind(blas, l.cublasDestroy, FTPLAN_STR(cublasDestroy));
#ifdef FTPLAN_HAVE_NCCL
  // NCCL is optional: without it (or a symbol of it) the collectives are skipped, not an error.
  std::string nccl_error;
  void* n = runtime::open_library("libnccl.so." FTPLAN_STR(NCCL_MAJOR), FTPLAN_NCCL_LIBRARY_DIR, nccl_error);
  const auto bind_nccl = [&](auto& fn, const char* symbol) {
    return runtime::bind_symbol(n, fn, symbol, "NCCL", nccl_error);
  };
  l.nccl =
      bind_nccl(l.ncclReduceScatter, FTPLAN_STR(ncclReduceScatter)) &&
      bind_nccl(l.ncclGroupStart, FTPLAN_STR(ncclGroupStart)) && bind_nccl(l.ncclGroupEnd, FTPLAN_STR(ncclGroupEnd)) &&
      bind_nccl(l.ncclCommInitAll, FTPLAN_STR(ncclCommInitAll)) &&
      bind_nccl(l.ncclAllReduce, FTPLAN_STR(ncclAllReduce)) && bind_nccl(l.ncclAllGather, FTPLAN_STR(ncclAllGather)) &&
      bind_nccl(l.ncclGetErrorString, FTPLAN_STR(ncclGetErrorString)) &&
      bind_nccl(l.ncclCommDestroy, FTPLAN_STR(ncclCommDestroy));
#endif
  return l;
}

// Loaded once, on first use (probe_cuda calls it first).
const Libraries& lib() {
  static const Libraries libraries = load_libraries();
  return libraries;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw SystemError(cat(what, ": ", cudaGetErrorString(e)));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw SystemError(cat(what, ": cuBLAS status ", static_cast<int>(s)));
}
#ifdef FTPLAN_HAVE_NCCL
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw SystemError(cat(what, ": ", lib().ncclGetErrorString(r)));
}
#endif
#define FTPLAN_CUDA(call) check((call), #call)

std::string version_text(int v) { return cat(v / 1000, ".", (v % 1000) / 10); }

// Device memory freed on scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { FTPLAN_CUDA(cudaMalloc(&p, std::max<std::size_t>(bytes, 256))); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

struct PinnedBuffer {
  void* p = nullptr;
  explicit PinnedBuffer(std::size_t bytes) { FTPLAN_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocDefault)); }
  ~PinnedBuffer() { cudaFreeHost(p); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
};

struct Event {
  cudaEvent_t e{};
  Event() { FTPLAN_CUDA(cudaEventCreate(&e)); }
  ~Event() { cudaEventDestroy(e); }
};

struct Stream {
  cudaStream_t s{};
  Stream() { FTPLAN_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
};

// Values in [-1, 1) from a hash of the index: non-zero data, so the math units and the power draw
// are those of real training, not of multiplying zeros.
__device__ float hash_unit(std::size_t i, unsigned seed) {
  unsigned x = static_cast<unsigned>(i) * 2654435761u ^ seed;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return static_cast<float>(x & 0xffffff) / 8388608.0f - 1.0f;
}

template <class T>
__global__ void fill_kernel(T* p, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = T(hash_unit(i, seed));
}

void fill(void* p, Dtype d, std::size_t n, unsigned seed, cudaStream_t s) {
  const dim3 grid(1024), block(256);
  switch (d) {
    case Dtype::fp32:
    case Dtype::tf32: fill_kernel<<<grid, block, 0, s>>>(static_cast<float*>(p), n, seed); break;
    case Dtype::bf16: fill_kernel<<<grid, block, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed); break;
    case Dtype::fp16: fill_kernel<<<grid, block, 0, s>>>(static_cast<__half*>(p), n, seed); break;
    case Dtype::fp8: fill_kernel<<<grid, block, 0, s>>>(static_cast<__nv_fp8_e4m3*>(p), n, seed); break;
    default: throw UnsupportedError("no GEMM in this dtype");
  }
  FTPLAN_CUDA(cudaGetLastError());
}

// Times `launch` (which enqueues one call on `s`): warm-up, then enough back-to-back calls per sample
// to last `min_sample_s`, `repeats` samples. Returns seconds per call, one per sample.
std::vector<double> time_calls(const std::function<void()>& launch, cudaStream_t s, int repeats, double min_sample_s) {
  Event a, b;
  for (int i = 0; i < 2; ++i) launch();
  FTPLAN_CUDA(cudaEventRecord(a.e, s));
  launch();
  FTPLAN_CUDA(cudaEventRecord(b.e, s));
  FTPLAN_CUDA(cudaEventSynchronize(b.e));
  float ms = 0;
  FTPLAN_CUDA(cudaEventElapsedTime(&ms, a.e, b.e));
  const int calls = std::clamp(static_cast<int>(std::ceil(min_sample_s * 1e3 / std::max(ms, 1e-3f))), 1, 1000);
  std::vector<double> per_call;
  for (int r = 0; r < repeats; ++r) {
    FTPLAN_CUDA(cudaEventRecord(a.e, s));
    for (int c = 0; c < calls; ++c) launch();
    FTPLAN_CUDA(cudaEventRecord(b.e, s));
    FTPLAN_CUDA(cudaEventSynchronize(b.e));
    FTPLAN_CUDA(cudaEventElapsedTime(&ms, a.e, b.e));
    per_call.push_back(ms * 1e-3 / calls);
  }
  return per_call;
}

// Keeps enqueueing `launch` for `seconds` (synchronising every few calls so the queue stays short).
void run_for(const std::function<void()>& launch, cudaStream_t s, double seconds) {
  const double end = runtime::now_s() + seconds;
  while (runtime::now_s() < end) {
    for (int i = 0; i < 4; ++i) launch();
    FTPLAN_CUDA(cudaStreamSynchronize(s));
  }
}

// ---------------------------------------------------------------------------------------------
// GEMMs through cuBLASLt. All in the "TN" layout (A transposed, column-major), which FP8 requires
// and which is cuBLAS's fastest for the others too: C[m x n] = op(A)[m x k] B[k x n].

struct LtTypes {
  cudaDataType_t ab, c;
  cublasComputeType_t compute;
};

LtTypes lt_types(Dtype d) {
  switch (d) {
    case Dtype::fp32: return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case Dtype::tf32: return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
    case Dtype::bf16: return {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    case Dtype::fp16: return {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case Dtype::fp8: return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F};  // bf16 output, as Transformer Engine
    default: throw UnsupportedError("no GEMM in this dtype");
  }
}

std::size_t element_bytes(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF:
    case CUDA_R_16F: return 2;
    default: return 1;
  }
}

class LtGemm {
 public:
  LtGemm(cublasLtHandle_t lt, Dtype d, std::int64_t m, std::int64_t n, std::int64_t k, void* ws, std::size_t ws_bytes)
      : lt_(lt), ws_(ws), ws_bytes_(ws_bytes) {
    const LtTypes t = lt_types(d);
    check(lib().cublasLtMatmulDescCreate(&desc_, t.compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    check(lib().cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a), "TRANSA");
    check(lib().cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b), "TRANSB");
    check(lib().cublasLtMatrixLayoutCreate(&a_, t.ab, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k),
          "layout A");
    check(lib().cublasLtMatrixLayoutCreate(&b_, t.ab, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k),
          "layout B");
    check(lib().cublasLtMatrixLayoutCreate(&c_, t.c, static_cast<uint64_t>(m), static_cast<uint64_t>(n), m),
          "layout C");
    check(lib().cublasLtMatmulPreferenceCreate(&pref_), "preference");
    check(lib().cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes_,
                                                     sizeof ws_bytes_),
          "workspace preference");
    int found = 0;
    const cublasStatus_t s = lib().cublasLtMatmulAlgoGetHeuristic(lt_, desc_, a_, b_, c_, c_, pref_, 1, &heur_, &found);
    supported_ = s == CUBLAS_STATUS_SUCCESS && found > 0;
    bytes_a_ = static_cast<std::size_t>(m) * static_cast<std::size_t>(k) * element_bytes(t.ab);
    bytes_b_ = static_cast<std::size_t>(k) * static_cast<std::size_t>(n) * element_bytes(t.ab);
    bytes_c_ = static_cast<std::size_t>(m) * static_cast<std::size_t>(n) * element_bytes(t.c);
  }
  ~LtGemm() {
    lib().cublasLtMatmulPreferenceDestroy(pref_);
    lib().cublasLtMatrixLayoutDestroy(c_);
    lib().cublasLtMatrixLayoutDestroy(b_);
    lib().cublasLtMatrixLayoutDestroy(a_);
    lib().cublasLtMatmulDescDestroy(desc_);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  bool supported() const { return supported_; }
  std::size_t bytes_a() const { return bytes_a_; }
  std::size_t bytes_b() const { return bytes_b_; }
  std::size_t bytes_c() const { return bytes_c_; }
  void run(const void* a, const void* b, void* c, cudaStream_t s) const {
    const float alpha = 1.0f, beta = 0.0f;
    check(lib().cublasLtMatmul(lt_, desc_, &alpha, a, a_, b, b_, &beta, c, c_, c, c_, &heur_.algo, ws_, ws_bytes_, s),
          "cublasLtMatmul");
  }

 private:
  cublasLtHandle_t lt_;
  void* ws_;
  std::size_t ws_bytes_;
  cublasLtMatmulDesc_t desc_{};
  cublasLtMatrixLayout_t a_{}, b_{}, c_{};
  cublasLtMatmulPreference_t pref_{};
  cublasLtMatmulHeuristicResult_t heur_{};
  bool supported_ = false;
  std::size_t bytes_a_ = 0, bytes_b_ = 0, bytes_c_ = 0;
};

struct LtHandle {
  cublasLtHandle_t h{};
  LtHandle() { check(lib().cublasLtCreate(&h), "cublasLtCreate"); }
  ~LtHandle() { lib().cublasLtDestroy(h); }
};

bool dtype_supported(Dtype d, int major, int minor) {
  switch (d) {
    case Dtype::fp8: return major * 10 + minor >= 89;  // Ada (8.9) and Hopper (9.0) onwards
    case Dtype::bf16:
    case Dtype::tf32: return major >= 8;  // Ampere onwards
    default: return true;
  }
}

}  // namespace

CudaStatus probe_cuda() {
  CudaStatus s;
  s.built = true;
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  s.runtime_version = version_text(runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    s.reason = "no CUDA device found (no NVIDIA driver is installed)";
    return s;
  }
  s.driver_version = version_text(driver);
  Nvml nvml;
  if (nvml.ok())
    if (auto v = nvml.driver_version(); !v.empty()) s.driver_version = v;
  // Check the driver supports the toolkit before running anything (else every call fails with
  // cudaErrorInsufficientDriver).
  // CUDA's minor-version compatibility lets a driver of the same major version run the toolkit's code.
  if (driver / 1000 < runtime / 1000) {
    s.reason = cat("the driver supports CUDA ", version_text(driver), " but ftplan was built with CUDA ",
                   version_text(runtime), ": update the driver");
    return s;
  }
  const cudaError_t e = cudaGetDeviceCount(&s.devices);
  if (e != cudaSuccess || s.devices == 0) {
    s.devices = 0;
    s.reason = cat("no CUDA device found (", e == cudaSuccess ? "none visible" : cudaGetErrorString(e), ")");
    return s;
  }
  if (!lib().error.empty()) {
    s.reason = cat("cuBLAS is not installed where the loader finds it: ", lib().error);
    return s;
  }
  s.usable = true;
  return s;
}

int CudaPlan::steps() const {
  // identity, GEMMs per dtype, attention, HBM, copies, collectives, power
  // Power is measured inside the steps, right after the benchmark of each kernel class, while its buffers live.
  return 1 + static_cast<int>(dtypes.size()) + 1 + 1 + 1 + 1;
}

CudaResults measure_cuda(const CudaPlan& plan, Progress& progress, int first_step, int total) {
  CudaResults out;
  int step = first_step;
  Nvml nvml;
  int devices = 0;
  FTPLAN_CUDA(cudaGetDeviceCount(&devices));

  progress.step(step++, total, "GPU: devices");
  std::vector<void*> nvml_devices;
  for (int d = 0; d < devices; ++d) {
    cudaDeviceProp prop{};
    FTPLAN_CUDA(cudaGetDeviceProperties(&prop, d));
    hardware::ProfileGpu g;
    g.index = d;
    g.name = prop.name;
    g.compute_capability = cat(prop.major, ".", prop.minor);
    g.memory_bytes = static_cast<double>(prop.totalGlobalMem);
    char bus[32] = {};
    void* nd = nullptr;
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, d) == cudaSuccess) nd = nvml.device_by_pci_bus_id(bus);
    g.pcie_gen = nvml.max_pcie_gen(nd);
    g.pcie_lanes = nvml.max_pcie_width(nd);
    nvml_devices.push_back(nd);
    out.gpus.push_back(g);
  }
  const hardware::ProfileGpu& g0 = out.gpus.at(0);
  const hardware::GpuSpec* spec = nullptr;
  if (plan.catalog) {
    spec = plan.catalog_gpu.empty() ? match_catalog_gpu(*plan.catalog, g0.name, g0.memory_bytes)
                                    : plan.catalog->gpu(plan.catalog_gpu);
    if (!spec)
      progress.note(cat("GPU '", g0.name,
                        "' matches no single catalog entry (--gpu NAME names one): datasheet bounds are not shown"));
  }
  const double pcie_Bps = g0.pcie_gen > 0 ? hardware::PcieLink{g0.pcie_gen, g0.pcie_lanes}.bandwidth_Bps()
                          : spec          ? spec->host_link.bandwidth_Bps()
                                          : 0;
  const std::string pcie_name =
      g0.pcie_gen > 0 ? cat("PCIe ", g0.pcie_gen, ".0 x", g0.pcie_lanes) : "catalog host link";
  int major = 0, minor = 0;
  std::sscanf(g0.compute_capability.c_str(), "%d.%d", &major, &minor);

  FTPLAN_CUDA(cudaSetDevice(0));
  Stream stream;
  const cudaStream_t s = stream.s;
  LtHandle lt;
  const std::size_t ws_bytes = 32u << 20;
  DeviceBuffer workspace(ws_bytes);

  // Power of device 0 while `load` runs back to back for the power window (nullptr: idle).
  const bool power = plan.measure_power && nvml.ok() && nvml_devices[0];
  if (plan.measure_power && !power)
    progress.note("power: NVML is not available (libnvidia-ml.so.1 not loadable): not measured");
  const auto measure_power = [&](const std::string& cls, const std::function<void()>& load) {
    if (!power) return;
    FTPLAN_CUDA(cudaDeviceSynchronize());
    PowerSampler sampler(nvml, nvml_devices[0]);
    sampler.start();
    if (load)
      run_for(load, s, plan.power_window_s);
    else
      std::this_thread::sleep_for(std::chrono::duration<double>(plan.power_window_s));
    FTPLAN_CUDA(cudaDeviceSynchronize());
    hardware::PowerSample row;
    row.gpu = 0;
    row.kernel_class = cls;
    row.samples = sampler.stop();
    row.power_w = runtime::median(row.samples);
    out.comparisons.push_back({"power", cls, "W", row.power_w, runtime::relative_spread(row.samples),
                               spec ? spec->tdp_w : 0, spec ? "TDP" : "", 0, 0, ""});
    out.power.push_back(row);
  };
  measure_power("idle", nullptr);

  // --- GEMMs -----------------------------------------------------------------------------------
  std::size_t free_bytes = 0, total_bytes = 0;
  FTPLAN_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  for (const Dtype d : plan.dtypes) {
    progress.step(step++, total, cat("GPU: ", hardware::to_string(d), " GEMMs, ", plan.gemms.size(), " shapes"));
    if (!dtype_supported(d, major, minor)) {
      progress.note(cat("GPU ", g0.name, " (compute ", g0.compute_capability, ") has no ", hardware::to_string(d),
                        " tensor cores: skipped"));
      continue;
    }
    // One set of buffers, sized for the largest shapes that fit in 80% of the free memory together
    // (a 24 GB card cannot hold a 70B LM head's fp32 weight gradient: those shapes are skipped).
    std::vector<std::unique_ptr<LtGemm>> gemms;
    std::vector<bool> fits(plan.gemms.size(), true);
    for (const auto& shape : plan.gemms)
      gemms.push_back(std::make_unique<LtGemm>(lt.h, d, shape.m, shape.n, shape.k, workspace.p, ws_bytes));
    std::size_t max_a = 0, max_b = 0, max_c = 0;
    int too_big = 0;
    for (;;) {
      max_a = max_b = max_c = 0;
      std::size_t biggest = gemms.size(), biggest_bytes = 0;
      for (std::size_t i = 0; i < gemms.size(); ++i) {
        if (!fits[i]) continue;
        const auto& g = *gemms[i];
        max_a = std::max(max_a, g.bytes_a());
        max_b = std::max(max_b, g.bytes_b());
        max_c = std::max(max_c, g.bytes_c());
        if (g.bytes_a() + g.bytes_b() + g.bytes_c() > biggest_bytes)
          biggest = i, biggest_bytes = g.bytes_a() + g.bytes_b() + g.bytes_c();
      }
      if (biggest == gemms.size() ||
          static_cast<double>(max_a + max_b + max_c) <= 0.8 * static_cast<double>(free_bytes))
        break;
      fits[biggest] = false;
      ++too_big;
    }
    if (too_big > 0)
      progress.note(cat(hardware::to_string(d), ": ", too_big, " GEMM shapes do not fit in device memory: skipped"));
    auto a = std::make_unique<DeviceBuffer>(max_a);
    auto b = std::make_unique<DeviceBuffer>(max_b);
    auto c = std::make_unique<DeviceBuffer>(max_c);
    const LtTypes t = lt_types(d);
    fill(a->p, d, max_a / element_bytes(t.ab), 1, s);
    fill(b->p, d, max_b / element_bytes(t.ab), 2, s);
    const double peak = spec ? spec->peak_for(d) : 0;
    std::size_t largest = plan.gemms.size();
    int skipped_big = 0;
    for (std::size_t i = 0; i < plan.gemms.size(); ++i) {
      const GemmShape& shape = plan.gemms[i];
      if (!fits[i]) continue;
      if (d == Dtype::fp32 && shape.flops() > plan.max_fp32_flops) {
        ++skipped_big;
        continue;
      }
      if (!gemms[i]->supported()) {
        progress.note(cat("cuBLASLt has no ", hardware::to_string(d), " algorithm for m=", shape.m, " n=", shape.n,
                          " k=", shape.k, ": skipped"));
        continue;
      }
      const LtGemm& gm = *gemms[i];
      const auto seconds = time_calls([&] { gm.run(a->p, b->p, c->p, s); }, s, plan.repeats, plan.min_sample_s);
      hardware::GemmSample row;
      row.dtype = d;
      row.op = shape.op;
      row.m = shape.m;
      row.n = shape.n;
      row.k = shape.k;
      for (double sec : seconds) row.samples.push_back(shape.flops() / sec);
      row.flops_per_s = runtime::median(row.samples);
      row.peak_flops_per_s = peak;
      out.gemm.push_back(row);
      if (largest == plan.gemms.size() || shape.flops() > plan.gemms[largest].flops()) largest = i;
      out.comparisons.push_back(
          {"gemm", cat(hardware::to_string(d), " ", shape.op, " (", shape.m, "x", shape.n, "x", shape.k, ")"), "FLOP/s",
           row.flops_per_s, runtime::relative_spread(row.samples), peak, peak > 0 ? "datasheet dense peak" : "", 0, 0,
           ""});
    }
    if (skipped_big > 0)
      progress.note(cat("fp32: ", skipped_big, " shapes above ", plan.max_fp32_flops / 1e12,
                        " TFLOP per call skipped to keep the run short"));
    if (largest < plan.gemms.size()) {
      const LtGemm& gm = *gemms[largest];
      measure_power(std::string("gemm_") + hardware::to_string(d), [&] { gm.run(a->p, b->p, c->p, s); });
    }
  }

  // --- Attention matmuls (cuBLAS strided-batched, bf16) ----------------------------------------
  progress.step(step++, total, "GPU: attention matmuls");
  if (dtype_supported(Dtype::bf16, major, minor)) {
    cublasHandle_t blas{};
    check(lib().cublasCreate(&blas), "cublasCreate");
    check(lib().cublasSetStream(blas, s), "cublasSetStream");
    const std::int64_t batch = 1, heads = 32, head_dim = 128;
    for (const std::int64_t seq : plan.attention_seqs) {
      const std::int64_t bh = batch * heads;
      const std::size_t qkv = static_cast<std::size_t>(bh * seq * head_dim) * 2;
      const std::size_t scores = static_cast<std::size_t>(bh * seq * seq) * 2;
      DeviceBuffer q(qkv), k(qkv), v(qkv), o(qkv), p(scores);
      fill(q.p, Dtype::bf16, qkv / 2, 3, s);
      fill(k.p, Dtype::bf16, qkv / 2, 4, s);
      fill(v.p, Dtype::bf16, qkv / 2, 5, s);
      fill(p.p, Dtype::bf16, scores / 2, 6, s);
      const float alpha = 1.0f, beta = 0.0f;
      const int sq = static_cast<int>(seq), hd = static_cast<int>(head_dim);
      // Scores S = Q K^T (seq x seq per head), then O = P V (seq x head_dim per head); column-major.
      const auto launch = [&] {
        check(lib().cublasGemmStridedBatchedEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, sq, sq, hd, &alpha, k.p, CUDA_R_16BF, hd,
                                               seq * head_dim, q.p, CUDA_R_16BF, hd, seq * head_dim, &beta, p.p,
                                               CUDA_R_16BF, sq, seq * seq, static_cast<int>(bh), CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT),
              "attention QK^T");
        check(lib().cublasGemmStridedBatchedEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, sq, sq, &alpha, v.p, CUDA_R_16BF, hd,
                                               seq * head_dim, p.p, CUDA_R_16BF, sq, seq * seq, &beta, o.p, CUDA_R_16BF,
                                               hd, seq * head_dim, static_cast<int>(bh), CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT),
              "attention PV");
      };
      const auto seconds = time_calls(launch, s, plan.repeats, plan.min_sample_s);
      hardware::AttentionSample row;
      row.dtype = Dtype::bf16;
      row.impl = "cublas-matmuls";
      row.pass = "fwd";
      row.batch = batch;
      row.heads = heads;
      row.kv_heads = heads;
      row.seq = seq;
      row.head_dim = head_dim;
      row.causal = false;
      const double flops = 4.0 * static_cast<double>(batch * heads) * static_cast<double>(seq) *
                           static_cast<double>(seq) * static_cast<double>(head_dim);
      for (double sec : seconds) row.samples.push_back(flops / sec);
      row.flops_per_s = runtime::median(row.samples);
      const double peak = spec ? spec->peak_for(Dtype::bf16) : 0;
      out.comparisons.push_back({"attention", cat("QK^T+PV bf16 seq ", seq, " x ", heads, " heads"), "FLOP/s",
                                 row.flops_per_s, runtime::relative_spread(row.samples), peak,
                                 peak > 0 ? "datasheet bf16" : "", 0, 0, ""});
      out.attention.push_back(row);
    }
    lib().cublasDestroy(blas);
  }
  progress.note(
      "attention: fused cuDNN SDPA is not measured (it needs the cudnn-frontend headers, which neither "
      "the CUDA toolkit nor Debian ships); the two attention matmuls are timed through cuBLAS instead");

  // --- HBM bandwidth ------------------------------------------------------------------------
  progress.step(step++, total, "GPU: device memory bandwidth");
  std::function<void()> hbm_load;
  DeviceBuffer hbm_src(plan.hbm_bytes), hbm_dst(plan.hbm_bytes);
  {
    FTPLAN_CUDA(cudaMemsetAsync(hbm_src.p, 1, plan.hbm_bytes, s));
    hbm_load = [&] { FTPLAN_CUDA(cudaMemcpyAsync(hbm_dst.p, hbm_src.p, plan.hbm_bytes, cudaMemcpyDeviceToDevice, s)); };
    const auto seconds = time_calls(hbm_load, s, plan.repeats, plan.min_sample_s);
    hardware::MemorySample row;
    row.gpu = 0;
    row.bytes = static_cast<double>(plan.hbm_bytes);
    for (double sec : seconds) row.samples.push_back(2.0 * row.bytes / sec);  // read + write
    row.bandwidth_Bps = runtime::median(row.samples);
    row.bound_Bps = spec ? spec->memory_bandwidth_Bps : 0;
    out.comparisons.push_back({"memory", cat("device copy ", ftplan::format_bytes(row.bytes)), "B/s", row.bandwidth_Bps,
                               runtime::relative_spread(row.samples), row.bound_Bps,
                               row.bound_Bps > 0 ? "datasheet HBM" : "", 0, 0, ""});
    out.memory.push_back(row);
    measure_power("hbm_copy", hbm_load);
  }

  // --- Host <-> device copies ---------------------------------------------------------------
  progress.step(step++, total, "GPU: host<->device copies");
  std::function<void()> h2d_load;
  std::size_t max_copy = 0;
  for (auto b : plan.copy_sizes) max_copy = std::max(max_copy, b);
  PinnedBuffer pinned_h(std::max<std::size_t>(max_copy, 1)), pinned_h2(std::max<std::size_t>(max_copy, 1));
  std::unique_ptr<char[]> pageable(new char[std::max<std::size_t>(max_copy, 1)]);
  std::memset(pinned_h.p, 1, max_copy);
  std::memset(pinned_h2.p, 1, max_copy);
  std::memset(pageable.get(), 1, max_copy);
  DeviceBuffer dev_a(max_copy), dev_b(max_copy);
  Stream s2;
  for (const std::size_t bytes : plan.copy_sizes) {
    struct Case {
      CopyDirection dir;
      bool pinned;
    };
    for (const Case cs :
         {Case{CopyDirection::h2d, true}, Case{CopyDirection::d2h, true}, Case{CopyDirection::h2d, false},
          Case{CopyDirection::d2h, false}, Case{CopyDirection::bidir, true}}) {
      void* host = cs.pinned ? pinned_h.p : static_cast<void*>(pageable.get());
      std::function<void()> launch;
      Event fork, join;
      if (cs.dir == CopyDirection::h2d)
        launch = [&, host, bytes] { FTPLAN_CUDA(cudaMemcpyAsync(dev_a.p, host, bytes, cudaMemcpyHostToDevice, s)); };
      else if (cs.dir == CopyDirection::d2h)
        launch = [&, host, bytes] { FTPLAN_CUDA(cudaMemcpyAsync(host, dev_a.p, bytes, cudaMemcpyDeviceToHost, s)); };
      else
        // Both directions at once: the d2h copy on a second stream forked from and joined back to the first.
        launch = [&, bytes] {
          FTPLAN_CUDA(cudaEventRecord(fork.e, s));
          FTPLAN_CUDA(cudaStreamWaitEvent(s2.s, fork.e, 0));
          FTPLAN_CUDA(cudaMemcpyAsync(dev_a.p, pinned_h.p, bytes, cudaMemcpyHostToDevice, s));
          FTPLAN_CUDA(cudaMemcpyAsync(pinned_h2.p, dev_b.p, bytes, cudaMemcpyDeviceToHost, s2.s));
          FTPLAN_CUDA(cudaEventRecord(join.e, s2.s));
          FTPLAN_CUDA(cudaStreamWaitEvent(s, join.e, 0));
        };
      const auto seconds = time_calls(launch, s, plan.repeats, plan.min_sample_s);
      hardware::CopySample row;
      row.direction = cs.dir;
      row.pinned = cs.pinned;
      row.bytes = static_cast<double>(bytes);
      const double moved = cs.dir == CopyDirection::bidir ? 2.0 * row.bytes : row.bytes;
      for (double sec : seconds) row.samples.push_back(moved / sec);
      row.bandwidth_Bps = runtime::median(row.samples);
      row.bound_Bps = cs.dir == CopyDirection::bidir ? 2 * pcie_Bps : pcie_Bps;
      out.comparisons.push_back({"copy",
                                 cat(hardware::to_string(cs.dir), " ", cs.pinned ? "pinned" : "pageable", " ",
                                     ftplan::format_bytes(row.bytes)),
                                 "B/s", row.bandwidth_Bps, runtime::relative_spread(row.samples), row.bound_Bps,
                                 row.bound_Bps > 0 ? pcie_name : "", 0, 0, ""});
      out.copy.push_back(row);
    }
  }
  h2d_load = [&] { FTPLAN_CUDA(cudaMemcpyAsync(dev_a.p, pinned_h.p, max_copy, cudaMemcpyHostToDevice, s)); };
  if (max_copy > 0) measure_power("h2d_copy", h2d_load);

  // --- NCCL collectives ---------------------------------------------------------------------
  progress.step(step++, total, "GPU: NCCL collectives");
  std::function<void()> nccl_load;
#ifdef FTPLAN_HAVE_NCCL
  struct NcclState {
    std::vector<ncclComm_t> comms;
    std::vector<cudaStream_t> streams;
    std::vector<void*> send, recv;
    ~NcclState() {
      for (std::size_t i = 0; i < comms.size(); ++i) {
        cudaSetDevice(static_cast<int>(i));
        lib().ncclCommDestroy(comms[i]);
        cudaStreamDestroy(streams[i]);
        cudaFree(send[i]);
        cudaFree(recv[i]);
      }
      cudaSetDevice(0);
    }
  };
  std::unique_ptr<NcclState> nccl;
  if (devices > 1 && lib().nccl && !plan.collective_sizes.empty()) {
    nccl = std::make_unique<NcclState>();
    const int n = devices;
    nccl->comms.resize(static_cast<std::size_t>(n));
    check(lib().ncclCommInitAll(nccl->comms.data(), n, nullptr), "ncclCommInitAll");
    const std::size_t max_bytes = *std::max_element(plan.collective_sizes.begin(), plan.collective_sizes.end());
    for (int i = 0; i < n; ++i) {
      FTPLAN_CUDA(cudaSetDevice(i));
      cudaStream_t st{};
      FTPLAN_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      nccl->streams.push_back(st);
      void *sb = nullptr, *rb = nullptr;
      FTPLAN_CUDA(cudaMalloc(&sb, max_bytes));
      FTPLAN_CUDA(cudaMalloc(&rb, max_bytes));
      FTPLAN_CUDA(cudaMemset(sb, 0, max_bytes));
      nccl->send.push_back(sb);
      nccl->recv.push_back(rb);
    }
    FTPLAN_CUDA(cudaSetDevice(0));
    NcclState* st = nccl.get();
    const auto collective = [st, n](hardware::CollectiveOp op, std::size_t bytes) {
      // nccl-tests' sizes: `bytes` is the full buffer; gathers move bytes/n per rank in.
      const std::size_t count = bytes / sizeof(float);
      check(lib().ncclGroupStart(), "ncclGroupStart");
      for (int i = 0; i < n; ++i) {
        const auto u = static_cast<std::size_t>(i);
        if (op == hardware::CollectiveOp::all_reduce)
          check(lib().ncclAllReduce(st->send[u], st->recv[u], count, ncclFloat, ncclSum, st->comms[u], st->streams[u]),
                "ncclAllReduce");
        else if (op == hardware::CollectiveOp::all_gather)
          check(lib().ncclAllGather(st->send[u], st->recv[u], count / static_cast<std::size_t>(n), ncclFloat,
                                    st->comms[u], st->streams[u]),
                "ncclAllGather");
        else
          check(lib().ncclReduceScatter(st->send[u], st->recv[u], count / static_cast<std::size_t>(n), ncclFloat,
                                        ncclSum, st->comms[u], st->streams[u]),
                "ncclReduceScatter");
      }
      check(lib().ncclGroupEnd(), "ncclGroupEnd");
    };
    const auto sync_all = [st, n] {
      for (int i = 0; i < n; ++i) FTPLAN_CUDA(cudaStreamSynchronize(st->streams[static_cast<std::size_t>(i)]));
    };
    for (const auto op : {hardware::CollectiveOp::all_reduce, hardware::CollectiveOp::all_gather,
                          hardware::CollectiveOp::reduce_scatter}) {
      for (const std::size_t bytes : plan.collective_sizes) {
        for (int w = 0; w < 3; ++w) collective(op, bytes);
        sync_all();
        hardware::CollectiveSample row;
        row.op = op;
        row.ranks = n;
        row.bytes = static_cast<double>(bytes);
        // Bus bandwidth as nccl-tests (doc/PERFORMANCE.md): all-reduce algbw x 2(n-1)/n, gathers (n-1)/n.
        const double factor = op == hardware::CollectiveOp::all_reduce ? 2.0 * (n - 1) / n : double(n - 1) / n;
        for (int r = 0; r < plan.repeats; ++r) {
          const int iters = bytes >= (64u << 20) ? 5 : 20;
          const double t0 = runtime::now_s();
          for (int it = 0; it < iters; ++it) collective(op, bytes);
          sync_all();
          const double sec = (runtime::now_s() - t0) / iters;
          row.samples.push_back(row.bytes / sec * factor);
        }
        row.bus_bandwidth_Bps = runtime::median(row.samples);
        out.comparisons.push_back(
            {"collectives", cat(hardware::to_string(op), " ", n, " ranks ", ftplan::format_bytes(row.bytes)), "B/s",
             row.bus_bandwidth_Bps, runtime::relative_spread(row.samples),
             spec && spec->nvlink_bandwidth_Bps > 0 ? spec->nvlink_bandwidth_Bps : 0,
             spec && spec->nvlink_bandwidth_Bps > 0 ? "NVLink per direction (datasheet)" : "", 0, 0, ""});
        out.collectives.push_back(row);
      }
    }
    const std::size_t load_bytes = max_bytes;
    nccl_load = [collective, sync_all, load_bytes] {
      collective(hardware::CollectiveOp::all_reduce, load_bytes);
      sync_all();
    };
    measure_power("nccl", nccl_load);
  } else if (devices < 2) {
    progress.note("collectives: one GPU visible; NCCL needs at least two");
  }
#else
  progress.note("collectives: this ftplan was built without NCCL (nccl.h not found)");
#endif

  FTPLAN_CUDA(cudaStreamSynchronize(s));
  return out;
}

}  // namespace ftplan::calibrate::gpu
