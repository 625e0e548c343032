#include "sim/interpolate.hpp"
#include "sim/lowering.hpp"

namespace ftplan::sim {

namespace {

// An op's dtype: fp8-mixed runs its FP8 linears in FP8 and the rest in bf16 (plan::compute_dtype).
hardware::Dtype compute_dtype(const plan::Plan& p, bool fp8_op) {
  if (p.job.precision == plan::Precision::fp8_mixed && !fp8_op) return hardware::Dtype::bf16;
  return plan::compute_dtype(p.job.precision);
}

}  // namespace

// FlashAttention-1-class kernels against FlashAttention-2 (Dao 2023, abstract: FlashAttention
// reaches 25-40% of the A100's peak, FlashAttention-2 50-73%: midpoints 32.5 / 61.5). The same
// ratio is assumed on other GPUs.
constexpr double kFlashV1Ratio = 32.5 / 61.5;

// Fixed time per output tile of a GEMM (prologue and epilogue), from XLA's measured H100 table
// (gemm_fraction).
constexpr double kGemmTileFixed_s = 1.2e-6;

double gemm_fraction(const Efficiency& eff, const hardware::GpuSpec& gpu, double m, double n, double k,
                     Efficiency::Layout layout) {
  if (m <= 0 || n <= 0 || k <= 0) return eff.gemm;
  if (!eff.gemm_shapes.empty()) {
    // The points of the kernel's own layout when the profile measured it, else all of them.
    const bool own = std::any_of(eff.gemm_shapes.begin(), eff.gemm_shapes.end(),
                                 [&](const Efficiency::GemmPoint& g) { return g.layout == layout; });
    return interpolate(
        eff.gemm_shapes,
        [&](const Efficiency::GemmPoint& g) {
          if (own && g.layout != layout) return std::numeric_limits<double>::infinity();
          const double dm = log_gap(m, g.m), dn = log_gap(n, g.n), dk = log_gap(k, g.k);
          return std::sqrt(dm * dm + dn * dn + dk * dk);
        },
        [](const Efficiency::GemmPoint& g) { return g.fraction; }, eff.gemm);
  }
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
        if (a.backward != backward || a.fused != fused || a.causal != causal)
          return std::numeric_limits<double>::infinity();
        const double ds = log_gap(seq, a.seq), dh = log_gap(head_dim, a.head_dim);
        return std::sqrt(ds * ds + dh * dh);
      },
      [](const Efficiency::AttentionPoint& a) { return a.fraction; }, eff.attention);
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
        fraction = gemm_fraction(eff, gpu, m, k, n, Efficiency::Layout::nt);
        if (op.weight_grad)
          fraction = 2.0 / (1.0 / fraction + 1.0 / gemm_fraction(eff, gpu, k, n, m, Efficiency::Layout::tn));
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
  // host (Efficiency::launch_s): when a kernel is shorter than that, the host is the bound. (Each
  // op alone: a host running ahead during a long kernel is not credited to the short ones after
  // it; docs/simulation.md, "Host-bound passes".)
  const double gpu_time = std::max(compute, memory);
  const double kernels = std::max(1, op.kernels) * (p.job.compile ? 0.35 : 1.0);  // compile fuses pointwise ops
  // Op::host_s: the framework's own host work for the op besides its launches (ZeRO-3's hooks).
  return std::max(gpu_time,
                  kernels * (op.pass == schedule::Pass::backward ? eff.launch_backward_s : eff.launch_s) + op.host_s);
}

}  // namespace ftplan::sim
