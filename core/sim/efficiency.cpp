#include "sim/lowering.hpp"

#include "hardware/profile_fit.hpp"

namespace ftplan::sim {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

Efficiency default_efficiency(const hardware::GpuSpec& gpu) {
  Efficiency e;
  const std::string& a = gpu.architecture;
  // GEMM: best measured bf16 matmul over peak ("MAMF", stas00/ml-engineering compute/accelerator):
  // A100 SXM 271.2/312 = 86.9%, H100 SXM 794.5/989.4 = 80.3%, B200 ~1745/2250 = 77.6%.
  // Flash attention, forward and backward together (backward takes ~70% of the time): on A100,
  // FlashAttention-2 reaches ~60-70% of peak forward and ~45-50% backward with causal masks at
  // head dim 128 (Dao 2023, figs. 4-6, FLOPs of the unmasked half) -> ~50% overall; on H100 it
  // reaches ~35% (Shah et al. 2024, FlashAttention-3, sec. 1), its backward less -> ~33%. HBM: ~85-90% of datasheet in
  // streaming kernels. NCCL: NVLink 4 all-reduce bus bandwidth ~370 GB/s of 450 per direction (nccl-tests#212), NVLink
  // 3 ~200 of 300 (nccl-tests#149); InfiniBand ~90% of line rate. PCIe pinned copies: H100 56 of 63 GB/s
  // (cuda-samples#357), A100 25.1 of 31.5 (nvbandwidth#42).
  if (a == "ampere") {
    e.gemm = 0.869;
    e.attention = 0.50;
    e.nvlink = 0.67;
    e.pcie = 0.80;
    e.source = "A100: MAMF 86.9%; FlashAttention-2 ~50% fwd+bwd; NVLink 3 NCCL 200/300 GB/s";
  } else if (a == "hopper") {
    e.gemm = 0.803;
    e.attention = 0.33;
    e.nvlink = 0.82;
    e.pcie = 0.89;
    e.source = "H100: MAMF 80.3%; FlashAttention-2 35% on Hopper (FlashAttention-3 paper); NVLink 4 NCCL 370/450 GB/s";
  } else if (a == "blackwell") {
    e.gemm = 0.776;
    e.attention = 0.45;
    e.nvlink = 0.8;
    e.source = "B200: MAMF 77.6%; attention and links by analogy with Hopper (estimate)";
  } else if (a == "cdna3") {
    // xGMI links run at ~48 of their 64 GB/s after CRC and protocol overhead (AMD ROCm blog
    // "Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X", 2025-03-02).
    e.gemm = 0.70;
    e.attention = 0.45;
    e.nvlink = 48.0 / 64.0;
    e.source = "MI300X: xGMI 48/64 GB/s usable a link (AMD ROCm blog, 2025-03); GEMM and attention estimates";
  } else if (a == "volta") {
    // cuBLAS mixed-precision GEMM on a V100 SXM2 reaches 83 of 125 TFLOPS at best (Markidis et
    // al. 2018, "NVIDIA Tensor Core Programmability, Performance & Precision", IPDPSW).
    e.gemm = 83.0 / 125.0;
    e.attention = 0.35;
    e.nvlink = 0.75;
    e.source = "V100: GEMM 83/125 TFLOPS measured (Markidis et al. 2018); attention and NVLink estimates";
  } else {
    e.gemm = 0.70;
    e.attention = 0.45;
    e.source = "estimates for " + a + " (no measured figure in the reference)";
  }
  // A measurement of this GPU's own (the catalog's gemm_efficiency, with its source) comes first.
  if (gpu.gemm_efficiency > 0) {
    e.gemm = gpu.gemm_efficiency;
    e.source += "; GEMM measured for " + gpu.name + " (catalog)";
  }
  return e;
}

namespace {

using Measured = std::vector<std::string>;  // what a profile set, for Efficiency::source

// GEMM and attention efficiency (the median, and each measured shape for interpolation) and HBM
// bandwidth, in the plan's compute type.
void kernels_from_profile(const hardware::CalibrationProfile& prof, const hardware::GpuSpec& gpu, hardware::Dtype dtype,
                          Efficiency& e, Measured& measured) {
  const double peak = gpu.peak_for(dtype);
  std::vector<double> gemm, attention, memory;
  for (const auto& g : prof.gemm)
    if (g.dtype == dtype && peak > 0) gemm.push_back(g.flops_per_s / peak);
  for (const auto& a : prof.attention)
    if (a.dtype == dtype && peak > 0) attention.push_back(a.flops_per_s / peak);
  for (const auto& m : prof.memory)
    if (gpu.memory_bandwidth_Bps > 0) memory.push_back(m.bandwidth_Bps / gpu.memory_bandwidth_Bps);
  if (!gemm.empty()) {
    e.gemm = std::clamp(median(gemm), 0.01, 1.0);
    for (const auto& g : prof.gemm)
      if (g.dtype == dtype && g.m > 0 && g.n > 0 && g.k > 0)
        e.gemm_shapes.push_back({static_cast<double>(g.m), static_cast<double>(g.n), static_cast<double>(g.k),
                                 std::clamp(g.flops_per_s / peak, 0.001, 1.0)});
    measured.push_back(fmt::format("GEMM ({} shapes)", e.gemm_shapes.size()));
  }
  if (!attention.empty()) {
    e.attention = std::clamp(median(attention), 0.01, 1.0);
    for (const auto& a : prof.attention)
      if (a.dtype == dtype && a.seq > 0 && a.head_dim > 0)
        e.attention_shapes.push_back({static_cast<double>(a.seq), static_cast<double>(a.head_dim), a.pass == "bwd",
                                      a.impl != "cublas-matmuls", a.causal,
                                      std::clamp(a.flops_per_s / peak, 0.001, 1.0)});
    measured.push_back("attention");
  }
  if (!memory.empty()) {
    e.memory = std::clamp(median(memory), 0.05, 1.0);
    measured.push_back("HBM");
  }
}

// The GPU's links: PCIe (best pinned host-to-device rate) and NVLink (NCCL's bus bandwidth).
void links_from_profile(const hardware::CalibrationProfile& prof, const hardware::GpuSpec& gpu, Efficiency& e,
                        Measured& measured) {
  double h2d = 0;
  for (const auto& c : prof.copy)
    if (c.direction == hardware::CopyDirection::h2d && c.pinned) h2d = std::max(h2d, c.bandwidth_Bps);
  if (h2d > 0 && gpu.host_link.bandwidth_Bps() > 0) {
    e.pcie = std::clamp(h2d / gpu.host_link.bandwidth_Bps(), 0.05, 1.0);
    measured.push_back("PCIe");
  }
  double bus = 0;
  for (const auto& c : prof.collectives) bus = std::max(bus, c.bus_bandwidth_Bps);
  if (bus > 0 && gpu.nvlink_bandwidth_Bps > 0) {
    e.nvlink = std::clamp(bus / gpu.nvlink_bandwidth_Bps, 0.05, 1.0);
    measured.push_back("NCCL");
  }
}

// The host: DRAM bandwidth (triad) and the CPU AdamW rate, each at the most threads measured.
void host_from_profile(const hardware::CalibrationProfile& prof, Efficiency& e, Measured& measured) {
  // The DRAM link carries real traffic (a copy's bytes, CPU AdamW's 28 B per parameter: every
  // line read or written). STREAM counts triad as 24 B per element; calibrate's triad
  // (calibrate/cpu/kernels.cpp, plain stores) also reads each destination line before writing it
  // (write-allocate), so DRAM moved 32 B (docs/calibration-profile.md, "Counting conventions";
  // McCalpin's STREAM counts no write-allocate traffic). Taken as counted, the dev VM profile's
  // AdamW (28 B x its rate = 1.10 x triad) came out DRAM-bound.
  constexpr double kTriadTrafficPerCounted = 32.0 / 24.0;
  int best_threads = 0;
  for (const auto& d : prof.cpu.dram)
    if (d.kernel == "triad" && d.threads >= best_threads) {
      best_threads = d.threads;
      e.dram_Bps = d.bandwidth_Bps * kTriadTrafficPerCounted;
    }
  if (e.dram_Bps > 0) measured.push_back("DRAM");
  best_threads = 0;
  for (const auto& o : prof.cpu.optimizer)
    if (o.threads >= best_threads) {
      best_threads = o.threads;
      e.cpu_optimizer_params_per_s = o.params_per_s;
    }
  if (e.cpu_optimizer_params_per_s > 0) measured.push_back("CPU AdamW");
}

// Copies: the per-copy cost, and pageable over pinned at the largest size measured for both.
void copies_from_profile(const hardware::CalibrationProfile& prof, Efficiency& e, Measured& measured) {
  const hardware::CopySample* large = nullptr;
  const hardware::CopySample* pageable = nullptr;
  for (const auto& c : prof.copy) {
    if (c.direction != hardware::CopyDirection::h2d || c.bandwidth_Bps <= 0) continue;
    if (c.pinned) {
      if (!large || c.bytes > large->bytes) large = &c;
    } else if (!pageable || c.bytes > pageable->bytes) {
      pageable = &c;
    }
  }
  // The per-copy cost: Hockney's t = latency + bytes / rate fitted by least squares to every
  // pinned H2D sample (hardware::fit_copy_model), not read off the smallest and largest rows.
  if (const auto fit = hardware::fit_copy_model(prof.copy, hardware::CopyDirection::h2d, true)) {
    e.copy_latency_s = fit->latency_s;
    measured.push_back("copy latency");
  }
  if (large && pageable && large->bandwidth_Bps > 0) {
    e.pageable_fraction = std::clamp(pageable->bandwidth_Bps / large->bandwidth_Bps, 0.01, 1.0);
    measured.push_back("pageable copies");
  }
}

void nvme_from_profile(const hardware::CalibrationProfile& prof, Efficiency& e, Measured& measured) {
  // NVMe: the striped runs closest to the offload engine's requests, DeepSpeed's aio defaults of
  // 1 MiB blocks at queue depth 8 (docs "aio" config: block_size 1048576, queue_depth 8).
  for (const auto op : {hardware::StorageOp::read, hardware::StorageOp::write}) {
    const hardware::StorageSample* best = nullptr;
    double best_d = 0;
    for (const auto& r : prof.storage.runs) {
      if (r.op != op || r.bandwidth_Bps <= 0 || r.block_bytes <= 0 || r.queue_depth <= 0) continue;
      const double d = std::abs(std::log2(r.block_bytes / 1048576.0)) + std::abs(std::log2(r.queue_depth / 8.0));
      if (!best || d < best_d || (d == best_d && r.paths.size() > best->paths.size())) {
        best = &r;
        best_d = d;
      }
    }
    if (best) (op == hardware::StorageOp::read ? e.nvme_read_Bps : e.nvme_write_Bps) = best->bandwidth_Bps;
  }
  if (e.nvme_read_Bps > 0 || e.nvme_write_Bps > 0) measured.push_back("NVMe");
}

}  // namespace

Efficiency efficiency_from_profile(const hardware::CalibrationProfile& prof, const hardware::GpuSpec& gpu,
                                   hardware::Dtype dtype) {
  Efficiency e = default_efficiency(gpu);
  Measured measured;
  kernels_from_profile(prof, gpu, dtype, e, measured);
  links_from_profile(prof, gpu, e, measured);
  host_from_profile(prof, e, measured);
  copies_from_profile(prof, e, measured);
  nvme_from_profile(prof, e, measured);
  e.source =
      fmt::format("calibration profile of {} ({}): measured {}; the rest: {}", prof.machine.hostname, prof.machine.date,
                  measured.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(measured, ", ")), e.source);
  return e;
}

}  // namespace ftplan::sim
