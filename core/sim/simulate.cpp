#include "sim/simulate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "des/engine.hpp"
#include "inventory/inventory.hpp"
#include "plan/checks.hpp"

namespace ftplan::sim {

using schedule::Collective;
using schedule::Op;
using schedule::OpKind;
using schedule::Stream;

Efficiency default_efficiency(const hardware::GpuSpec& gpu) {
  Efficiency e;
  const std::string& a = gpu.architecture;
  // GEMM: best measured bf16 matmul over peak ("MAMF", stas00/ml-engineering compute/accelerator):
  // A100 SXM 271.2/312 = 86.9%, H100 SXM 794.5/989.4 = 80.3%, B200 ~1745/2250 = 77.6%.
  // Flash attention, forward and backward together (backward takes ~70% of the time): on A100,
  // FlashAttention-2 reaches ~60-70% of peak forward and ~45-50% backward with causal masks at
  // head dim 128 (Dao 2023, figs. 4-6, FLOPs of the unmasked half) -> ~50% overall; on H100 it
  // reaches ~35% (Shah et al. 2024, FlashAttention-3, sec. 1), its backward less -> ~33%. HBM: ~85-90% of datasheet in streaming
  // kernels. NCCL: NVLink 4 all-reduce bus bandwidth ~370 GB/s of 450 per direction
  // (nccl-tests#212), NVLink 3 ~200 of 300 (nccl-tests#149); InfiniBand ~90% of line rate.
  // PCIe pinned copies: H100 56 of 63 GB/s (cuda-samples#357), A100 25.1 of 31.5 (nvbandwidth#42).
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
  return e;
}

namespace {
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

Efficiency efficiency_from_profile(const hardware::CalibrationProfile& prof, const hardware::GpuSpec& gpu,
                                   hardware::Dtype dtype) {
  Efficiency e = default_efficiency(gpu);
  std::vector<std::string> measured;
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
                                      a.impl != "cublas-matmuls", a.causal, std::clamp(a.flops_per_s / peak, 0.001, 1.0)});
    measured.push_back("attention");
  }
  if (!memory.empty()) {
    e.memory = std::clamp(median(memory), 0.05, 1.0);
    measured.push_back("HBM");
  }
  double h2d = 0;
  for (const auto& c : prof.copy)
    if (c.direction == hardware::CopyDirection::h2d && c.pinned) h2d = std::max(h2d, c.bandwidth_Bps);
  if (h2d > 0 && gpu.host_link.bandwidth_Bps() > 0) {
    e.pcie = std::clamp(h2d / gpu.host_link.bandwidth_Bps(), 0.05, 1.0);
    measured.push_back("PCIe");
  }
  double bus = 0;
  for (const auto& c : prof.collectives)
    bus = std::max(bus, c.bus_bandwidth_Bps);
  if (bus > 0 && gpu.nvlink_bandwidth_Bps > 0) {
    e.nvlink = std::clamp(bus / gpu.nvlink_bandwidth_Bps, 0.05, 1.0);
    measured.push_back("NCCL");
  }
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
  // Copies: the per-copy cost from the smallest and largest pinned H2D transfers (time = latency +
  // bytes / rate), and pageable over pinned at the largest size measured for both.
  {
    const hardware::CopySample* small = nullptr;
    const hardware::CopySample* large = nullptr;
    const hardware::CopySample* pageable = nullptr;
    for (const auto& c : prof.copy) {
      if (c.direction != hardware::CopyDirection::h2d || c.bandwidth_Bps <= 0) continue;
      if (c.pinned) {
        if (!small || c.bytes < small->bytes) small = &c;
        if (!large || c.bytes > large->bytes) large = &c;
      } else if (!pageable || c.bytes > pageable->bytes) {
        pageable = &c;
      }
    }
    if (small && large && small->bytes < large->bytes) {
      e.copy_latency_s = std::max(0.0, small->bytes / small->bandwidth_Bps - small->bytes / large->bandwidth_Bps);
      measured.push_back("copy latency");
    }
    if (large && pageable && large->bandwidth_Bps > 0) {
      e.pageable_fraction = std::clamp(pageable->bandwidth_Bps / large->bandwidth_Bps, 0.01, 1.0);
      measured.push_back("pageable copies");
    }
  }
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
  e.source = fmt::format("calibration profile of {} ({}): measured {}; the rest: {}", prof.machine.hostname,
                         prof.machine.date, measured.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(measured, ", ")),
                         e.source);
  return e;
}

double ring_bytes(Collective c, double bytes, int n) {
  if (n <= 1) return 0;
  const double f = static_cast<double>(n - 1) / n;
  switch (c) {
    case Collective::all_reduce: return 2.0 * f * bytes;  // reduce-scatter + all-gather
    case Collective::all_gather:
    case Collective::reduce_scatter: return f * bytes;
    case Collective::all_to_all: return f * bytes;
    case Collective::send_recv: return bytes;
  }
  return bytes;
}

std::vector<HostLink> host_path(const Op& op, const plan::Plan& p) {
  if (op.kind == OpKind::optimizer && op.stream == Stream::cpu) return {HostLink::cpu, HostLink::dram};
  if (op.kind != OpKind::copy) return {};
  if (op.src == plan::Tier::nvme) return {HostLink::nvme_read, HostLink::dram};
  if (op.dst == plan::Tier::nvme) return {HostLink::nvme_write, HostLink::dram};
  if (p.offload.pinned) return {HostLink::pcie, HostLink::uplink, HostLink::dram};
  return {HostLink::pageable, HostLink::pcie, HostLink::uplink, HostLink::dram};
}

const char* to_string(HostLink l) {
  switch (l) {
    case HostLink::pcie: return "pcie";
    case HostLink::uplink: return "pcie switch uplink (share)";
    case HostLink::dram: return "host dram (share)";
    case HostLink::nvme_read: return "nvme read (share)";
    case HostLink::nvme_write: return "nvme write (share)";
    case HostLink::pageable: return "pageable staging";
    case HostLink::cpu: return "host cpu (share)";
  }
  return "?";
}

namespace {

// An op's dtype: fp8-mixed runs its FP8 linears in FP8 and the rest in bf16 (plan::compute_dtype).
hardware::Dtype compute_dtype(const plan::Plan& p, bool fp8_op) {
  if (p.job.precision == plan::Precision::fp8_mixed && !fp8_op) return hardware::Dtype::bf16;
  return plan::compute_dtype(p.job.precision);
}

}  // namespace

namespace {

// Inverse-distance weighting of the kNearest closest points (Shepard 1968, "A two-dimensional
// interpolation function for irregularly-spaced data"), distances in log2 of each coordinate, so
// that 2048 sits as far from 1024 as from 4096. A point at distance 0 is returned as it is.
// Points at an infinite distance do not take part; returns `otherwise` when none does. Called for
// every GEMM and attention op when a profile is given: it keeps the nearest in place, no heap.
template <class Point, class Distance>
double interpolate(const std::vector<Point>& points, Distance distance, double otherwise) {
  constexpr std::size_t kNearest = 4;
  std::array<std::pair<double, double>, kNearest> best;  // (distance, fraction), nearest first
  std::size_t n = 0;
  for (const auto& pt : points) {
    const double d = distance(pt);
    if (!std::isfinite(d) || (n == kNearest && d >= best[n - 1].first)) continue;
    std::size_t at = n < kNearest ? n++ : n - 1;  // the slot it takes, then moved up past farther ones
    for (; at > 0 && best[at - 1].first > d; --at) best[at] = best[at - 1];
    best[at] = {d, pt.fraction};
  }
  if (n == 0) return otherwise;
  if (best[0].first <= 1e-12) return best[0].second;
  double weights = 0, sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double w = 1.0 / (best[i].first * best[i].first);
    weights += w;
    sum += w * best[i].second;
  }
  return sum / weights;
}

double log_gap(double a, double b) { return std::abs(std::log2(a / b)); }

}  // namespace

// FlashAttention-1-class kernels against FlashAttention-2 (Dao 2023, abstract: FlashAttention
// reaches 25-40% of the A100's peak, FlashAttention-2 50-73%: midpoints 32.5 / 61.5). The same
// ratio is assumed on other GPUs.
constexpr double kFlashV1Ratio = 32.5 / 61.5;

// Fixed time per output tile of a GEMM (prologue and epilogue), from XLA's measured H100 table
// (gemm_fraction).
constexpr double kGemmTileFixed_s = 1.2e-6;

double gemm_fraction(const Efficiency& eff, const hardware::GpuSpec& gpu, double m, double n, double k) {
  if (m <= 0 || n <= 0 || k <= 0) return eff.gemm;
  if (!eff.gemm_shapes.empty())
    return interpolate(
        eff.gemm_shapes,
        [&](const Efficiency::GemmPoint& g) {
          const double dm = log_gap(m, g.m), dn = log_gap(n, g.n), dk = log_gap(k, g.k);
          return std::sqrt(dm * dm + dn * dn + dk * dk);
        },
        eff.gemm);
  // Wave quantization (NVIDIA, "Matrix Multiplication Background User's Guide", secs. "Tile
  // quantization" and "Wave quantization"): the output is computed in tiles, one per SM at a time
  // (256 x 128 for large GEMMs on A100, the guide's example; cuBLAS also has 128 x 256 and
  // 128 x 128), so a last, partial wave leaves SMs idle: utilization = tiles / (waves x SMs), the
  // best of the three tile shapes. `eff.gemm` is the large-GEMM rate measured with whole waves.
  // Below one wave cuBLAS fills the SMs by splitting K (split-K / stream-K), which the guide does
  // not quantify: no loss is charged there (such GEMMs are usually bound by memory or by the
  // host's dispatch anyway). Past one wave the rate follows the guide's sawtooth.
  //
  // Each tile also pays a fixed time besides its k-loop (filling the operand pipeline, writing the
  // output tile: CUTLASS's prologue and epilogue), so a tile's work takes k + k0 steps of its main
  // loop, k0 = fixed time x the SM's rate / (2 tm tn). XLA's measured bf16 table for H100
  // (openxla, xla/service/gpu/model/matmul_interpolator_data.h, sm_90: 375 shapes, m, n, k of
  // 256-4096) falls with k as k / (k + ~140) for 256 x 128 tiles, i.e. ~1.2 us per tile
  // (measured / this model without the term: 0.97 at k = 4096, 0.93 at 2048, 0.88 at 1024, 0.79
  // at 512, 0.65 at 256); the same fixed time is assumed on other GPUs, where slower SMs make k0
  // smaller. `eff.gemm` (the best measured rate, at large k) is taken as the k -> infinity rate.
  const double sms = gpu.sm_count;
  if (sms <= 0) return eff.gemm;
  const double sm_rate = gpu.peak_for(hardware::Dtype::bf16) / sms;
  double best = 0;
  for (const auto& [tm, tn] : {std::pair{256.0, 128.0}, std::pair{128.0, 256.0}, std::pair{128.0, 128.0}}) {
    const double tiles = std::ceil(m / tm) * std::ceil(n / tn);
    const double waves = tiles <= sms ? 1.0 : tiles / (std::ceil(tiles / sms) * sms);
    const double k0 = kGemmTileFixed_s * sm_rate / (2.0 * tm * tn);
    best = std::max(best, waves * k / (k + k0));
  }
  return eff.gemm * best;
}

