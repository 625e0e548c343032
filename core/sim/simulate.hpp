// Lowers a plan's step IR onto des/ resources of its hardware and runs it: one representative
// rank per pipeline stage (data-parallel replicas behave alike); collectives are flows on the
// rank's real links with ring-algorithm volumes. Results feed `ftplan simulate`.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "hardware/hardware.hpp"
#include "hardware/profile.hpp"
#include "model/model.hpp"
#include "plan/plan.hpp"
#include "schedule/step_ir.hpp"
#include "sim/timeline.hpp"

namespace ftplan::sim {

// Achieved fraction of each peak, by kernel class. From a calibration profile when one is given,
// else the shipped defaults for the GPU (each cites its measurement; see default_efficiency).
struct Efficiency {
  double gemm = 0.75;      // large dense GEMMs, fraction of the dtype's dense peak
  double attention = 0.5;  // fused attention kernels, forward and backward
  double memory = 0.85;    // achieved / datasheet HBM bandwidth for streaming kernels
  double nvlink = 0.8;     // NCCL bus bandwidth / NVLink per-direction rate
  double network = 0.9;    // NCCL bus bandwidth / NIC line rate
  double pcie = 0.85;      // pinned copy bandwidth / PCIe link rate
  // Host time per kernel of eager PyTorch: Python module code, autograd recording, the dispatcher
  // and cudaLaunchKernel, which bound a pass of small kernels (small micro-batches go host-bound).
  // Forward: ~9.5 us per op through nn.Module with autograd on, measured over HF's Llama decoder
  // layer and PEFT's LoRA Linear (calibrate/reference/eager_layer_ops.py: 8.3-11.5 us, quiet AMD
  // EPYC host), plus ~2.5 us of cudaLaunchKernel that a CPU run does not pay. Backward: the
  // autograd engine's C++ loop with the checkpointed recompute's Python forward in it, 8.1-9.4 us
  // measured, plus the launch. (6 us before, from the PyTorch 2 paper's 5-10 us of dispatch
  // alone.) A host's single-thread speed scales both.
  double launch_s = 12e-6;           // forward and recompute kernels
  double launch_backward_s = 11e-6;  // backward kernels
  // Host time per launch of a collective's kernels (ProcessGroupNCCL's C++ launch of each rank's
  // copy or NCCL kernel, no Python per kernel): dispatcher and launch only, as the PyTorch 2
  // paper's 5-10 us of dispatch per op (Ansel et al. 2024).
  double collective_launch_s = 6e-6;
  double collective_step_s = 5e-6;  // NCCL per-step latency inside a node (ring step)
  // SMs a running NCCL collective occupies (its channels, one CTA each): compute overlapped
  // with communication gets the rest. NCCL_MAX_NCHANNELS defaults to 32; 16 is typical of
  // ring all-gather/reduce-scatter on NVLink + InfiniBand nodes (NCCL environment docs).
  int nccl_sms = 16;
  // Host figures measured by a calibration profile (0 = derive from the catalog).
  // Achieved DRAM traffic of the whole host, bytes read + written (STREAM triad with its
  // write-allocate reads, all threads).
  double dram_Bps = 0;
  double cpu_optimizer_params_per_s = 0;  // AdamW parameters per second of the whole host
  double nvme_read_Bps = 0;               // striped drives of the node at the offload engine's block and depth
  double nvme_write_Bps = 0;
  // Host <-> GPU copies: a fixed cost per copy (DMA setup, launch) besides the link time, and
  // pageable copies' rate relative to pinned ones. Without a profile: no per-copy cost (the
  // schedule's copies are MBs), and pageable at 1/6 of pinned (DeepSpeed PR #5301 measured 6x
  // faster H2D when ZeRO-Offload moved to pinned buffers on one GPU).
  double copy_latency_s = 0;
  double pageable_fraction = 1.0 / 6.0;
  // Shapes a calibration profile measured, each as a fraction of the dtype's dense peak. When
  // present, an op's rate is interpolated between them by shape (gemm_fraction,
  // attention_fraction); `gemm` and `attention` above are then their medians.
  // Which operand the kernel reads transposed: nn the forward C = A B, nt the backward's input
  // gradient dA = dC B^T, tn its weight gradient dB = A^T dC. A kernel library may run them at
  // different rates (Eigen's dC B^T ran 5-8% below the plain product of the same shape at hidden
  // 1024 on the executor's CPU device, docs/validation.md); a profile that measured only nn serves
  // all three.
  enum class Layout { nn, nt, tn };
  struct GemmPoint {
    double m = 0, n = 0, k = 0;  // C[m x n] = A[m x k] B[k x n]
    double fraction = 0;
    Layout layout = Layout::nn;
  };
  struct AttentionPoint {
    double seq = 0, head_dim = 0;
    bool backward = false;
    bool fused = true;  // flash-style kernel (cudnn-sdpa) vs the eager path's two matmuls
    bool causal = true;
    double fraction = 0;
  };
  std::vector<GemmPoint> gemm_shapes;
  std::vector<AttentionPoint> attention_shapes;
  std::string source;  // where these figures come from
};
Efficiency default_efficiency(const hardware::GpuSpec& gpu);
// The defaults for `gpu`, replaced by what `profile` measured where it measured it: GEMM and
// attention rates over the dtype's peak (median over shapes), device-memory bandwidth, pinned
// H2D copies over the link rate, NCCL bus bandwidth over NVLink, host DRAM and CPU AdamW.
Efficiency efficiency_from_profile(const hardware::CalibrationProfile& profile, const hardware::GpuSpec& gpu,
                                   hardware::Dtype dtype);

// The steady-state shortcut's micro-batch count used by the planner, sweeps and benches, the one
// tests/unit/simulate_test.cpp bounds at 0.5% of the full simulation.
inline constexpr int kSteadyStateMicroBatches = 3;

struct Options {
  bool trace = false;  // keep a Chrome trace of the simulated step
  // With a trace: the pipeline stage whose rank StepResult::tracks shows (-1, or none such: the
  // slowest stage's, StepResult::stage). The step and its figures are the same whichever is shown.
  int trace_stage = -1;
  // Steady-state shortcut: simulate k1 and k2 of the step's micro-batches (pp == 1: this many and
  // one fewer; a pipeline 2 pp and pp) when it has more than k1 + k2, and extrapolate every
  // additive figure linearly (sim/timeline.hpp): exact for bytes and FLOPs, within 0.5% of the
  // full simulation for time and energy (tests/unit/simulate_test.cpp). Pipelines of 6 stages and
  // more are simulated as two short pipelines of their own stages (stage symmetry, shortcuts.cpp
  // shortened_pipeline); one-stage steps of repeating layers with fewer layers (layer symmetry,
  // shortcuts.cpp fewer_layers). On by default, so that every verb (simulate, compare, plan, sweep, the
  // GUI) gives one plan one answer; 0 simulates every micro-batch of every stage, as a trace does.
  int max_micro_batches = kSteadyStateMicroBatches;
  // Folded layers (compiled chunks) in the stage symmetry's short pipelines: a chunk's identical
  // layers lowered as one that lasts as long as all of them, where that is exact (sim/lowering.hpp
  // fold_layers; docs/performance.md). Off: every layer lowered (for tests and benches).
  bool fold_layers = true;
  // The stage symmetry's micro-batch slope read from its 4-stage short pipeline's steady state,
  // one period of which repeats (sim/shortcuts.cpp shortened, less_one_period), instead of from a
  // third short pipeline, and interleaved, its 3-stage one of one group where that is exact. Off:
  // the three short pipelines of before (for tests and benches).
  bool steady_window = true;
  // Representative: one rank per pipeline stage, its links loaded with its share of what the
  // node's ranks share (the default; cost independent of the data-parallel degree). Full: every
  // rank with its own queues and links, collectives waiting for every member of their group,
  // shared host links whole (for checking the representative mode; up to kMaxFullRanks ranks).
  enum class Fidelity { representative, full } fidelity = Fidelity::representative;
  // A step that runs out of memory keeps the layer shortcut where its peak is past the capacity by
  // more than the fit's play (not where a paged optimizer's placement depends on the capacity): its
  // figures are the fit's, as for a step that fits, and its problem names the pool, its peak and
  // capacity. With this, a run of every layer adds the moment a pool first ran out and what was
  // live in it ("gpu ran out of memory at 2.506 s: 126.96 GiB live of 80.00 GiB (...)"). Unset:
  // true, except in evaluate::evaluate_plan where the footprint refuses the plan (the row's reason
  // is then the footprint's: compare, sweep and the GUI); `ftplan simulate` sets it.
  std::optional<bool> out_of_memory_moment;
};
inline constexpr int kMaxFullRanks = 1024;

struct StreamUse {
  std::string name;
  double busy_s = 0;
  double utilization = 0;  // busy / step time
};

struct LinkUse {
  std::string name;
  double bytes = 0;
  double busy_s = 0;
  double utilization = 0;
};

// One simulated step as tracks, for a Gantt view (Options::trace; what trace_json holds, as data):
// each stream (engine queue) of one stage's rank (the slowest's unless Options::trace_stage) with its ops, each link it
// uses with the flows on it while their data moves, and the rank's memory per tier over the step.
struct TrackSpan {
  std::string name;      // the op ("fwd L3 mlp") or flow
  std::string category;  // "compute", "h2d", "allreduce", ...
  double start_s = 0, end_s = 0;
  double bytes = 0;  // a transfer's bytes (0 for compute)
  // On the step's critical path (des::critical_path: what the step's end waited for, back to its
  // start); over every stage's ranks, so on one rank's rows the path leaves and comes back.
  bool critical = false;
};
struct Track {
  std::string name;  // the stream or link, as --trace names it
  std::vector<TrackSpan> spans;
};
struct MemorySample {
  double time_s = 0;
  double bytes = 0;  // live bytes from this time on
};
// The time a track's spans cover: their union (a link's flows overlap), all of them or only those
// on the critical path. Over the step's time, a row's busy share and its share of the critical path.
double covered_s(const Track& track, bool critical_only = false);

struct StepTracks {
  int stage = 0;  // the pipeline stage whose rank these are (Options::trace_stage)
  std::vector<Track> streams, links;
  // The rank's pools, by plan::Tier (a tier without a pool: empty): live bytes at the step's start, then
  // after each allocation or free (des::Result::pool_series). The allocator's slack is not in them.
  plan::PerTier<std::vector<MemorySample>> memory;
  plan::PerTier<double> capacity_bytes{};  // each pool's capacity (0: none)
};

struct StepResult {
  bool ok = true;  // false: the simulated step ran out of GPU memory or could not finish
  std::string problem;
  double step_time_s = 0;      // one optimizer step (slowest stage)
  double tokens_per_step = 0;  // whole job (all data-parallel replicas)
  double tokens_per_s = 0;     // aggregate
  double tokens_per_s_per_gpu = 0;
  double model_flops_per_step = 0;  // whole job
  double hardware_flops_per_step = 0;
  double mfu = 0;
  double hfu = 0;
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  // Time split of the critical rank's compute stream: busy computing, waiting on communication
  // that was not hidden, otherwise idle.
  double compute_s = 0;
  double exposed_comm_s = 0;
  double idle_s = 0;
  std::vector<StreamUse> streams;
  std::vector<LinkUse> links;
  // The busiest stream or link of the slowest stage: what bounds the step ("stream compute",
  // "link nvme read (share)", ...), and its utilization.
  std::string bound_by;
  double bound_utilization = 0;
  // Each pool's high-water mark, by plan::Tier, per rank (the GPU's: the allocated view).
  plan::PerTier<double> peak_bytes{};
  int stage = 0;           // the stage whose step was slowest
  std::string trace_json;  // with Options::trace
  StepTracks tracks;       // with Options::trace: the same step as data
  Efficiency efficiency;
  Timeline timeline;              // the slowest stage's rank: what each component did when
  double nvme_written_bytes = 0;  // per rank per step

