// The calibration profile: what `ftplan calibrate` measured on one machine, as read from the YAML
// it writes (docs/calibration-profile.md). The simulator takes achieved rates from here in place of
// the catalog's datasheet figures. Plain data; all quantities in base units (bytes, bytes/s,
// FLOP/s, watts, seconds). Every measured row keeps its raw samples (one per repeat, in the unit
// of the row's value) and its value is their median.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hardware/hardware.hpp"

namespace ftplan::hardware {

// The version of the profile format this build reads and writes.
inline constexpr int kProfileSchemaVersion = 1;

struct ProfileCpu {
  std::string model;  // /proc/cpuinfo "model name"
  int sockets = 0;
  int cores = 0;    // physical cores, all sockets
  int threads = 0;  // logical CPUs online
  int numa_nodes = 0;
  std::string simd;       // widest vector ISA found: avx512 | avx2 | sse2 | neon | sve | scalar
  double dram_bytes = 0;  // MemTotal
  bool operator==(const ProfileCpu&) const = default;
};

struct ProfileGpu {
  int index = 0;
  std::string name;                // as the driver reports it, e.g. "NVIDIA H100 80GB HBM3"
  std::string compute_capability;  // "9.0"
  double memory_bytes = 0;         // total as the driver reports it
  int pcie_gen = 0;                // current link generation; 0 = unknown
  int pcie_lanes = 0;              // current link width; 0 = unknown
  bool operator==(const ProfileGpu&) const = default;
};

struct ProfileDrive {
  std::string path;    // the directory measured
  std::string device;  // block device under /sys/block, e.g. "nvme0n1"; "" = unknown
  std::string model;   // drive model where the kernel exposes it; "" = unknown
  bool rotational = false;
  bool operator==(const ProfileDrive&) const = default;
};

struct ProfileMachine {
  std::string hostname;
  std::string date;  // when the run started, ISO 8601 UTC: 2026-05-01T12:00:00Z
  std::string ftplan_version;
  std::string kernel;  // uname -sr
  ProfileCpu cpu;
  std::vector<ProfileGpu> gpus;      // empty when no CUDA device was found
  std::string gpu_driver_version;    // "" when no driver
  std::string cuda_runtime_version;  // "" when not built with CUDA
  std::vector<ProfileDrive> drives;
  std::string notes;  // what was not measured and why
  bool operator==(const ProfileMachine&) const = default;
};

// How the run was made.
struct ProfileSettings {
  std::string mode = "full";  // quick | full
  int repeats = 0;            // timed repeats per measurement, after warm-up
  bool operator==(const ProfileSettings&) const = default;
};

// One GEMM shape: C[m x n] = A[m x k] * B[k x n], 2mnk FLOPs per call.
struct GemmSample {
  Dtype dtype = Dtype::bf16;  // inputs; accumulation is fp32 for all but fp32/tf32 which are fp32 throughout
  std::string op;             // where the shape comes from, e.g. "llama-3.1-8b/mlp_down.wgrad/t4096"
  std::int64_t m = 0, n = 0, k = 0;
  double flops_per_s = 0;       // median achieved
  double peak_flops_per_s = 0;  // datasheet dense peak it is compared with; 0 = unknown
  std::vector<double> samples;  // FLOP/s, one per repeat
  bool operator==(const GemmSample&) const = default;
};

// Attention throughput: 4 * batch * heads * seq^2 * head_dim FLOPs forward (halved when causal),
// 2.5x that backward (FlashAttention-2 paper's accounting).
struct AttentionSample {
  Dtype dtype = Dtype::bf16;
  // How it ran: "cudnn-sdpa" (fused, flash-style) or "cublas-matmuls" (the two attention matmuls
  // QK^T and PV as strided-batched GEMMs, softmax not included: the unfused path's matmul rate).
  std::string impl = "cublas-matmuls";
  std::string pass = "fwd";  // fwd | bwd
  std::int64_t batch = 0, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
  bool causal = true;
  double flops_per_s = 0;
  std::vector<double> samples;  // FLOP/s
  bool operator==(const AttentionSample&) const = default;
};

// Device-memory bandwidth of one GPU (a device-to-device copy: reads and writes both counted).
struct MemorySample {
  int gpu = 0;
  std::string op = "copy";
  double bytes = 0;  // size of the buffer copied
  double bandwidth_Bps = 0;
  double bound_Bps = 0;         // datasheet HBM bandwidth; 0 = unknown
  std::vector<double> samples;  // B/s
  bool operator==(const MemorySample&) const = default;
};

enum class CopyDirection { h2d, d2h, bidir, d2d, h2h };
inline std::span<const EnumName<CopyDirection>> enum_table(CopyDirection) {
  static constexpr EnumName<CopyDirection> t[] = {{CopyDirection::h2d, "h2d"},
                                                  {CopyDirection::d2h, "d2h"},
                                                  {CopyDirection::bidir, "bidir"},
                                                  {CopyDirection::d2d, "d2d"},
                                                  {CopyDirection::h2h, "h2h"}};
  return t;
}
const char* to_string(CopyDirection d);

// One copy size: host<->device over PCIe (bidir: both directions at once, the sum reported), or
// h2h: memcpy from ordinary memory into a page-locked host buffer (the CPU side of an offload).
struct CopySample {
  CopyDirection direction = CopyDirection::h2d;
  bool pinned = true;  // host buffer page-locked
  double bytes = 0;    // per transfer (bidir: per direction)
  double bandwidth_Bps = 0;
  double bound_Bps = 0;         // link rate (PCIe gen x lanes per direction; bidir twice that); 0 = unknown
  std::vector<double> samples;  // B/s
  bool operator==(const CopySample&) const = default;
};

enum class CollectiveOp { all_reduce, all_gather, reduce_scatter };
inline std::span<const EnumName<CollectiveOp>> enum_table(CollectiveOp) {
  static constexpr EnumName<CollectiveOp> t[] = {{CollectiveOp::all_reduce, "all_reduce"},
                                                 {CollectiveOp::all_gather, "all_gather"},
                                                 {CollectiveOp::reduce_scatter, "reduce_scatter"}};
  return t;
}
const char* to_string(CollectiveOp op);

// NCCL bus bandwidth as nccl-tests defines it (all-reduce: algbw x 2(n-1)/n; gathers: x (n-1)/n).
struct CollectiveSample {
  CollectiveOp op = CollectiveOp::all_reduce;
  int ranks = 0;
  double bytes = 0;  // message size (the full buffer, as nccl-tests counts it)
  double bus_bandwidth_Bps = 0;
  std::vector<double> samples;  // B/s
  bool operator==(const CollectiveSample&) const = default;
};

enum class StorageOp { read, write, randread, randwrite };
inline std::span<const EnumName<StorageOp>> enum_table(StorageOp) {
  static constexpr EnumName<StorageOp> t[] = {{StorageOp::read, "read"},
                                              {StorageOp::write, "write"},
                                              {StorageOp::randread, "randread"},
                                              {StorageOp::randwrite, "randwrite"}};
  return t;
}
const char* to_string(StorageOp op);

// One storage configuration: O_DIRECT through io_uring on files the calibration created.
struct StorageSample {
  std::vector<std::string> paths;  // several: striped across their drives, one file each
  StorageOp op = StorageOp::read;
  double block_bytes = 0;
  int queue_depth = 0;  // per path
  double bandwidth_Bps = 0;
  double iops = 0;
  std::vector<double> samples;      // B/s
  double fio_bandwidth_Bps = 0;     // fio's median for the same configuration in the same run; 0 = not run
  std::vector<double> fio_samples;  // B/s
  bool operator==(const StorageSample&) const = default;
};

// Writing on past the drive's write cache (SLC cache, DRAM buffer) until the rate settles.
struct SustainedWriteSample {
  std::vector<std::string> paths;
  double block_bytes = 0;
  int queue_depth = 0;
  double bytes_written = 0;
  double interval_s = 0;               // length of each sample's window
  double burst_bandwidth_Bps = 0;      // median of the windows before the drop
  double sustained_bandwidth_Bps = 0;  // median of the windows after it (= burst when no drop was seen)
  double cache_bytes = 0;              // written before the drop; 0 = no drop seen
  std::vector<double> samples;         // B/s per window, in time order
  bool operator==(const SustainedWriteSample&) const = default;
};

struct StorageSection {
  std::vector<StorageSample> runs;
  std::vector<SustainedWriteSample> sustained_write;
  bool operator==(const StorageSection&) const = default;
};

// STREAM kernels (McCalpin): copy a[i]=b[i] counts 16 B per element, triad a[i]=b[i]+s*c[i] 24 B.
struct DramSample {
  std::string kernel = "triad";  // copy | triad
  int threads = 0;
  double array_bytes = 0;  // each array
  double bandwidth_Bps = 0;
  std::vector<double> samples;  // B/s
  bool operator==(const DramSample&) const = default;
};

// One optimizer step over fp32 state on the CPU.
struct OptimizerSample {
  std::string optimizer = "adamw";
  int threads = 0;
  std::int64_t params = 0;
  double params_per_s = 0;
  double bytes_per_param = 0;   // DRAM bytes touched per parameter (AdamW fp32: 28)
  double triad_fraction = 0;    // params_per_s / (triad B/s at this thread count / bytes_per_param)
  std::vector<double> samples;  // parameters/s
  bool operator==(const OptimizerSample&) const = default;
};

struct CpuSection {
  double dram_bound_Bps = 0;  // channels x speed x 8 B where known; 0 = unknown (VMs rarely say)
  std::vector<DramSample> dram;
  std::vector<OptimizerSample> optimizer;
  bool operator==(const CpuSection&) const = default;
};

// Average board power of one GPU while a kernel class ran (NVML), and its idle power.
struct PowerSample {
  int gpu = 0;
  std::string kernel_class;  // idle | gemm_bf16 | gemm_fp8 | ... | hbm_copy | h2d_copy | attention | nccl
  double power_w = 0;
  std::vector<double> samples;  // W, one per NVML reading
  bool operator==(const PowerSample&) const = default;
};

// The executor's CPU device (`ftplan validate`, exec/cpu_device.hpp) measured apart from any run,
// so that validate predicts a step from rates it did not take from the run it checks (issue 40).
// One GEMM shape as the device runs it, named as the simulator looks rates up
// (sim::gemm_fraction): the product's own C[m x n] summed over k. Layout nn is the forward
// C = A B; nt a backward's input gradient dA = dC B^T; tn its weight gradient dB = A^T dC
// (Eigen packs a transposed operand otherwise than a plain one: 5-25% apart on this machine).
struct CpuDeviceGemmSample {
  std::string layout = "nn";  // nn | nt | tn
  std::int64_t m = 0, n = 0, k = 0;
  double flops_per_s = 0;       // median of the cold calls
  std::vector<double> samples;  // FLOP/s, one per cold call
  bool operator==(const CpuDeviceGemmSample&) const = default;
};

// The device's attention kernel: S = Q K^T then O = S V for one (batch, head): `queries` x `keys`
// scores over `head_dim`, 4 * queries * keys * head_dim FLOPs.
struct CpuDeviceAttentionSample {
  std::int64_t queries = 0, keys = 0, head_dim = 0;
  double flops_per_s = 0;
  std::vector<double> samples;  // FLOP/s
  bool operator==(const CpuDeviceAttentionSample&) const = default;
};

// One scalar rate: memory_Bps (a memory-bound kernel's bytes read + written per second on the
// compute worker's core), copy_Bps (one memcpy between device and host memory), dram_Bps (DRAM
// traffic of two memcpys at once), adam_params_per_s (calibrate's AdamW on one thread).
struct CpuDeviceRate {
  std::string name;
  double value = 0;
  std::vector<double> samples;
  bool operator==(const CpuDeviceRate&) const = default;
};

// The storage directories as the executor's NVMe streams move their files: one ring, striped
// round-robin over a file per directory, `block_bytes` requests `queue_depth` in flight.
struct CpuDeviceStorageSample {
  std::vector<std::string> paths;
  double block_bytes = 0, stripe_bytes = 0;
  int queue_depth = 0;
  double read_Bps = 0, write_Bps = 0;  // medians
  std::vector<double> read_samples, write_samples;
  bool operator==(const CpuDeviceStorageSample&) const = default;
};

struct CpuDeviceSection {
  std::string device;  // what was measured, as the device describes itself
  std::vector<CpuDeviceGemmSample> gemm;
  std::vector<CpuDeviceAttentionSample> attention;
  std::vector<CpuDeviceRate> rates;
  std::vector<CpuDeviceStorageSample> storage;
  bool empty() const { return gemm.empty() && attention.empty() && rates.empty() && storage.empty(); }
  bool operator==(const CpuDeviceSection&) const = default;
};

struct CalibrationProfile {
  int schema_version = kProfileSchemaVersion;
  ProfileMachine machine;
  ProfileSettings settings;
  std::vector<GemmSample> gemm;
  std::vector<AttentionSample> attention;
  std::vector<MemorySample> memory;
  std::vector<CopySample> copy;
  std::vector<CollectiveSample> collectives;
  StorageSection storage;
  CpuSection cpu;
  std::vector<PowerSample> power;
  CpuDeviceSection cpu_device;
  bool operator==(const CalibrationProfile&) const = default;
};

}  // namespace ftplan::hardware