double attention_fraction(const Efficiency& eff, double seq, double head_dim, bool backward, bool fused, bool causal) {
  if (seq <= 0 || head_dim <= 0) return eff.attention;
  return interpolate(
      eff.attention_shapes,
      [&](const Efficiency::AttentionPoint& a) {
        if (a.backward != backward || a.fused != fused || a.causal != causal) return std::numeric_limits<double>::infinity();
        const double ds = log_gap(seq, a.seq), dh = log_gap(head_dim, a.head_dim);
        return std::sqrt(ds * ds + dh * dh);
      },
      eff.attention);
}

double compute_seconds(const Op& op, const plan::Plan& p, const Efficiency& eff) {
  const hardware::GpuSpec& gpu = p.cluster.gpu;
  double flops_rate = 0;
  switch (op.kind) {
    case OpKind::gemm: {
      // A backward op runs the input gradient dA[m x k] = dC[m x n] B^T and, when the weight
      // trains (two kernels), the weight gradient dB[k x n] = A^T dC: each at its own shape's rate.
      const auto m = static_cast<double>(op.m), n = static_cast<double>(op.n), k = static_cast<double>(op.k);
      double fraction;
      if (op.pass != schedule::Pass::backward) {
        fraction = gemm_fraction(eff, gpu, m, n, k);
      } else {
        fraction = gemm_fraction(eff, gpu, m, k, n);
        if (op.weight_grad) fraction = 2.0 / (1.0 / fraction + 1.0 / gemm_fraction(eff, gpu, k, n, m));
      }
      flops_rate = gpu.peak_for(compute_dtype(p, op.fp8)) * fraction;
      break;
    }
    case OpKind::attention:
      // The op's shape: m queries, n keys, k the head dimension. A FlashAttention-1-class kernel
      // runs at FlashAttention-2's rate x kFlashV1Ratio.
      flops_rate = gpu.peak_for(compute_dtype(p, false)) *
                   attention_fraction(eff, static_cast<double>(op.n), static_cast<double>(op.k),
                                      op.pass == schedule::Pass::backward, op.flash, op.causal) *
                   (op.flash_v1 ? kFlashV1Ratio : 1.0);
      break;
    case OpKind::optimizer: flops_rate = gpu.peak_for(hardware::Dtype::fp32) * 0.5; break;
    default: flops_rate = gpu.peak_for(hardware::Dtype::fp32);
  }
  const double compute = flops_rate > 0 ? op.flops / flops_rate : 0;
  const double memory = op.bytes / (gpu.memory_bandwidth_Bps * eff.memory);
  // Roofline: the slower of compute and memory. Eager PyTorch dispatches each kernel from the
  // host (~5-10 us of Python and dispatcher per op, PyTorch 2 paper, Ansel et al. 2024): when a
  // kernel is shorter than that, the host is the bound.
  const double gpu_time = std::max(compute, memory);
  const double kernels = std::max(1, op.kernels) * (p.job.compile ? 0.35 : 1.0);  // compile fuses pointwise ops
  return std::max(gpu_time, kernels * eff.launch_s);
}

namespace {

struct Topology {
  int gpus_per_node = 1;
  int dp_per_node = 1;  // data-parallel ranks of one group inside a node
  bool dp_spans_nodes = false;
  bool nvlink = false;
  double nvlink_Bps = 0;
  double nic_Bps = 0;   // this GPU's share of the node's NICs
  double pcie_Bps = 0;
  double nic_latency_s = 0;
  // Host side, per rank (every rank of a node does the same at the same time, so each gets its
  // share of what the node's ranks share):
  double uplink_Bps = 0;      // the PCIe switch uplink this GPU sits behind, / GPUs behind it
  double dram_Bps = 0;        // host DRAM bandwidth / ranks per node
  double nvme_read_Bps = 0;   // striped drives' read bandwidth / ranks per node
  double nvme_write_Bps = 0;  // their write bandwidth (burst or sustained, see nvme_write_rate) / ranks
  double cpu_params_per_s = 0;  // CPU optimizer throughput available to this rank
};

// Achievable DRAM bandwidth over the theoretical channels x speed x 8 B: STREAM triad reaches
// ~74-78% of peak (TI SPRAD45A; hardware-figures.md "Host").
constexpr double kDramEfficiency = 0.75;
// Bytes an AdamW step touches per parameter: read master, gradient, m, v; write master, m, v
// (DeepSpeed CPU Adam; 26-30 B, hardware-figures.md "Host").
constexpr double kAdamBytesPerParam = 28.0;

Topology topology_of(const plan::Plan& p, const Efficiency& eff) {
  Topology t;
  const plan::Cluster& c = p.cluster;
  t.gpus_per_node = std::max(1, c.gpus_per_node);
  // The data-parallel group holds the context-parallel ranks too (plan::sharding_in_effect): in
  // Megatron's order (tp, cp, dp from the inside out) its members are tp ranks apart.
  const int inner = std::max(1, p.parallel.tp);
  const int dp = plan::gradient_group_size(p);
  t.dp_per_node = std::max(1, std::min(dp, t.gpus_per_node / std::min(inner, t.gpus_per_node)));
  t.dp_spans_nodes = dp > t.dp_per_node;
  t.nvlink = c.node.gpu_interconnect == "nvlink" && c.gpu.nvlink_bandwidth_Bps > 0;
  t.pcie_Bps = c.gpu.host_link.bandwidth_Bps() * eff.pcie;
  t.nvlink_Bps = t.nvlink ? c.gpu.nvlink_bandwidth_Bps * eff.nvlink
                          : t.pcie_Bps * 0.5;  // GPU-to-GPU through the root complex: both directions share it
  double nic = 0, latency = 0;
  for (const auto& [spec, count] : c.nics) {
    nic += spec.bandwidth_Bps * spec.ports * count;
    latency = std::max(latency, spec.latency_s);
  }
  t.nic_Bps = nic > 0 ? nic / c.host_ranks() * eff.network : 1.25e9;  // no NIC listed: 10 GbE
  t.nic_latency_s = latency > 0 ? latency : 5e-6;

  // The switch uplink a GPU shares with the GPUs (and their traffic) behind the same switch.
  t.uplink_Bps = t.pcie_Bps;
  for (const auto& sw : c.node.pcie_switches)
    if (sw.gpus > 0) {
      t.uplink_Bps = std::min(t.pcie_Bps, sw.uplink.bandwidth_Bps() * eff.pcie / sw.gpus);
      break;
    }
  const int ranks = c.host_ranks();  // this rank's share of the host and drives
  t.dram_Bps = (eff.dram_Bps > 0 ? eff.dram_Bps : c.host.dram_bandwidth_Bps() * kDramEfficiency) / ranks;
  // Striped drives (RAID-0): the sum of the drives, each capped by its own PCIe link.
  double read = 0, write = 0;
  for (const auto& [d, n] : c.drives) {
    const double link = d.interface.bandwidth_Bps() > 0 ? d.interface.bandwidth_Bps() : d.seq_read_Bps;
    read += n * std::min(d.seq_read_Bps, link);
    write += n * std::min(d.sustained_write_Bps, link);
  }
  if (eff.nvme_read_Bps > 0) read = eff.nvme_read_Bps;  // measured on this machine's drives
  if (eff.nvme_write_Bps > 0) write = eff.nvme_write_Bps;
  t.nvme_read_Bps = read / ranks;
  t.nvme_write_Bps = write / ranks;
  // CPU optimizer: DRAM-bound at ~28 B per parameter on the rank's share of the host, or what
  // the calibration measured.
  t.cpu_params_per_s = eff.cpu_optimizer_params_per_s > 0 ? eff.cpu_optimizer_params_per_s / ranks
                                                          : t.dram_Bps / kAdamBytesPerParam;
  return t;
}

des::Time ns(double seconds) { return static_cast<des::Time>(std::llround(std::max(0.0, seconds) * 1e9)); }

struct StageRun {
  double step_s = 0;
  double compute_s = 0, exposed_comm_s = 0;
  std::vector<StreamUse> streams;
  std::vector<LinkUse> links;
  double peak[3] = {0, 0, 0};
  std::string problem;
  std::string trace;
  std::vector<Interval> intervals;
  double nvme_written = 0;
  // Per stage, per tier (gpu, host, nvme), for the shortened pipeline's extrapolation (filled by
  // collect_step when asked): `steady` is the pool's high-water mark from the first backward
  // kernel's start to the last forward's end (the pipeline's steady state, the stage's in-flight
  // micro-batches all held), `ramp` the one before and after it up to the last backward's end
  // (the warm-up and the drain), `after` the one after that (the optimizer step); `held` the live
  // bytes as the first backward starts.
  struct PhasePeaks {
    double steady[3] = {0, 0, 0};
    double ramp[3] = {0, 0, 0};
    double after[3] = {0, 0, 0};
    double held[3] = {0, 0, 0};
  };
  std::vector<PhasePeaks> stage_peaks;
  // Busy time of the comm and comm-reduce streams between the first and the last micro-batch's
  // backward end (the steady state, for extrapolating the SM-sharing probe).
  double comm_window_s[2] = {0, 0};
};

// The blended write rate of a rank's share of the drives over one step: a drive writes at its
// burst rate until its SLC/DRAM cache fills, then at its sustained rate. Per step each drive
// takes its share of the node's writes; the blended rate is bytes / (cached part at burst + the
// rest at sustained). (The cache is taken as empty at each step's start: an optimistic bound
// when steps follow back to back.)
double nvme_write_rate(const plan::Plan& p, const schedule::StepIR& ir, double sustained_share_Bps) {
  const double written = ir.nvme_step_written_bytes >= 0 ? ir.nvme_step_written_bytes : schedule::nvme_written_bytes(ir);
  double drives = 0, burst = 0, sustained = 0, cache = 0;
  for (const auto& [d, n] : p.cluster.drives) {
    drives += n;
    burst += n * d.seq_write_Bps;
    sustained += n * d.sustained_write_Bps;
    cache += n * d.write_cache_bytes;
  }
  if (written <= 0 || drives <= 0 || burst <= sustained) return sustained_share_Bps;
  const int ranks = p.cluster.host_ranks();  // the drives' share of this plan's ranks, and theirs
  const double node_bytes = written * ranks;
  const double cached = std::min(node_bytes, cache);
  const double node_rate = node_bytes / (cached / burst + (node_bytes - cached) / sustained);
  return node_rate / ranks;
}

// One stage's representative rank lowered onto an engine: its streams, links and pools, and the
// task of each IR op.
struct Lowered {
  std::vector<des::QueueId> queues;  // by Stream
  std::vector<des::LinkId> links;    // the stage's own links
  des::LinkId nvlink{}, nic{};
  des::PoolId pools[3]{};            // by Tier
  std::vector<des::TaskId> task;     // by op index
  // Compute ops fused into one engine task (see lower_stage): the op's start within its task;
  // -1 for ops that are a task of their own.
  std::vector<des::Time> offset;
  std::vector<des::Time> duration;
  // Compute ops: the kernel's time before SM sharing (compute_seconds), for retime.
  std::vector<double> base_s;
  des::Time start(const des::Result& r, std::size_t i) const {
    const des::Time base = r.tasks[task[i].index].start;
    return offset[i] < 0 ? base : base + offset[i];
  }
  des::Time end(const des::Result& r, std::size_t i) const {
    return offset[i] < 0 ? r.tasks[task[i].index].end : start(r, i) + duration[i];
  }
};

bool gpu_kernel(const Op& op) {
  return op.stream == Stream::compute && (op.kind == OpKind::gemm || op.kind == OpKind::attention ||
                                          op.kind == OpKind::elementwise || op.kind == OpKind::loss ||
                                          op.kind == OpKind::optimizer);
}

// The links one rank's traffic crosses, and those reported as its own.
struct RankLinks {
  des::LinkId nvlink{}, nic{}, pcie{}, uplink{}, dram{}, nvme_read{}, nvme_write{};
  // Pageable host memory: the driver copies through its own pinned staging buffer with the CPU,
  // chunk by chunk, so such copies also cross this (slower) stage.
  des::LinkId pageable{};
  des::LinkId cpu{};  // the host cores a CPU optimizer step runs on (HostLink::cpu)
  std::vector<des::LinkId> own;
};

// The representative rank of a stage: every link its own, with its share of what the node's
// ranks share (they all do the same at the same time).
RankLinks representative_links(des::Engine& e, const plan::Plan& p, const schedule::StepIR& ir, const Topology& topo,
                               const Efficiency& eff, const std::string& prefix) {
  RankLinks k;
  const auto link = [&](const std::string& name, double Bps) {
    k.own.push_back(e.add_link(prefix + name, std::max(1.0, Bps)));
    return k.own.back();
  };
  k.nvlink = link(topo.nvlink ? "nvlink" : "gpu-gpu (pcie)", topo.nvlink_Bps);
  k.nic = link("network", topo.nic_Bps);
  k.pcie = link(to_string(HostLink::pcie), topo.pcie_Bps);
  k.uplink = link(to_string(HostLink::uplink), topo.uplink_Bps);
  k.dram = link(to_string(HostLink::dram), topo.dram_Bps);
  k.nvme_read = link(to_string(HostLink::nvme_read), topo.nvme_read_Bps);
  k.nvme_write = link(to_string(HostLink::nvme_write), nvme_write_rate(p, ir, topo.nvme_write_Bps));
  k.pageable = link(to_string(HostLink::pageable), topo.pcie_Bps * eff.pageable_fraction);
  k.cpu = link(to_string(HostLink::cpu), topo.cpu_params_per_s * kAdamBytesPerParam);
  return k;
}

// Where a rank sits, for the full-fidelity mode (every rank simulated): its index, how many
// there are, the rank of its next pipeline stage, and the instance of each group it belongs to;
// collectives of one instance start when every member is ready (`joins`, shared by the ranks).
struct RankPlace {
  int rank = 0, ranks = 1, pp_stride = 0;
  int t = 0, c = 0, d = 0, s = 0;  // coordinates in Megatron's order tp, cp, dp, pp (inside out)
  int tp = 1, cp = 1, dp = 1;
  std::map<std::pair<std::size_t, std::int64_t>, des::TaskId>* joins = nullptr;
  std::string prefix;
  // The instance of a `size`-rank group of kind `g` this rank belongs to: its coordinates with
  // the group's own one replaced by the block of `size` it falls in (ep is carved out of dp).
  std::int64_t group_key(schedule::Group g, int size) const {
    size = std::max(1, size);
    std::int64_t k = s;
    if (g == schedule::Group::replicate) {
      // Hybrid sharding's replicas: the ranks at the same place of every shard group.
      const int shard = std::max(1, dp * cp / size);
      k = k * dp * cp + (static_cast<std::int64_t>(d) * cp + c) % shard;
      return k * tp + t;
    }
    if (g == schedule::Group::dp) {
      // The data-parallel group spans the context-parallel ranks: blocks of `size` of d x cp + c.
      k = k * dp * cp + (static_cast<std::int64_t>(d) * cp + c) / size;
      return k * tp + t;
    }
    k = k * dp + (g == schedule::Group::ep ? d / size : d);
    k = k * cp + (g == schedule::Group::cp ? c / size : c);
    return k * tp + (g == schedule::Group::tp ? t / size : t);
  }
};

// compute_seconds of the ops of one lowering: identical layers repeat the same few GEMM and
// attention shapes, so their durations are looked up among the last distinct ones (a few dozen)
// rather than recomputed for every layer and micro-batch.
class DurationMemo {
 public:
  double operator()(const Op& op, const plan::Plan& p, const Efficiency& eff) {
    if (op.kind != OpKind::gemm && op.kind != OpKind::attention) return compute_seconds(op, p, eff);
    const Key key{op.kind, op.pass, op.weight_grad, op.fp8, op.flash, op.flash_v1, op.causal, op.kernels,
                  op.m, op.n, op.k, op.flops, op.bytes};
    for (std::size_t i = 0; i < size_; ++i)
      if (entries_[i].first == key) return entries_[i].second;
    const double seconds = compute_seconds(op, p, eff);
    entries_[next_] = {key, seconds};
    next_ = (next_ + 1) % entries_.size();
    size_ = std::min(size_ + 1, entries_.size());
    return seconds;
  }

