// The GPU calibration (CUDA). This header is plain C++ so the rest of ftplan compiles without
// CUDA; the implementation is cuda_bench.cu in CUDA builds and no_cuda.cpp otherwise.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "calibrate/common.hpp"
#include "calibrate/workload.hpp"
#include "hardware/hardware.hpp"
#include "hardware/profile.hpp"

namespace ftplan::calibrate::gpu {

// Whether the GPU part can run here, and if not, why in words a person can act on.
struct CudaStatus {
  bool built = false;   // this ftplan was built with CUDA
  bool usable = false;  // a device is there and the driver can run this toolkit's code
  int devices = 0;
  std::string reason;           // when not usable: "no CUDA device found", "driver too old: ..."
  std::string driver_version;   // "580.65.06" (NVML) or "13.0" (CUDA driver API version); "" = none
  std::string runtime_version;  // the toolkit's runtime, "13.0"
};
CudaStatus probe_cuda();

struct CudaPlan {
  std::vector<GemmShape> gemms;
  std::vector<hardware::Dtype> dtypes = {hardware::Dtype::bf16, hardware::Dtype::fp16, hardware::Dtype::tf32,
                                         hardware::Dtype::fp32, hardware::Dtype::fp8};
  int repeats = 5;
  // fp32 (non-tensor-core) GEMMs bigger than this are skipped: at ~60 TFLOPS the largest LM-head shapes
  // take most of a second per call, and training does not run them in fp32.
  double max_fp32_flops = 2e12;
  double min_sample_s = 2e-3;  // each timed sample runs back-to-back calls for at least this long
  std::size_t hbm_bytes = std::size_t{1} << 30;
  std::vector<std::size_t> copy_sizes;  // host<->device sizes
  std::vector<std::size_t> collective_sizes;
  std::vector<std::int64_t> attention_seqs = {2048, 8192};
  double power_window_s = 2.5;  // each kernel class runs this long under NVML
  bool measure_power = true;
  const hardware::Catalog* catalog = nullptr;  // for datasheet bounds; may be null
  std::string catalog_gpu;                     // catalog entry to compare with; "" = match by device name

  int steps() const;  // progress steps measure_cuda reports
};

struct CudaResults {
  std::vector<hardware::ProfileGpu> gpus;
  std::vector<hardware::GemmSample> gemm;
  std::vector<hardware::AttentionSample> attention;
  std::vector<hardware::MemorySample> memory;
  std::vector<hardware::CopySample> copy;
  std::vector<hardware::CollectiveSample> collectives;
  std::vector<hardware::PowerSample> power;
  std::vector<Comparison> comparisons;
};

// Runs the plan on every visible device (GEMMs, HBM, copies and power on device 0; collectives on all).
// Requires probe_cuda().usable. Throws SystemError on a CUDA error.
CudaResults measure_cuda(const CudaPlan& plan, Progress& progress, int first_step, int total);

}  // namespace ftplan::calibrate::gpu
