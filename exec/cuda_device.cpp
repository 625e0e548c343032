// The CUDA device (cuda_device.hpp). Compiled by the host compiler against the CUDA runtime: no
// kernels of its own (cuBLASLt's matmuls and the copy engines do the work).
#include "cuda_device.hpp"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "arena.hpp"
#include "common/error.hpp"
#include "runtime/cuda_library.hpp"

namespace ftplan::exec {

namespace {

#define FTPLAN_EXEC_STR2(x) #x
#define FTPLAN_EXEC_STR(x) FTPLAN_EXEC_STR2(x)

// cuBLASLt opened at run time (runtime/cuda_library.hpp), as calibrate's GPU benchmark opens it.
struct BlasLt {
  std::string error;
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
};

const BlasLt& blaslt() {
  static const BlasLt lib = [] {
    BlasLt l;
    const std::string soname = "libcublasLt.so." FTPLAN_EXEC_STR(CUBLAS_VER_MAJOR);
    void* h = runtime::open_library(soname, FTPLAN_CUDA_LIBRARY_DIR, l.error);
    const auto bind = [&](auto& fn, const char* symbol) { runtime::bind_symbol(h, fn, symbol, soname, l.error); };
    bind(l.create, FTPLAN_EXEC_STR(cublasLtCreate));
    bind(l.destroy, FTPLAN_EXEC_STR(cublasLtDestroy));
    bind(l.desc_create, FTPLAN_EXEC_STR(cublasLtMatmulDescCreate));
    bind(l.desc_destroy, FTPLAN_EXEC_STR(cublasLtMatmulDescDestroy));
    bind(l.desc_set, FTPLAN_EXEC_STR(cublasLtMatmulDescSetAttribute));
    bind(l.layout_create, FTPLAN_EXEC_STR(cublasLtMatrixLayoutCreate));
    bind(l.layout_destroy, FTPLAN_EXEC_STR(cublasLtMatrixLayoutDestroy));
    bind(l.pref_create, FTPLAN_EXEC_STR(cublasLtMatmulPreferenceCreate));
    bind(l.pref_destroy, FTPLAN_EXEC_STR(cublasLtMatmulPreferenceDestroy));
    bind(l.pref_set, FTPLAN_EXEC_STR(cublasLtMatmulPreferenceSetAttribute));
    bind(l.heuristic, FTPLAN_EXEC_STR(cublasLtMatmulAlgoGetHeuristic));
    bind(l.matmul, FTPLAN_EXEC_STR(cublasLtMatmul));
    return l;
  }();
  return lib;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw SystemError(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw SystemError(fmt::format("{}: cuBLASLt status {}", what, static_cast<int>(s)));
}

// The calling thread's CUDA stream and its two timing events, made on first use and destroyed
// when the thread ends (the executor starts one thread per IR stream per step).
struct ThreadStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  int device = -1;
  ~ThreadStream() {
    if (!stream) return;
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
  }
};

ThreadStream& thread_stream(int device) {
  thread_local ThreadStream t;
  if (!t.stream) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&t.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    // Blocking sync: a waiting worker sleeps instead of spinning on a core the host's copy and
    // optimizer threads need.
    check(cudaEventCreateWithFlags(&t.start, cudaEventBlockingSync), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&t.stop, cudaEventBlockingSync), "cudaEventCreate");
    t.device = device;
  }
  return t;
}