 private:
  struct Key {
    OpKind kind;
    schedule::Pass pass;
    bool weight_grad, fp8, flash, flash_v1, causal;
    int kernels;
    std::int64_t m, n, k;
    double flops, bytes;
    bool operator==(const Key&) const = default;
  };
  std::array<std::pair<Key, double>, 32> entries_{};
  std::size_t size_ = 0, next_ = 0;
};

// A GPU kernel's engine duration from its base time: slowed by the SMs NCCL takes, except the
// optimizer step, which runs after the step's communication (lower_stage and retime).
des::Time kernel_ns(const Op& op, double base_s, double compute_slowdown) {
  return ns(base_s * (op.kind == OpKind::optimizer ? 1.0 : compute_slowdown));
}

// What a rank's pools hold at most (gpu, host, nvme): the GPU's usable memory, its share of the
// host's DRAM and of the drives (lower_stage's pools; the shortened pipeline's memory check).
std::array<double, 3> pool_capacities(const plan::Cluster& c) {
  double nvme = 0;
  for (const auto& [d, n] : c.drives) nvme += d.capacity_bytes * n;
  return {c.gpu.usable_memory_bytes, c.host.dram_bytes / c.host_ranks(), std::max(1.0, nvme / c.host_ranks())};
}

Lowered lower_stage(des::Engine& e, const plan::Plan& p, const schedule::StepIR& ir, const Efficiency& eff,
                    const Topology& topo, double compute_slowdown, bool pp_across_nodes, bool trace, const RankLinks& links,
                    const RankPlace& place, std::vector<std::pair<std::int64_t, des::TaskId>>& sends,
                    std::vector<std::pair<std::int64_t, des::TaskId>>& receives) {
  Lowered l;
  const std::string& prefix = place.prefix;
  for (int s = 0; s < schedule::kStreams; ++s)
    l.queues.push_back(e.add_queue(prefix + schedule::to_string(static_cast<Stream>(s))));
  l.links = links.own;
  l.nvlink = links.nvlink;
  l.nic = links.nic;
  const des::LinkId pcie = links.pcie, uplink = links.uplink, dram = links.dram, nvme_read = links.nvme_read,
                    nvme_write = links.nvme_write, pageable = links.pageable;
  // The fixed cost an op pays before its bytes move (ring steps, DMA setup), as a task on its queue.
  const auto latency_task = [&](des::QueueId q, double seconds, std::size_t i, const Op& op) {
    return e.compute(q, ns(seconds),
                     des::Label{trace ? op.name + " (latency)" : std::string(), "latency", static_cast<std::int32_t>(i)});
  };
  const auto after_deps = [&](des::TaskId t, const Op& op, const std::vector<des::TaskId>& task) {
    for (int d : op.deps) e.depends(t, task[d]);
  };
  // The task a collective's latency part waits on: its own deps, or in full fidelity the join of
  // its group instance, which waits for every member's deps.
  const auto collective_start = [&](std::size_t i, const Op& op, des::TaskId wait, const std::vector<des::TaskId>& task) {
    if (!place.joins) {
      after_deps(wait, op, task);
      return;
    }
    const auto key = std::make_pair(i, place.group_key(op.group, op.group_size));
    auto it = place.joins->find(key);
    if (it == place.joins->end()) it = place.joins->emplace(key, e.marker(des::kNoQueue, des::Label{std::string(), "join", 0})).first;
    for (int d : op.deps) e.depends(it->second, task[d]);
    e.depends(wait, it->second);
  };
  const plan::Cluster& c = p.cluster;
  const std::array<double, 3> capacity = pool_capacities(c);
  l.pools[0] = e.add_pool(prefix + "gpu", capacity[0]);
  l.pools[1] = e.add_pool(prefix + "host (per rank)", capacity[1]);
  l.pools[2] = e.add_pool(prefix + "nvme (per rank)", capacity[2]);

  std::vector<des::TaskId>& task = l.task;
  const std::size_t n = ir.ops.size();
  DurationMemo seconds_of;
  task.resize(n);
  l.offset.assign(n, -1);
  l.duration.assign(n, 0);
  l.base_s.assign(n, -1.0);
  // Back-to-back GPU kernels on the compute stream that nothing else waits for in between run as
  // one engine task of their summed (nanosecond-rounded) durations: the stream is serial and
  // their durations are fixed, so every op's start and end are exactly what separate tasks would
  // give (collect_stage reads them back through `offset`). Traces keep one task per op.
  std::vector<std::uint32_t> dependents(n, 0);
  for (const Op& op : ir.ops)
    for (int d : op.deps) ++dependents[d];
  std::vector<char> pending(n, 0);
  std::vector<std::size_t> chain;  // ops of the chain being built
  des::Time chain_ns = 0;
  int last_compute = -1;           // last op issued on the compute stream
  const auto flush = [&] {
    if (chain.empty()) return;
    const Op& head = ir.ops[chain.front()];
    const des::TaskId t = e.compute(l.queues[0], chain_ns, des::Label{std::string(), schedule::to_string(head.kind),
                                                                       static_cast<std::int32_t>(chain.front())});
    for (std::size_t i : chain) {
      task[i] = t;
      pending[i] = 0;
      for (int d : ir.ops[i].deps)
        if (!pending[d] && std::find(chain.begin(), chain.end(), static_cast<std::size_t>(d)) == chain.end())
          e.depends(t, task[d]);
    }
    if (chain.size() == 1) l.offset[chain.front()] = -1;
    chain.clear();
    chain_ns = 0;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = ir.ops[i];
    if (!trace && gpu_kernel(op)) {
      // Joins the chain when the chain's last op is the previous op on this stream and only this op waits on it.
      // It must wait for nothing but the chain and earlier ops of its stream: a wait on another
      // stream would hold back the whole chain.
      std::uint32_t on_back = 0;
      bool inside = true;
      if (!chain.empty())
        for (int d : op.deps) {
          on_back += static_cast<std::size_t>(d) == chain.back();
          inside = inside && (pending[d] || ir.ops[d].stream == Stream::compute);
        }
      const bool joins = !chain.empty() && inside && static_cast<int>(chain.back()) == last_compute &&
                         dependents[chain.back()] == on_back;
      if (!joins) flush();
      l.base_s[i] = seconds_of(op, p, eff);
      const des::Time d = kernel_ns(op, l.base_s[i], compute_slowdown);
      l.offset[i] = chain_ns;
      l.duration[i] = d;
      chain_ns += d;
      chain.push_back(i);
      pending[i] = 1;
      last_compute = static_cast<int>(i);
      continue;
    }
    // Anything else: the chain must exist first if this op is on the compute stream or waits on it.
    bool waits = op.stream == Stream::compute;
    for (int d : op.deps) waits = waits || pending[d];
    if (waits) flush();
    if (op.stream == Stream::compute) last_compute = static_cast<int>(i);
    const des::QueueId q = l.queues[static_cast<int>(op.stream)];
    des::Label label{trace ? op.name : std::string(), schedule::to_string(op.kind), static_cast<std::int32_t>(i)};
    switch (op.kind) {
      case OpKind::gemm:
      case OpKind::attention:
      case OpKind::elementwise:
      case OpKind::loss:
        l.base_s[i] = seconds_of(op, p, eff);
        task[i] = e.compute(q, kernel_ns(op, l.base_s[i], compute_slowdown), std::move(label));
        break;
      case OpKind::optimizer:
        if (op.stream == Stream::cpu) {
          // CPU Adam streams its state through DRAM: the bytes it moves (the IR's 28 B per
          // parameter: DeepSpeed's cpu_adam reads master, gradient, m and v and writes master, m
          // and v, csrc/includes/cpu_adam.h Step_AVX) flow over the host cores, at their measured
          // AdamW rate x 28 B, and over the DRAM link, where they contend with the copies and NVMe
          // traffic that also cross host memory. (Before, the DRAM link carried an equivalent of
          // its time, seconds x DRAM bandwidth: the executor showed those were not the bytes moved.)
          task[i] = e.transfer(q, {links.cpu, dram}, op.bytes, std::move(label));
        } else {
          l.base_s[i] = compute_seconds(op, p, eff);
          task[i] = e.compute(q, kernel_ns(op, l.base_s[i], compute_slowdown), std::move(label));
        }
        break;
      case OpKind::collective: {
        if (op.collective == Collective::send_recv && op.group == schedule::Group::pp) {
          // Pipeline send to the neighbouring stage: over the NIC when stages sit on different
          // nodes (Megatron puts pp outermost), else over NVLink; the receiver waits for it.
          const double latency = pp_across_nodes ? topo.nic_latency_s : eff.collective_step_s;
          const des::TaskId wait = latency_task(q, latency, i, op);
          after_deps(wait, op, task);
          task[i] = e.transfer(q, {pp_across_nodes ? l.nic : l.nvlink}, op.bytes, std::move(label));
          e.depends(task[i], wait);
          const int receiver = place.rank + (op.peer - ir.stage) * place.pp_stride;
          sends.emplace_back(op.tag * place.ranks + receiver, task[i]);
          continue;
        }
        // Ring collectives, decomposed the way NCCL runs them across nodes (one ring per NIC,
        // each carrying 1/G of the data between nodes): inside a node each rank moves the
        // ring volume of the whole tensor over NVLink; between N nodes it moves the ring volume
        // of 1/G of it over its own NIC. Both phases pipeline, so they run as concurrent flows.
        int group = op.group_size;
        bool inter = false;
        // Megatron's rank order is tp, cp, ep, dp, pp from the inside out: a group spans nodes
        // when it and the groups inside it outgrow a node.
        const int tp = std::max(1, p.parallel.tp), cp = std::max(1, p.parallel.cp);
        if (op.group == schedule::Group::replicate) inter = true;  // one member per node (shard groups fill nodes)
        else if (op.group == schedule::Group::dp) inter = topo.dp_spans_nodes;
        else if (op.group == schedule::Group::tp) inter = tp > topo.gpus_per_node;
        else if (op.group == schedule::Group::cp) inter = tp * cp > topo.gpus_per_node;
        else if (op.group == schedule::Group::ep) inter = tp * cp * group > topo.gpus_per_node;
        int per_node = topo.gpus_per_node;  // ranks of the group inside one node
        if (op.group == schedule::Group::replicate) per_node = 1;
        else if (op.group == schedule::Group::dp) per_node = topo.dp_per_node;
        else if (op.group == schedule::Group::cp) per_node = std::max(1, topo.gpus_per_node / tp);
        else if (op.group == schedule::Group::ep) per_node = std::max(1, topo.gpus_per_node / (tp * cp));
        const int local = inter ? std::max(1, std::min(group, per_node)) : group;
        const int across = inter ? std::max(1, group / local) : 1;
        // Latency: NCCL's rings are flat, one ring through every rank of the group (NCCL docs,
        // "Rings"), so a ring collective takes group - 1 steps (all-reduce twice that), each as
        // slow as the ring's slowest hop: the network's when the group spans nodes. For all-reduce
        // NCCL may pick its tree instead (inter-node double binary tree over the nodes, a chain
        // inside each; Jeaugey 2019, "Massively Scale Your Deep Learning Training with NCCL 2.4"):
        // 2 (log2 nodes network hops + local - 1 NVLink hops); it takes the faster.
        const double hop = eff.collective_step_s + (inter ? topo.nic_latency_s : 0.0);
        double alpha = (group - 1) * hop * (op.collective == Collective::all_reduce ? 2 : 1);
        // All-to-all and a ring-attention pass are one round of concurrent send/recv pairs.
        if (op.collective == Collective::all_to_all || op.collective == Collective::send_recv) alpha = hop;
        if (op.collective == Collective::all_reduce && inter)
          alpha = std::min(alpha, 2.0 * (std::ceil(std::log2(static_cast<double>(across))) *
                                             (eff.collective_step_s + topo.nic_latency_s) +
                                         (local - 1) * eff.collective_step_s));
        // The framework's host work before the collective can be issued (see Op::host_s).
        alpha += op.host_s + op.kernels * eff.launch_s;
        const des::TaskId wait = latency_task(q, alpha, i, op);
        collective_start(i, op, wait, task);
        double intra_bytes = ring_bytes(op.collective, op.bytes, local);
        double inter_bytes = ring_bytes(op.collective, op.bytes / local, across);
        if (op.collective == Collective::all_to_all) {
          // Every rank sends 1/n of its buffer to each other rank: those in its node over
          // NVLink, the rest through its own NIC.
          intra_bytes = op.bytes * (local - 1) / group;
          inter_bytes = op.bytes * (group - local) / group;
        } else if (op.collective == Collective::send_recv) {
          intra_bytes = inter ? 0.0 : op.bytes;  // a ring neighbour: in the node or through the NIC
          inter_bytes = inter ? op.bytes : 0.0;
        }
        const des::TaskId a = e.transfer(q, {l.nvlink}, intra_bytes, std::move(label));
        e.depends(a, wait);
        task[i] = a;
        if (inter_bytes > 0) {
          // The NIC phase: a flow of its own that the op's completion also waits for.
          const des::TaskId b = e.transfer(des::kNoQueue, {l.nic}, inter_bytes,
                                           des::Label{trace ? op.name + " (between nodes)" : std::string(), "network", static_cast<std::int32_t>(i)});
          e.depends(b, wait);
          const des::TaskId join = e.marker(q, des::Label{trace ? op.name + " done" : std::string(), "marker", static_cast<std::int32_t>(i)});
          e.depends(join, a);
          e.depends(join, b);
          task[i] = join;
        }
        continue;  // deps attached to the latency part
      }
      case OpKind::copy: {
        // GPU <-> host copies cross the GPU's link, its switch uplink and host DRAM; NVMe traffic
        // crosses the drives and host DRAM (no GPUDirect Storage).
        std::vector<des::LinkId> path;
        for (const HostLink h : host_path(op, p)) {
          switch (h) {
            case HostLink::pcie: path.push_back(pcie); break;
            case HostLink::uplink: path.push_back(uplink); break;
            case HostLink::dram: path.push_back(dram); break;
            case HostLink::nvme_read: path.push_back(nvme_read); break;
            case HostLink::nvme_write: path.push_back(nvme_write); break;
            case HostLink::pageable: path.push_back(pageable); break;
            case HostLink::cpu: path.push_back(links.cpu); break;
          }
        }
        const bool gpu_host = op.src == plan::Tier::gpu || op.dst == plan::Tier::gpu;
        if (gpu_host && eff.copy_latency_s > 0) {
          // The per-copy cost a calibration measured (DMA setup and launch), before the bytes move.
          const des::TaskId wait = latency_task(q, eff.copy_latency_s, i, op);
          after_deps(wait, op, task);
          task[i] = e.transfer(q, path, op.bytes, std::move(label));
          e.depends(task[i], wait);
          continue;
        }
        task[i] = e.transfer(q, path, op.bytes, std::move(label));
        break;
      }
      case OpKind::alloc:
        task[i] = e.alloc(q, l.pools[static_cast<int>(ir.tensors[op.tensor].tier)], ir.tensors[op.tensor].bytes,
                          std::move(label));
        break;
      case OpKind::free:
        task[i] = e.free(q, l.pools[static_cast<int>(ir.tensors[op.tensor].tier)], ir.tensors[op.tensor].bytes,
                         std::move(label));
        break;
      case OpKind::marker:
        task[i] = e.marker(q, std::move(label));
        if (op.peer >= 0) receives.emplace_back(op.tag * place.ranks + place.rank, task[i]);
        break;
    }
    after_deps(task[i], op, task);
  }
  flush();
  return l;
}

// A lowered stage's kernels set to `compute_slowdown` (the durations lower_stage gives them,
// from each op's base time): the same engine runs again without being lowered again. `sums` is
// scratch indexed by task.
void retime(des::Engine& e, Lowered& l, const schedule::StepIR& ir, double compute_slowdown, std::vector<des::Time>& sums) {
  sums.assign(e.task_count(), -1);
  std::vector<std::uint32_t> touched;
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    if (l.base_s[i] < 0) continue;
    const Op& op = ir.ops[i];
    const des::Time d = kernel_ns(op, l.base_s[i], compute_slowdown);
    des::Time& sum = sums[l.task[i].index];
    if (sum < 0) {
      sum = 0;
      touched.push_back(l.task[i].index);
    }
    if (l.offset[i] >= 0) l.offset[i] = sum;
    l.duration[i] = d;
    sum += d;
  }
  for (std::uint32_t t : touched) e.set_duration(des::TaskId{t}, sums[t]);
}