  double peak(plan::Tier t) const { return peak_bytes[plan::tier_index(t)]; }
  double gpu_peak_bytes() const { return peak(plan::Tier::gpu); }
};

StepResult simulate_step(const model::ModelSpec& model, const plan::Plan& plan, const Options& options = {},
                         const Efficiency* efficiency = nullptr);

// Duration of one compute op on `gpu` at `eff`, seconds (max of compute and memory time, plus
// launch overhead when the host cannot keep up). Exposed for tests.
double compute_seconds(const schedule::Op& op, const plan::Plan& plan, const Efficiency& eff);
// Achieved fraction of peak of one GEMM C[m x n] = A[m x k] B[k x n] on `gpu`: interpolated
// between the profile's measured shapes when it has some, else the best-case `eff.gemm` times
// wave quantization over the GPU's SMs.
double gemm_fraction(const Efficiency& eff, const hardware::GpuSpec& gpu, double m, double n, double k,
                     Efficiency::Layout layout = Efficiency::Layout::nn);
// Achieved fraction of peak of an attention kernel over `seq` keys at `head_dim`: interpolated
// between the profile's measured points of the same kind (fused or not), pass and masking, else
// `eff.attention`.
double attention_fraction(const Efficiency& eff, double seq, double head_dim, bool backward, bool fused, bool causal);
// The host-side links an op's bytes cross as the simulator lowers it: a GPU <-> host copy the
// GPU's PCIe link, its switch uplink and host DRAM (a pageable one first the driver's staging
// copy); an NVMe copy the drives and host DRAM (no GPUDirect Storage); the CPU optimizer host DRAM.
// Empty for every other op. The executor (exec/) counts its bytes on the same links.
// PCIe is full duplex: each direction of a link (and of a switch uplink) carries its rated
// bandwidth while the other is busy (PCI Express Base Specification: a link is a dual-simplex
// pair of lanes per direction; NVIDIA's bandwidthTest/nvbandwidth bidirectional runs reach about
// twice the one-way rate), so a host-to-device copy and a device-to-host copy share no PCIe
// capacity; both still share host DRAM.
// `cpu`: the host cores running a CPU optimizer step, a link whose capacity is their measured
// AdamW rate x the bytes it moves per parameter; the step's flow crosses it and host DRAM.
// cxl_read, cxl_write: the expanders one way (to the host or a GPU, from them); cxl: the expanders
// in all, whatever the direction (their DRAM and controllers).
enum class HostLink {
  pcie_h2d,
  pcie_d2h,
  uplink_h2d,
  uplink_d2h,
  dram,
  nvme_read,
  nvme_write,
  pageable,
  cpu,
  cxl_read,
  cxl_write,
  cxl
};
inline constexpr std::size_t kHostLinks = static_cast<std::size_t>(HostLink::cxl) + 1;  // HostLink's values
// At most five links (pageable staging, PCIe, uplink, the memory one way and in all), kept in
// place: lowering asks once per copy op, and needs no allocation for it.
struct HostPath {
  static constexpr std::size_t kMax = 5;
  std::array<HostLink, kMax> links{};
  std::size_t size = 0;
  HostPath() = default;
  HostPath(std::initializer_list<HostLink> l) {
    for (const HostLink h : l) push_back(h);
  }
  void push_back(HostLink h) { links[size++] = h; }
  const HostLink* begin() const { return links.data(); }
  const HostLink* end() const { return links.data() + size; }
  bool empty() const { return size == 0; }
};
HostPath host_path(const schedule::Op& op, const plan::Plan& plan);
// The name of a representative rank's link in StepResult::links.
const char* to_string(HostLink l);

// Bytes each rank sends over its slowest link for a collective of `bytes` over `n` ranks with
// the ring algorithm (Patarasuk & Yuan 2009; NCCL's bus-bandwidth definition).
double ring_bytes(schedule::Collective c, double bytes, int n);

}  // namespace ftplan::sim