class CudaDevice final : public Device {
 public:
  CudaDevice(std::uint64_t capacity, int workers, int index)
      : index_(index), arena_(capacity + (std::uint64_t{64} << 20), 4096, capacity) {
    check(cudaSetDevice(index_), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, index_), "cudaGetDeviceProperties");
    name_ = prop.name;
    void* p = nullptr;
    check(cudaMalloc(&p, arena_.capacity_bytes()), "cudaMalloc of the device arena");
    base_ = static_cast<std::byte*>(p);
    check(blaslt().create(&handle_), "cublasLtCreate");
    scratch_.resize(static_cast<std::size_t>(std::max(1, workers)));
  }
  ~CudaDevice() override {
    for (auto& s : scratch_)
      for (void* p : {s.a, s.b, s.c, s.grad, s.workspace, s.out, s.src, s.dst})
        if (p) cudaFree(p);
    if (handle_) blaslt().destroy(handle_);
    cudaFree(base_);
  }

  std::string describe() const override {
    return fmt::format("CUDA device {} ({}): {:.1f} MiB arena as device memory, cuBLASLt bf16 GEMMs", index_, name_,
                       static_cast<double>(arena_.limit_bytes()) / (1 << 20));
  }
  std::byte* allocate(std::uint64_t bytes) override {
    const std::int64_t at = arena_.allocate(bytes);
    return at < 0 ? nullptr : base_ + at;
  }
  void release(std::byte* block) override {
    if (block) arena_.release(block - base_);
  }
  double capacity_bytes() const override { return static_cast<double>(arena_.limit_bytes()); }
  double peak_bytes() const override { return arena_.peak_bytes(); }

  void gemm(int worker, const GemmCall& g) override {
    Scratch& s = scratch(worker);
    const std::int64_t m = g.m, n = g.n, k = g.k;
    auto* A = operand(s.a, s.a_elems, m * k);
    auto* B = operand(s.b, s.b_elems, k * n);
    auto* dC = operand(s.c, s.c_elems, m * n + m * k);
    timed([&](cudaStream_t st) {
      for (int r = 0; r < std::max(1, g.repeats); ++r) {
        if (!g.backward) {
          // C[m x n] = A[m x k] B[k x n], column-major.
          matmul(s, st, false, false, m, n, k, A, m, B, k, out(s, m * n), m);
          continue;
        }
        // dA[m x k] = dC[m x n] B^T; dB[k x n] = A^T dC (fp32, for the step's gradients).
        if (g.input_grad) matmul(s, st, false, true, m, k, n, dC, m, B, k, out(s, m * k), m);
        if (g.weight_grad) matmul(s, st, true, false, k, n, m, A, m, dC, m, grad(s, k * n), k);
      }
    });
    if (g.backward && g.weight_grad) {
      s.host_grad.resize(static_cast<std::size_t>(k * n));
      check(cudaMemcpy(s.host_grad.data(), s.grad, static_cast<std::size_t>(k * n) * 4, cudaMemcpyDeviceToHost),
            "cudaMemcpy of a weight gradient");
      s.grad_elements = k * n;
    }
  }

  void attention(int worker, std::int64_t m, std::int64_t n, std::int64_t k, int repeats) override {
    // S[m x n] = Q[m x k] K^T, O[m x k] = S V (V: K's buffer), bf16 in, fp32 out.
    Scratch& s = scratch(worker);
    auto* Q = operand(s.a, s.a_elems, m * k);
    auto* K = operand(s.b, s.b_elems, n * k);
    auto* S = operand(s.c, s.c_elems, m * n + m * k);
    timed([&](cudaStream_t st) {
      for (int r = 0; r < std::max(1, repeats); ++r) {
        matmul(s, st, false, true, m, n, k, Q, m, K, n, out(s, m * n), m);
        matmul(s, st, false, false, m, k, n, S, m, K, n, out(s, m * k), m);
      }
    });
  }

  void memory_bound(int worker, double bytes) override {
    // Read half and write half: device-to-device copies in blocks of at most 256 MiB.
    Scratch& s = scratch(worker);
    std::size_t left = static_cast<std::size_t>(std::max(0.0, bytes) / 2);
    const std::size_t block = std::min<std::size_t>(left, std::size_t{256} << 20);
    if (block == 0) return;
    if (s.stream_bytes < block) {
      if (s.src) cudaFree(s.src);
      if (s.dst) cudaFree(s.dst);
      check(cudaMalloc(&s.src, block), "cudaMalloc");
      check(cudaMalloc(&s.dst, block), "cudaMalloc");
      s.stream_bytes = block;
    }
    timed([&](cudaStream_t st) {
      while (left > 0) {
        const std::size_t n = std::min(left, block);
        check(cudaMemcpyAsync(s.dst, s.src, n, cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync");
        left -= n;
      }
    });
  }

  const float* weight_gradient(int worker, std::int64_t& elements) const override {
    const Scratch& s = scratch_.at(static_cast<std::size_t>(worker));
    elements = s.grad_elements;
    return s.grad_elements > 0 ? s.host_grad.data() : nullptr;
  }

  void copy_to_device(std::byte* device, const std::byte* host, std::size_t bytes) override {
    copy(device, host, bytes);
  }
  void copy_to_host(std::byte* host, const std::byte* device, std::size_t bytes) override { copy(host, device, bytes); }

  bool host_addressable() const override { return false; }
  bool pin_host(std::byte* host, std::size_t bytes) override {
    return cudaHostRegister(host, bytes, cudaHostRegisterDefault) == cudaSuccess;
  }
  void unpin_host(std::byte* host) override { cudaHostUnregister(host); }

 private:
  struct Scratch {
    void *a = nullptr, *b = nullptr, *c = nullptr, *grad = nullptr, *workspace = nullptr, *out = nullptr;
    void *src = nullptr, *dst = nullptr;
    std::int64_t a_elems = 0, b_elems = 0, c_elems = 0, grad_elems = 0, out_elems = 0;
    std::size_t stream_bytes = 0;
    std::vector<float> host_grad;
    std::int64_t grad_elements = 0;
  };
  static constexpr std::size_t kWorkspace = std::size_t{32} << 20;  // cuBLASLt workspace per worker

  Scratch& scratch(int worker) { return scratch_.at(static_cast<std::size_t>(worker)); }

  // A bf16 operand buffer of at least `elements`, filled with the CPU device's fixed values (so
  // the gradients drawn from it are reproducible run to run).
  __nv_bfloat16* operand(void*& buf, std::int64_t& have, std::int64_t elements) {
    if (have < elements) {
      if (buf) cudaFree(buf);
      check(cudaMalloc(&buf, static_cast<std::size_t>(elements) * 2), "cudaMalloc of an operand");
      std::vector<__nv_bfloat16> h(static_cast<std::size_t>(elements));
      for (std::size_t i = 0; i < h.size(); ++i)
        h[i] = __float2bfloat16(static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f);
      check(cudaMemcpy(buf, h.data(), h.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy of an operand");
      have = elements;
    }
    return static_cast<__nv_bfloat16*>(buf);
  }
  float* f32(void*& buf, std::int64_t& have, std::int64_t elements) {
    if (have < elements) {
      if (buf) cudaFree(buf);
      check(cudaMalloc(&buf, static_cast<std::size_t>(elements) * 4), "cudaMalloc of an output");
      have = elements;
    }
    return static_cast<float*>(buf);
  }
  float* out(Scratch& s, std::int64_t elements) { return f32(s.out, s.out_elems, elements); }
  float* grad(Scratch& s, std::int64_t elements) { return f32(s.grad, s.grad_elems, elements); }

  // D[M x N] = op(A) op(B), column-major, bf16 inputs, fp32 output and accumulation.
  void matmul(Scratch& s, cudaStream_t st, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
              const void* A, std::int64_t lda, const void* B, std::int64_t ldb, float* D, std::int64_t ldd) {
    const BlasLt& l = blaslt();
    if (!s.workspace) check(cudaMalloc(&s.workspace, kWorkspace), "cudaMalloc of the cuBLASLt workspace");
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    check(l.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    l.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    l.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    check(l.layout_create(&la, CUDA_R_16BF, ta ? K : M, ta ? M : K, lda), "layout A");
    check(l.layout_create(&lb, CUDA_R_16BF, tb ? N : K, tb ? K : N, ldb), "layout B");
    check(l.layout_create(&ld, CUDA_R_32F, M, N, ldd), "layout D");
    check(l.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
    const std::size_t ws = kWorkspace;
    l.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t best{};
    int found = 0;
    const cublasStatus_t h = l.heuristic(handle_, desc, la, lb, ld, ld, pref, 1, &best, &found);
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t r = CUBLAS_STATUS_NOT_SUPPORTED;
    if (h == CUBLAS_STATUS_SUCCESS && found > 0)
      r = l.matmul(handle_, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &best.algo, s.workspace, kWorkspace, st);
    l.pref_destroy(pref);
    l.layout_destroy(ld);
    l.layout_destroy(lb);
    l.layout_destroy(la);
    l.desc_destroy(desc);
    if (found == 0) throw SystemError(fmt::format("cuBLASLt has no algorithm for a {}x{}x{} bf16 GEMM", M, N, K));
    check(r, "cublasLtMatmul");
  }

  // Runs `launch` on the calling thread's stream between two events and waits for the end one.
  template <class F>
  void timed(F&& launch) {
    ThreadStream& t = thread_stream(index_);
    check(cudaEventRecord(t.start, t.stream), "cudaEventRecord");
    launch(t.stream);
    check(cudaEventRecord(t.stop, t.stream), "cudaEventRecord");
    check(cudaEventSynchronize(t.stop), "cudaEventSynchronize");
    float ms = 0;
    cudaEventElapsedTime(&ms, t.start, t.stop);
    std::lock_guard lock(mutex_);
    busy_s_ += static_cast<double>(ms) * 1e-3;
  }

  void copy(void* to, const void* from, std::size_t bytes) {
    // cudaMemcpyDefault: unified addressing says which side is the device's (a host-side buffer
    // of the executor's own, for a copy side the IR does not name, is a host-to-host copy).
    timed([&](cudaStream_t st) { check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, st), "cudaMemcpyAsync"); });
  }

  int index_ = 0;
  std::string name_;
  Arena arena_;
  std::byte* base_ = nullptr;
  cublasLtHandle_t handle_ = nullptr;
  std::vector<Scratch> scratch_;
  std::mutex mutex_;
  double busy_s_ = 0;  // device time of every call, by CUDA events
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(std::uint64_t capacity_bytes, int workers, std::string& why, int index) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    why = "no CUDA device found";
    return nullptr;
  }
  if (index >= count) {
    why = fmt::format("no CUDA device {} ({} found)", index, count);
    return nullptr;
  }
  if (!blaslt().error.empty()) {
    why = blaslt().error;
    return nullptr;
  }
  try {
    return std::make_unique<CudaDevice>(capacity_bytes, workers, index);
  } catch (const std::exception& e) {
    why = e.what();
    return nullptr;
  }
}

}  // namespace ftplan::exec