// What one stage's rank did, read from the engine's result.
StageRun collect_stage(const des::Engine& e, const des::Result& r, const schedule::StepIR& ir, const Lowered& l,
                       bool activity) {
  StageRun out;
  out.step_s = static_cast<double>(r.makespan) * 1e-9;
  for (int t = 0; t < 3; ++t) out.peak[t] = r.pool_peak_bytes[l.pools[t].index];
  for (const des::QueueId q : l.queues) {
    const double busy = static_cast<double>(r.queue_busy[q.index]) * 1e-9;
    if (busy <= 0) continue;
    out.streams.push_back({e.queue_name(q), busy, out.step_s > 0 ? busy / out.step_s : 0});
  }
  for (const des::LinkId k : l.links) {
    if (r.link_bytes[k.index] <= 0) continue;
    const double busy = static_cast<double>(r.link_busy[k.index]) * 1e-9;
    out.links.push_back({e.link_name(k), r.link_bytes[k.index], busy, out.step_s > 0 ? busy / out.step_s : 0});
  }
  // Split the compute stream's gaps: waiting for a collective or copy (exposed communication)
  // versus anything else (idle, pipeline bubbles included).
  des::Time prev_end = 0;
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const Op& op = ir.ops[i];
    if (op.stream != Stream::compute) continue;
    const des::Time start = l.start(r, i), end = l.end(r, i);
    if (op.kind == OpKind::gemm || op.kind == OpKind::attention || op.kind == OpKind::elementwise ||
        op.kind == OpKind::loss || op.kind == OpKind::optimizer)
      out.compute_s += static_cast<double>(end - start) * 1e-9;
    const des::Time gap = start - prev_end;
    if (gap > 0) {
      bool comm = false;
      for (int d : op.deps) {
        const Op& dep = ir.ops[d];
        if ((dep.kind == OpKind::collective && dep.collective != Collective::send_recv) || dep.kind == OpKind::copy)
          if (l.end(r, d) >= start) comm = true;
      }
      if (comm) out.exposed_comm_s += static_cast<double>(gap) * 1e-9;
    }
    prev_end = std::max(prev_end, end);
  }
  // What each component did, for the power model.
  if (!activity) return out;
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const Op& op = ir.ops[i];
    const des::Time start = l.start(r, i), end = l.end(r, i);
    if (end <= start) continue;
    Interval iv;
    iv.start_s = static_cast<double>(start) * 1e-9;
    iv.end_s = static_cast<double>(end) * 1e-9;
    switch (op.kind) {
      case OpKind::gemm: iv.activity = Activity::gemm; break;
      case OpKind::attention: iv.activity = Activity::attention; break;
      case OpKind::elementwise:
      case OpKind::loss: iv.activity = Activity::memory_bound; break;
      case OpKind::optimizer:
        iv.activity = op.stream == Stream::cpu ? Activity::cpu_compute : Activity::memory_bound;
        if (op.stream == Stream::cpu) iv.component = Interval::Component::cpu;
        break;
      case OpKind::collective: iv.activity = Activity::communication; break;
      case OpKind::copy:
        iv.activity = op.stream == Stream::nvme_write ? Activity::nvme_write
                      : op.stream == Stream::nvme_read ? Activity::nvme_read
                                                       : Activity::copy;
        if (op.stream == Stream::nvme_read || op.stream == Stream::nvme_write) iv.component = Interval::Component::nvme;
        if (op.stream == Stream::nvme_write) out.nvme_written += op.bytes;
        break;
      default: continue;
    }
    // Back-to-back intervals of one component doing the same thing draw the same power: one interval.
    if (!out.intervals.empty() && out.intervals.back().component == iv.component &&
        out.intervals.back().activity == iv.activity && out.intervals.back().end_s == iv.start_s)
      out.intervals.back().end_s = iv.end_s;
    else
      out.intervals.push_back(iv);
  }
  return out;
}

// Full fidelity: every rank, each with its own GPU links (NVLink port, NIC rail, PCIe link) and
// the node's shared ones at their whole rate (the PCIe switch uplinks, host DRAM, the drives);
// `reported[s]` is the index in `lowered` of stage s's first rank.
void lower_every_rank(des::Engine& e, const plan::Plan& p, const std::vector<schedule::StepIR>& irs, const Efficiency& eff,
                      const Topology& topo, double compute_slowdown, bool pp_across_nodes, bool trace,
                      std::vector<Lowered>& lowered, std::vector<int>& reported,
                      std::vector<std::pair<std::int64_t, des::TaskId>>& sends,
                      std::vector<std::pair<std::int64_t, des::TaskId>>& receives) {
  const int tp = std::max(1, p.parallel.tp), cp = std::max(1, p.parallel.cp), dp = plan::data_parallel_degree(p);
  const int pp = std::max(1, p.parallel.pp);
  const int ranks = tp * cp * dp * pp, g = topo.gpus_per_node;
  std::map<std::pair<std::size_t, std::int64_t>, des::TaskId> joins;
  std::map<int, RankLinks> node_links;  // shared links per node (uplinks per switch below)
  int behind_switch = 0;
  for (const auto& sw : p.cluster.node.pcie_switches)
    if (sw.gpus > 0) {
      behind_switch = sw.gpus;
      break;
    }
  std::map<std::pair<int, int>, des::LinkId> uplinks;
  for (int r = 0; r < ranks; ++r) {
    RankPlace place;
    place.rank = r;
    place.ranks = ranks;
    place.pp_stride = tp * cp * dp;
    place.tp = tp;
    place.cp = cp;
    place.dp = dp;
    place.t = r % tp;
    place.c = (r / tp) % cp;
    place.d = (r / (tp * cp)) % dp;
    place.s = r / (tp * cp * dp);
    place.joins = &joins;
    place.prefix = fmt::format("rank {} ", r);
    const int node = r / g, local = r % g;
    const schedule::StepIR& ir = irs[place.s];
    auto shared = node_links.find(node);
    if (shared == node_links.end()) {
      RankLinks n;
      const std::string np = fmt::format("node {} ", node);
      n.dram = e.add_link(np + "host dram", std::max(1.0, topo.dram_Bps * g));
      n.nvme_read = e.add_link(np + "nvme read", std::max(1.0, topo.nvme_read_Bps * g));
      n.nvme_write = e.add_link(np + "nvme write", std::max(1.0, nvme_write_rate(p, ir, topo.nvme_write_Bps) * g));
      n.cpu = e.add_link(np + "host cpu", std::max(1.0, topo.cpu_params_per_s * kAdamBytesPerParam * g));
      shared = node_links.emplace(node, n).first;
    }
    RankLinks k = shared->second;
    k.nvlink = e.add_link(place.prefix + (topo.nvlink ? "nvlink" : "gpu-gpu (pcie)"), std::max(1.0, topo.nvlink_Bps));
    k.nic = e.add_link(place.prefix + "network", std::max(1.0, topo.nic_Bps));
    k.pcie = e.add_link(place.prefix + "pcie", std::max(1.0, topo.pcie_Bps));
    if (behind_switch > 0) {
      const auto key = std::make_pair(node, local / behind_switch);
      auto it = uplinks.find(key);
      if (it == uplinks.end())
        it = uplinks.emplace(key, e.add_link(fmt::format("node {} pcie switch uplink {}", node, key.second),
                                             std::max(1.0, topo.uplink_Bps * behind_switch))).first;
      k.uplink = it->second;
    } else {
      k.uplink = k.pcie;
    }
    k.pageable = e.add_link(place.prefix + "pageable staging", std::max(1.0, topo.pcie_Bps * eff.pageable_fraction));
    k.own = {k.nvlink, k.nic, k.pcie, k.uplink, k.dram, k.nvme_read, k.nvme_write, k.pageable, k.cpu};
    if (place.t == 0 && place.c == 0 && place.d == 0) reported[place.s] = static_cast<int>(lowered.size());
    lowered.push_back(
        lower_stage(e, p, ir, eff, topo, compute_slowdown, pp_across_nodes, trace, k, place, sends, receives));
  }
}

// The step IR of every pipeline stage.
std::vector<schedule::StepIR> build_stages(const model::ModelSpec& m, const plan::Plan& p, int micro_batches, bool names) {
  std::vector<schedule::StepIR> irs(std::max(1, p.parallel.pp));
  for (int s = 0; s < static_cast<int>(irs.size()); ++s)
    irs[s] = schedule::build_step(m, p, inventory::build_inventory(m, p, s), micro_batches, names);
  return irs;
}

// What was live in the pool of `oom` when it overflowed, by memory category, largest first:
// " (weights 14.98 GiB, activations 10.02 GiB)": the tensors of `ir` allocated before the
// overflowing allocation (earlier, or at that instant and issued before it) and not yet freed.
std::string live_by_category(const schedule::StepIR& ir, const Lowered& l, const des::Result& r,
                             const des::OutOfMemory& oom) {
  std::array<double, inventory::kCategories> live{};
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const Op& op = ir.ops[i];
    if ((op.kind != OpKind::alloc && op.kind != OpKind::free) || l.task[i].index == des::kNone) continue;
    const schedule::Tensor& t = ir.tensors[op.tensor];
    if (l.pools[static_cast<int>(t.tier)].index != oom.pool.index) continue;
    const des::Time end = r.tasks[l.task[i].index].end;
    if (end == des::kNever || end > oom.time || (end == oom.time && l.task[i].index > oom.task.index)) continue;
    live[static_cast<std::size_t>(t.category)] += op.kind == OpKind::alloc ? t.bytes : -t.bytes;
  }
  std::vector<std::pair<double, int>> largest;
  for (int c = 0; c < inventory::kCategories; ++c)
    if (live[static_cast<std::size_t>(c)] > 0.005 * oom.live_bytes) largest.emplace_back(live[static_cast<std::size_t>(c)], c);
  std::sort(largest.rbegin(), largest.rend());
  std::vector<std::string> parts;
  for (const auto& [bytes, c] : largest)
    parts.push_back(fmt::format("{} {:.2f} GiB", inventory::to_string(static_cast<inventory::Category>(c)), bytes / (1u << 30)));
  return parts.empty() ? std::string() : fmt::format(" ({})", fmt::join(parts, ", "));
}

// One step of every pipeline stage (one representative rank each) in one engine, so the
// pipeline's bubbles and its point-to-point traffic come out of the simulation. Returns the
// stage whose compute stream is busiest (the pipeline's bottleneck) with the step's makespan,
// the GPU memory high-water mark over all stages, and that stage in `stage_out`.
// `irs` are the stages' step IRs (build_stages).
// One step of every pipeline stage (one representative rank each, or every rank in full
// fidelity) lowered onto one engine, so the pipeline's bubbles and its point-to-point traffic come
// out of the simulation; kept so that the step can run again with other kernel durations (retime:
// the SM-sharing probe, then the step). `real_stage[s]` is the plan's stage that irs[s] runs (a
// shortened pipeline's; empty: irs[s] is stage s).
struct LoweredStep {
  des::Engine e;
  std::vector<Lowered> lowered;  // representative: one per stage; full: one per rank
  std::vector<int> reported;     // index in `lowered` of each stage's reported rank
  std::string problem;
};

LoweredStep lower_step(const plan::Plan& p, const Efficiency& eff, bool trace, const std::vector<schedule::StepIR>& irs,
                       double compute_slowdown, bool full, const std::vector<int>& real_stage = {}) {
  const int pp = static_cast<int>(irs.size());
  const Topology topo = topology_of(p, eff);
  const int tp = std::max(1, p.parallel.tp), cp = std::max(1, p.parallel.cp), dp = plan::data_parallel_degree(p);
  const int ranks_between_stages = std::max(1, tp * cp * dp);
  const bool pp_across_nodes = ranks_between_stages >= topo.gpus_per_node && p.cluster.nodes > 1;
  LoweredStep out;
  des::Engine& e = out.e;
  std::vector<Lowered>& lowered = out.lowered;
  std::vector<int>& reported = out.reported;
  reported.assign(pp, 0);
  std::vector<std::pair<std::int64_t, des::TaskId>> sends, receives;
  {
    std::size_t ops = 0;
    for (const auto& ir : irs) ops += ir.ops.size();
    const std::size_t copies = full ? static_cast<std::size_t>(tp * cp * dp) : 1;
    e.reserve(ops * copies * 3 / 2, ops * copies * 2);
  }
  if (!full) {
    for (int s = 0; s < pp; ++s) {
      RankPlace place;
      place.prefix = pp > 1 ? fmt::format("stage {} ", real_stage.empty() ? s : real_stage[s]) : std::string();
      const RankLinks links = representative_links(e, p, irs[s], topo, eff, place.prefix);
      reported[s] = s;
      lowered.push_back(lower_stage(e, p, irs[s], eff, topo, compute_slowdown, pp_across_nodes, trace, links, place, sends,
                                    receives));
    }
  } else {
    lower_every_rank(e, p, irs, eff, topo, compute_slowdown, pp_across_nodes, trace, lowered, reported, sends, receives);
  }
  std::sort(sends.begin(), sends.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [tag, recv] : receives) {
    const auto it = std::lower_bound(sends.begin(), sends.end(), tag, [](const auto& s, std::int64_t t) { return s.first < t; });
    if (it == sends.end() || it->first != tag) {
      out.problem = "the pipeline schedule receives a tensor no stage sends";
      continue;
    }
    e.depends(recv, it->second);
  }
  return out;
}

// Every lowered kernel at `compute_slowdown`.
void retime_step(LoweredStep& step, const std::vector<schedule::StepIR>& irs, double compute_slowdown) {
  std::vector<des::Time> sums;
  const bool full = step.lowered.size() != irs.size();
  for (std::size_t i = 0; i < step.lowered.size(); ++i) {
    std::size_t s = i;
    if (full) {
      for (s = irs.size(); s-- > 0;)
        if (static_cast<std::size_t>(step.reported[s]) <= i) break;
    }
    retime(step.e, step.lowered[i], irs[s], compute_slowdown, sums);
  }
}

// What a run of a lowered step gives: the stage whose compute stream is busiest (the pipeline's
// bottleneck) with the step's makespan, the memory high-water marks over all stages, and that
// stage in `stage_out`.
// `phases`: also each stage's high-water marks by phase (StageRun::stage_peaks).
StageRun collect_step(const LoweredStep& step, const des::Result& r, const std::vector<schedule::StepIR>& irs,
                      int& stage_out, bool activity, bool trace, bool phases = false) {
  const int pp = static_cast<int>(irs.size());
  const des::Engine& e = step.e;
  const std::vector<Lowered>& lowered = step.lowered;
  const std::vector<int>& reported = step.reported;
  const std::string& problem = step.problem;
  StageRun out;
  int best = 0;
  double best_busy = -1, peaks[3] = {0, 0, 0};
  for (std::size_t i = 0; i < lowered.size(); ++i)
    for (int t = 0; t < 3; ++t) peaks[t] = std::max(peaks[t], r.pool_peak_bytes[lowered[i].pools[t].index]);
  std::vector<StageRun::PhasePeaks> stage_peaks(phases ? pp : 0);
  for (int s = 0; s < pp; ++s) {
    StageRun run = collect_stage(e, r, irs[s], lowered[reported[s]], activity && pp == 1);
    if (phases) {
      const Lowered& l = lowered[reported[s]];
      des::Time first_backward = std::numeric_limits<des::Time>::max(), last_forward = 0, last_backward = 0;
      for (std::size_t i = 0; i < irs[s].ops.size(); ++i) {
        const Op& op = irs[s].ops[i];
        if (op.stream != Stream::compute || !gpu_kernel(op)) continue;
        if (op.pass == schedule::Pass::backward) {
          first_backward = std::min(first_backward, l.start(r, i));
          last_backward = std::max(last_backward, l.end(r, i));
        } else if (op.pass == schedule::Pass::forward) {
          last_forward = std::max(last_forward, l.end(r, i));
        }
      }
      StageRun::PhasePeaks& pk = stage_peaks[s];
      for (int t = 0; t < 3; ++t) {
        const auto& series = r.pool_series[l.pools[t].index];
        for (const des::PoolSample& x : series) {
          if (x.time < first_backward) pk.held[t] = x.live_bytes;
          double& peak = x.time > last_backward                            ? pk.after[t]
                         : x.time >= first_backward && x.time <= last_forward ? pk.steady[t]
                                                                           : pk.ramp[t];
          peak = std::max(peak, x.live_bytes);
        }
        pk.steady[t] = std::max(pk.steady[t], pk.held[t]);
      }
    }
    if (run.compute_s > best_busy) {
      best_busy = run.compute_s;
      best = s;
      out = std::move(run);
    }
  }
  if (activity && pp > 1) out = collect_stage(e, r, irs[best], lowered[reported[best]], true);  // the busiest stage's timeline
  for (int t = 0; t < 3; ++t) out.peak[t] = peaks[t];
  out.stage_peaks = std::move(stage_peaks);
  if (!r.completed) out.problem = "the simulated step could not finish (a dependency cycle in the schedule)";
  if (!problem.empty()) out.problem = problem;
  if (!r.out_of_memory.empty()) {
    const auto& oom = r.out_of_memory.front();
    out.problem = fmt::format("{} ran out of memory at {:.3f} s: {:.2f} GiB live of {:.2f} GiB", e.pool_name(oom.pool),
                              static_cast<double>(oom.time) * 1e-9, oom.live_bytes / (1u << 30),
                              oom.capacity_bytes / (1u << 30));
    for (int s = 0; s < pp; ++s) {
      const Lowered& l = lowered[reported[s]];
      if (std::any_of(std::begin(l.pools), std::end(l.pools), [&](des::PoolId q) { return q.index == oom.pool.index; })) {
        out.problem += live_by_category(irs[s], l, r, oom);
        break;
      }
    }
  }
  if (trace) out.trace = des::chrome_trace(e, r);
  stage_out = best;
  return out;
}

StageRun run_step(const plan::Plan& p, const Efficiency& eff, bool trace, const std::vector<schedule::StepIR>& irs,
                  int& stage_out, double compute_slowdown, bool full, bool activity,
                  const std::vector<int>& real_stage = {}) {
  LoweredStep step = lower_step(p, eff, trace, irs, compute_slowdown, full, real_stage);
  return collect_step(step, step.e.run(), irs, stage_out, activity, trace);
}

// What a simulated step gives the result: the reported stage's run (every additive figure
// already extrapolated to the whole step where a shortcut was taken), its per-rank FLOPs and
// its timeline for the power model.
struct Simulated {
  StageRun run;
  int stage = 0;
  double model_flops = 0, hardware_flops = 0, frozen_grad_flops = 0;
  Timeline timeline;
};

// main + sum of w x (main - other) for every additive figure of a stage's run (sim/timeline.hpp):
// step, compute and exposed time, NVMe bytes, each stream's busy time, each link's bytes and busy
// time (matched by name).
StageRun extrapolate_run(const StageRun& main, const std::vector<std::pair<const StageRun*, double>>& others) {
  StageRun out = main;
  for (const auto& [o, w] : others) {
    out.step_s += w * (main.step_s - o->step_s);
    out.compute_s += w * (main.compute_s - o->compute_s);
    out.exposed_comm_s += w * (main.exposed_comm_s - o->exposed_comm_s);
    out.nvme_written += w * (main.nvme_written - o->nvme_written);
    for (std::size_t i = 0; i < out.streams.size(); ++i) {
      const auto it = std::find_if(o->streams.begin(), o->streams.end(), [&](const StreamUse& x) { return x.name == main.streams[i].name; });
      out.streams[i].busy_s += w * (main.streams[i].busy_s - (it == o->streams.end() ? 0.0 : it->busy_s));
    }
    for (std::size_t i = 0; i < out.links.size(); ++i) {
      const auto it = std::find_if(o->links.begin(), o->links.end(), [&](const LinkUse& x) { return x.name == main.links[i].name; });
      out.links[i].bytes += w * (main.links[i].bytes - (it == o->links.end() ? 0.0 : it->bytes));
      out.links[i].busy_s += w * (main.links[i].busy_s - (it == o->links.end() ? 0.0 : it->busy_s));
    }
  }
  for (auto& st : out.streams) st.utilization = out.step_s > 0 ? st.busy_s / out.step_s : 0;
  for (auto& l : out.links) l.utilization = out.step_s > 0 ? l.busy_s / out.step_s : 0;
  return out;
}

// The busier of the reported stage's communication streams (NCCL's kernels), seconds.
double comm_busy_s(const StageRun& run) {
  double busy = 0;
  for (const auto& st : run.streams)
    if (st.name.ends_with("comm") || st.name.ends_with("comm-reduce")) busy = std::max(busy, st.busy_s);
  return busy;
}

// NCCL kernels take SMs from the compute kernels they overlap with: compute slows by the SMs'
// share NCCL holds for the fraction of the step its streams are busy (capped at half the SMs).
double sm_sharing_slowdown(const Efficiency& eff, int sms, double comm_busy, double step_s) {
  const double overlap = step_s > 0 ? std::min(1.0, comm_busy / step_s) : 0.0;
  return 1.0 / (1.0 - overlap * std::min(0.5, static_cast<double>(eff.nccl_sms) / sms));
}

// Pipelines from this many stages are simulated shortened (shortened_pipeline).
constexpr int kShortenFromStages = 6;

// Stage symmetry (performance issue): the middle stages of a 1F1B pipeline run the same work, and
// a 1F1B step with uniform stages lasts (m + pp - 1) slots (Narayanan et al. 2021 sec. 2.2.1): each
// further stage adds a slot of the pipeline's fill and drain, each further micro-batch one of its
// steady state, and neither changes what the other adds. So the step of pp stages and M
// micro-batches is simulated as three short pipelines of the plan's own stages, A = 4 stages
// (first, two middle, last) x 8 micro-batches, B = 3 stages x 8 and C = 4 stages x 4, and every
// additive figure is f(A) + (pp - 4)(f(A) - f(B)) + (M - 8)/4 (f(A) - f(C)) (sim/timeline.hpp).
// Interleaved 1F1B (sec. 2.2.2: (m + (pp - 1)/v) chunk slots, also linear in each) the same with
// 12, 12 and 8 micro-batches, whole groups of 4 and 3 stages.
// The SM-sharing probe is extrapolated the same way. Memory: a 1F1B stage s holds min(pp - s, M)
// micro-batches' activations (ibid.; interleaved: (pp - s - 1) 2 + (v - 1) pp + 1 chunks', v + 1
// more per stage), so through its steady state the first stage and the first middle stage hold
// (pp - 4) x (what A's stage holds more than B's as its first backward starts) more than in A;
// their warm-up and drain, what follows (the optimizer step) and the last stage are A's own.
// Taken only where it is exact in that sense: representative fidelity, no trace, the shortcut on,
// 1F1B with pp >= kShortenFromStages and M >= pp (every warm-up whole; interleaved: M a multiple of
// pp and at least 12), a decoder whose middle
// stages hold the same kinds of layers, no NVMe traffic (a drive's write rate depends on the whole
// step's bytes) and memory more than 2% below every pool's capacity (else the whole pipeline is
// simulated, for the exact verdict and its message). Otherwise nullopt: the caller simulates the
// plan's pipeline. tests/unit/simulate_test.cpp bounds it against the whole simulation.
std::optional<Simulated> shortened_pipeline(const model::ModelSpec& m, const plan::Plan& p, const Options& options,
                                            const Efficiency& eff, std::int64_t accumulation, bool multi_gpu) {
  const int pp = std::max(1, p.parallel.pp);
  const bool interleaved = p.parallel.schedule == plan::PipelineSchedule::interleaved && p.parallel.virtual_stages > 1;
  if (options.fidelity != Options::Fidelity::representative || options.trace || options.max_micro_batches <= 0 ||
      pp < kShortenFromStages || p.parallel.schedule == plan::PipelineSchedule::gpipe || accumulation < pp ||
      m.architecture == model::Architecture::encoder_decoder)
    return std::nullopt;
  // Interleaved 1F1B runs micro-batches in groups of pp (Megatron requires whole groups): the
  // short pipelines' counts are whole groups of 3 and of 4 stages, and the plan's of pp.
  if (interleaved && accumulation % pp != 0) return std::nullopt;
  // The middle stages' layers, chunk by chunk and kind by kind (MoE or dense, local or global attention).
  const int chunks = interleaved ? p.parallel.virtual_stages : 1;
  std::vector<int> first_middle;
  for (int s = 1; s < pp - 1; ++s) {
    std::vector<int> kinds;
    for (int c = 0; c < chunks; ++c) {
      const auto [a, b] = inventory::stage_layers(m.total_layers(), pp * chunks, c * pp + s,
                                                  p.parallel.first_stage_layers, p.parallel.last_stage_layers);
      kinds.push_back(-(b - a));
      for (int l = a; l < b; ++l)
        kinds.push_back((l < m.layers && m.is_moe_layer(l) ? 1 : 0) | (l < m.layers && m.is_local_layer(l) ? 2 : 0));
    }
    if (s == 1) first_middle = std::move(kinds);
    else if (kinds != first_middle) return std::nullopt;
  }
  const int k_long = static_cast<int>(std::min<std::int64_t>(accumulation, interleaved ? 12 : 8));
  const int k_short = interleaved ? 8 : 4;
  if (interleaved && accumulation < 12) return std::nullopt;
  struct Shape {
    std::vector<int> real;  // the plan's stage at each position
    int micro;
  };
  const Shape shapes[3] = {{{0, 1, 2, pp - 1}, k_long}, {{0, 1, pp - 1}, k_long}, {{0, 1, 2, pp - 1}, k_short}};
  // The three runs extrapolate one stage's figures: their busiest stages must be the same plan stage.
  const auto same_stage = [&](const int(&stage)[3]) {
    return shapes[1].real[stage[1]] == shapes[0].real[stage[0]] && shapes[2].real[stage[2]] == shapes[0].real[stage[0]];
  };
  const double w_stages = pp - 4;
  const double w_micro = static_cast<double>(accumulation - k_long) / (k_long - k_short);
  std::map<int, inventory::Inventory> inventories;
  for (int s : shapes[0].real) inventories.emplace(s, inventory::build_inventory(m, p, s));
  std::vector<schedule::StepIR> irs[3];
  for (int i = 0; i < 3; ++i) {
    const int q = static_cast<int>(shapes[i].real.size());
    for (int pos = 0; pos < q; ++pos) {
      irs[i].push_back(schedule::build_step(m, p, inventories.at(shapes[i].real[pos]), shapes[i].micro, false,
                                            schedule::PipelineView{q, pos}));
      if (schedule::nvme_written_bytes(irs[i].back()) > 0) return std::nullopt;
    }
  }
  std::vector<LoweredStep> steps;
  for (int i = 0; i < 3; ++i) steps.push_back(lower_step(p, eff, false, irs[i], 1.0, false, shapes[i].real));
  if (multi_gpu) {
    StageRun probe[3];
    int stage[3] = {0, 0, 0};
    for (int i = 0; i < 3; ++i) probe[i] = collect_step(steps[i], steps[i].e.run(), irs[i], stage[i], false, false);
    if (!same_stage(stage)) return std::nullopt;
    const StageRun whole = extrapolate_run(probe[0], {{&probe[1], w_stages}, {&probe[2], w_micro}});
    const double slowdown = sm_sharing_slowdown(eff, p.cluster.gpu.sm_count, comm_busy_s(whole), whole.step_s);
    for (int i = 0; i < 3; ++i) retime_step(steps[i], irs[i], slowdown);
  }
  StageRun run[3];
  int stage[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    run[i] = collect_step(steps[i], steps[i].e.run(), irs[i], stage[i], true, false, true);
    if (!run[i].problem.empty()) return std::nullopt;
  }
  if (!same_stage(stage)) return std::nullopt;
  Simulated sim;
  sim.run = extrapolate_run(run[0], {{&run[1], w_stages}, {&run[2], w_micro}});
  // Memory: positions 0 and 1 of A are the plan's stages 0 and 1 (B's too); the last position is
  // the plan's last stage.
  const std::array<double, 3> capacity = pool_capacities(p.cluster);
  const auto& a = run[0].stage_peaks;
  const auto& b = run[1].stage_peaks;
  for (int t = 0; t < 3; ++t) {
    // The last stage holds one micro-batch whatever the depth: A's own. The first and the first
    // middle stage hold one more per further stage through their steady state: A's, raised by
    // what one more stage in front adds (A's held bytes over B's as the first backward starts).
    double peak = std::max(a.back().steady[t], a.back().ramp[t]);
    for (const auto& x : a) peak = std::max(peak, x.after[t]);
    for (int pos : {0, 1})
      peak = std::max({peak, a[pos].ramp[t], a[pos].steady[t] + w_stages * (a[pos].held[t] - b[pos].held[t])});
    if (peak > 0.98 * capacity[t]) return std::nullopt;
    sim.run.peak[t] = peak;
  }
  const schedule::StepIR &ia = irs[0][stage[0]], &ib = irs[1][stage[1]], &ic = irs[2][stage[2]];
  const auto more = [&](double fa, double fb, double fc) { return fa + w_stages * (fa - fb) + w_micro * (fa - fc); };
  sim.model_flops = more(ia.model_flops_per_rank, ib.model_flops_per_rank, ic.model_flops_per_rank);
  sim.hardware_flops = more(ia.hardware_flops_per_rank, ib.hardware_flops_per_rank, ic.hardware_flops_per_rank);
  sim.frozen_grad_flops = more(ia.frozen_weight_grad_flops_per_rank, ib.frozen_weight_grad_flops_per_rank,
                               ic.frozen_weight_grad_flops_per_rank);
  sim.stage = shapes[0].real[stage[0]];
  sim.timeline.intervals = run[0].intervals;
  sim.timeline.step_s = run[0].step_s;
  sim.timeline.partials.push_back({std::move(run[1].intervals), run[1].step_s, w_stages});
  sim.timeline.partials.push_back({std::move(run[2].intervals), run[2].step_s, w_micro});
  return sim;
}

}  // namespace

StepResult simulate_step(const model::ModelSpec& m, const plan::Plan& p, const Options& options,
                         const Efficiency* efficiency) {
  StepResult res;
  res.efficiency = efficiency ? *efficiency : default_efficiency(p.cluster.gpu);
  // NCCL kernels take SMs from the compute kernels they overlap with. Simulate once, measure how
  // much of the step the communication streams are busy, slow the compute kernels by the SM
  // share they lose for that fraction of the time, and simulate again.
  const bool full = options.fidelity == Options::Fidelity::full;
  if (full && p.cluster.gpus() > kMaxFullRanks) {
    res.ok = false;
    res.problem = fmt::format("full fidelity simulates every rank; {} ranks are more than its limit of {} (use the default, "
                              "representative fidelity)", p.cluster.gpus(), kMaxFullRanks);
    return res;
  }
  const int sms = p.cluster.gpu.sm_count;
  double slowdown = 1.0;
  const std::int64_t accumulation = plan::grad_accumulation_steps(p);
  // Steady-state shortcut: simulate k1 and k2 < k1 micro-batches and extrapolate linearly. Without
  // a pipeline k1 = k, k2 = k - 1. A pipeline's step is linear in the micro-batch count only once
  // its warm-up and cool-down are whole ((m + pp - 1) slots for 1F1B; Narayanan et al. 2021
  // sec. 2.2): k2 is the first multiple of pp at or above k and pp, k1 = k2 + pp (whole groups,
  // as interleaved schedules need).
  const int pp = std::max(1, p.parallel.pp);
  const int k = options.max_micro_batches;
  int k1 = k, k2 = k - 1;
  if (pp > 1 && k > 0) {
    k2 = pp * ((std::max(k, pp) + pp - 1) / pp);
    k1 = k2 + pp;
  }
  // Not for GPipe: it holds every micro-batch's activations at once, so its memory peak (not an
  // additive figure) grows with the count (1F1B holds at most pp, which k2 >= pp covers). Taken
  // only where it saves work: simulating k1 + k2 micro-batches instead of all of them.
  const bool shortcut = k >= 2 && accumulation > k1 + k2 && !(pp > 1 && p.parallel.schedule == plan::PipelineSchedule::gpipe);
  // Under the shortcut the step is simulated with k1 and with k2 micro-batches, and every additive
  // figure extrapolated: f(n) = f(k1) + repeats (f(k1) - f(k2)) (sim/timeline.hpp).
  const double repeats = shortcut ? static_cast<double>(accumulation - k1) / (k1 - k2) : 0.0;
  // The IRs hold every op of the micro-batches they build, and full fidelity lowers them once per
  // rank: refuse a step too large to hold (schedule::kMaxLayerPasses) rather than exhaust memory.
  {
    std::string why = schedule::too_large(m, p, shortcut ? k1 : 0);
    const std::int64_t copies =
        full ? static_cast<std::int64_t>(std::max(1, p.parallel.tp)) * std::max(1, p.parallel.cp) * plan::data_parallel_degree(p)
             : 1;
    if (why.empty() && schedule::layer_passes(m, p, shortcut ? k1 : 0) * copies > schedule::kMaxLayerPasses)
      why = fmt::format("not simulated: full fidelity holds {} ranks' copies of a step of {} layer passes, more than "
                        "ftplan's limit of {} (use the default, representative fidelity)",
                        copies, schedule::layer_passes(m, p, shortcut ? k1 : 0), schedule::kMaxLayerPasses);
    if (!why.empty()) {
      res.ok = false;
      res.problem = std::move(why);
      return res;
    }
  }
  const bool multi_gpu = sms > 0 && p.cluster.gpus() > 1;
  Simulated sim;
  if (auto shortened = shortened_pipeline(m, p, options, res.efficiency, accumulation, multi_gpu)) {
    sim = std::move(*shortened);
  } else {
    // The probe and the step simulate the same IR (only kernel durations differ): built once.
    std::vector<schedule::StepIR> irs = build_stages(m, p, shortcut ? k1 : 0, options.trace);
    std::vector<schedule::StepIR> fewer_irs;
    if (shortcut) {
      fewer_irs = build_stages(m, p, k2, false);
      // A drive's write rate depends on how much of the whole step its cache absorbs.
      for (std::size_t s = 0; s < irs.size(); ++s) {
        const double whole = extrapolate(schedule::nvme_written_bytes(irs[s]), schedule::nvme_written_bytes(fewer_irs[s]), repeats);
        irs[s].nvme_step_written_bytes = fewer_irs[s].nvme_step_written_bytes = whole;
      }
    }
    // Lowered once at full speed; the SM-sharing probe runs it, then it runs again retimed.
    LoweredStep step = lower_step(p, res.efficiency, false, irs, 1.0, full);
    std::optional<LoweredStep> fewer_step;
    if (shortcut) fewer_step.emplace(lower_step(p, res.efficiency, false, fewer_irs, 1.0, full));
    if (multi_gpu) {
      // The probe sees the whole step: under the shortcut its k1 and k2 runs extrapolated the
      // same way as the step's.
      int probe_stage = 0;
      StageRun probe = collect_step(step, step.e.run(), irs, probe_stage, false, false);
      if (shortcut) {
        const StageRun fewer = collect_step(*fewer_step, fewer_step->e.run(), fewer_irs, probe_stage, false, false);
        probe = extrapolate_run(probe, {{&fewer, repeats}});
      }
      slowdown = sm_sharing_slowdown(res.efficiency, sms, comm_busy_s(probe), probe.step_s);
      retime_step(step, irs, slowdown);
      if (shortcut) retime_step(*fewer_step, fewer_irs, slowdown);
    }
    // A trace keeps one engine task per op: lowered again for it.
    StageRun run = options.trace ? run_step(p, res.efficiency, true, irs, sim.stage, slowdown, full, true)
                                 : collect_step(step, step.e.run(), irs, sim.stage, true, false);
    sim.model_flops = irs[sim.stage].model_flops_per_rank;
    sim.hardware_flops = irs[sim.stage].hardware_flops_per_rank;
    sim.frozen_grad_flops = irs[sim.stage].frozen_weight_grad_flops_per_rank;
    sim.timeline.step_s = run.step_s;
    sim.timeline.intervals = run.intervals;
    if (shortcut) {
      // Every further micro-batch repeats the same work: each additive figure grows by its
      // difference between the k1 and k2 runs per (k1 - k2) micro-batches. The same stage is
      // compared in both runs (a pipeline's bottleneck stage does not change with the count).
      int fewer_stage = sim.stage;
      StageRun less = collect_step(*fewer_step, fewer_step->e.run(), fewer_irs, fewer_stage, true, false);
      sim.model_flops = extrapolate(sim.model_flops, fewer_irs[sim.stage].model_flops_per_rank, repeats);
      sim.hardware_flops = extrapolate(sim.hardware_flops, fewer_irs[sim.stage].hardware_flops_per_rank, repeats);
      sim.frozen_grad_flops = extrapolate(sim.frozen_grad_flops, fewer_irs[sim.stage].frozen_weight_grad_flops_per_rank, repeats);
      sim.timeline.partials.push_back({std::move(less.intervals), less.step_s, repeats});
      run = extrapolate_run(run, {{&less, repeats}});
    }
    sim.run = std::move(run);
  }
  res.stage = sim.stage;
  res.timeline = std::move(sim.timeline);
  StageRun& worst = sim.run;
  const double model_flops_per_rank = sim.model_flops, hardware_flops_per_rank = sim.hardware_flops,
               frozen_grad_flops_per_rank = sim.frozen_grad_flops;
  res.step_time_s = worst.step_s;
  res.compute_s = worst.compute_s;
  res.exposed_comm_s = worst.exposed_comm_s;
  res.idle_s = std::max(0.0, worst.step_s - worst.compute_s - worst.exposed_comm_s);
  res.streams = worst.streams;
  res.links = worst.links;
  for (const auto& st : res.streams)
    if (st.utilization > res.bound_utilization) {
      res.bound_utilization = st.utilization;
      res.bound_by = "stream " + st.name;
    }
  for (const auto& l : res.links)
    if (l.utilization > res.bound_utilization) {
      res.bound_utilization = l.utilization;
      res.bound_by = "link " + l.name;
    }
  res.gpu_peak_bytes = worst.peak[0];
  res.host_peak_bytes = worst.peak[1];
  res.nvme_peak_bytes = worst.peak[2];
  res.trace_json = std::move(worst.trace);
  res.nvme_written_bytes = worst.nvme_written;
  if (!worst.problem.empty()) {
    res.ok = false;
    res.problem = worst.problem;
  }

  const int gpus = p.cluster.gpus();
  double pad = 1.0;
  if (p.job.samples.packing == plan::Packing::padded && p.job.samples.mean_tokens > 0)
    pad = p.job.samples.mean_tokens / static_cast<double>(p.job.seq_len);
  res.tokens_per_step = static_cast<double>(plan::global_batch_samples(p)) * static_cast<double>(p.job.seq_len) * pad;
  if (res.step_time_s > 0) {
    res.tokens_per_s = res.tokens_per_step / res.step_time_s;
    res.tokens_per_s_per_gpu = res.tokens_per_s / gpus;
  }
  // Model FLOPs: PaLM's 6N + 12 L H Q T per token (model::flops_per_token), N incl. the head,
  // less the weight gradients a frozen LoRA base does not compute (the IR's share of them);
  // hardware FLOPs add recompute counted the same way (Narayanan et al. 2021, eq. 3).
  const auto per_token = model::flops_per_token(m, p.job.seq_len);
  const double method_share = model_flops_per_rank > 0
                                  ? model_flops_per_rank / (model_flops_per_rank + frozen_grad_flops_per_rank)
                                  : 1.0;
  res.model_flops_per_step = per_token.training() * res.tokens_per_step / pad * method_share;
  const double recompute_share = model_flops_per_rank > 0
                                     ? hardware_flops_per_rank / model_flops_per_rank
                                     : 1.0;
  res.hardware_flops_per_step = res.model_flops_per_step * recompute_share;
  if (res.step_time_s > 0) {
    res.model_tflops_per_gpu = res.model_flops_per_step / gpus / res.step_time_s / 1e12;
    res.hardware_tflops_per_gpu = res.hardware_flops_per_step / gpus / res.step_time_s / 1e12;
    const double peak = p.cluster.gpu.peak_for(plan::compute_dtype(p.job.precision));
    if (peak > 0) {
      res.mfu = res.model_tflops_per_gpu * 1e12 / peak;
      res.hfu = res.hardware_tflops_per_gpu * 1e12 / peak;
    }
  }
  return res;
}

}  // namespace ftplan::sim
