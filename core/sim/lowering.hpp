// The simulator's inside, shared by its files (not part of sim's interface: that is
// sim/simulate.hpp). How a step's IR becomes DES tasks on a rank's streams, links and pools
// (topology.cpp, collective.cpp, lower.cpp), how a run is read back (collect.cpp), and the
// shortcuts that simulate a long step as short ones (shortcuts.cpp; docs/performance.md).
// Kernel times are compute.cpp's, efficiencies efficiency.cpp's; simulate.cpp runs the whole.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "des/engine.hpp"
#include "inventory/inventory.hpp"
#include "plan/checks.hpp"
#include "plan/rank_layout.hpp"
#include "sim/simulate.hpp"

namespace ftplan::sim {

using schedule::Collective;
using schedule::Op;
using schedule::OpKind;
using schedule::Stream;

namespace detail {

struct Topology {
  plan::RankLayout layout;                       // where the ranks sit: nodes, groups
  bool nvlink = false;                           // a direct GPU-to-GPU fabric (NVLink, Infinity Fabric), else PCIe
  const char* gpu_link_name = "gpu-gpu (pcie)";  // that link's name in results ("nvlink", "infinity fabric")
  double nvlink_Bps = 0;
  double nic_Bps = 0;  // this GPU's share of the node's NICs
  double pcie_Bps = 0;
  double nic_latency_s = 0;
  // Host side, per rank (every rank of a node does the same at the same time, so each gets its
  // share of what the node's ranks share):
  double uplink_Bps = 0;        // the PCIe switch uplink this GPU sits behind, / GPUs behind it
  double dram_Bps = 0;          // host DRAM bandwidth / ranks per node
  double nvme_read_Bps = 0;     // striped drives' read bandwidth / ranks per node
  double nvme_write_Bps = 0;    // their write bandwidth (burst or sustained, see nvme_write_rate) / ranks
  double cpu_params_per_s = 0;  // CPU optimizer throughput available to this rank
  // CXL memory expanders / ranks per node: one way to the host or a GPU, from them, and in all
  // (0: none).
  double cxl_read_Bps = 0, cxl_write_Bps = 0, cxl_Bps = 0;
};

Topology topology_of(const plan::Plan& p, const Efficiency& eff);

// The first of the node's PCIe switches that lists GPUs (each GPU behind one such switch), or
// none: each GPU reaches the root complex over its own link, and its copies cross no uplink.
const hardware::PcieSwitch* gpu_switch(const plan::Cluster& c);
// GPUs behind each such switch; 0 without one.
int gpus_per_switch(const plan::Cluster& c);

// One rank's part of a ring (or all-to-all, or send/recv) collective over its group
// (collective.cpp, the alpha-beta model of NCCL's rings and trees): the fixed time before its
// bytes move (ring steps, the framework's host work, launches), and its bytes over the links
// inside the node (NVLink) and between nodes (its NIC), which run as concurrent flows.
struct CollectiveCost {
  double alpha_s = 0;
  double intra_bytes = 0;
  double inter_bytes = 0;
};
CollectiveCost collective_cost(const Op& op, const Topology& topo, const Efficiency& eff);

// Seconds to the nearest nanosecond, a half up: std::llround's answer for x >= 0 without its libm
// call (one per kernel lowered and retimed): the whole part and what is left of x are exact.
// Past ~285 years (9e18 ns) it stays there.
inline des::Time ns(double seconds) {
  const double x = std::min(std::max(0.0, seconds) * 1e9, 9e18);
  const auto whole = static_cast<des::Time>(x);
  return whole + (x - static_cast<double>(whole) >= 0.5 ? 1 : 0);
}

struct StageRun {
  double step_s = 0;
  double compute_s = 0, exposed_comm_s = 0;
  std::vector<StreamUse> streams;
  std::vector<LinkUse> links;
  plan::PerTier<double> peak{};
  std::string problem;
  std::string trace;
  StepTracks tracks;  // with a trace
  std::vector<Interval> intervals;
  double nvme_written = 0;
  // Per stage, per tier (gpu, host, nvme), for the shortened pipeline's extrapolation (filled by
  // collect_step when asked): `steady` is the pool's high-water mark from the first backward
  // kernel's start to the last forward's end (the pipeline's steady state, the stage's in-flight
  // micro-batches all held), `ramp` the one before and after it up to the last backward's end
  // (the warm-up and the drain), `after` the one after that (the optimizer step); `held` the live
  // bytes as the first backward starts; `first` the high-water mark from the step's start to the
  // end of the first micro-batch's backward.
  struct PhasePeaks {
    plan::PerTier<double> first{}, steady{}, ramp{}, after{}, held{};
  };
  std::vector<PhasePeaks> stage_peaks;
};

// The blended write rate of a rank's share of the drives over one step: a drive writes at its
// burst rate until its SLC/DRAM cache fills, then at its sustained rate. Per step each drive
// takes its share of the node's writes; the blended rate is bytes / (cached part at burst + the
// rest at sustained). (The cache is taken as empty at each step's start: an optimistic bound
// when steps follow back to back.)
double nvme_write_rate(const plan::Plan& p, const schedule::StepIR& ir, double sustained_share_Bps);

// One stage's representative rank lowered onto an engine: its streams, links and pools, and the
// task of each IR op.
struct Lowered {
  std::vector<des::QueueId> queues;  // by Stream
  std::vector<des::LinkId> links;    // the stage's own links
  des::LinkId nvlink{}, nic{};
  plan::PerTier<des::PoolId> pools{};  // by Tier, where has_pool
  // Which tiers the rank has a pool for: every plan::TierInfo::always tier, CXL memory only where
  // the node has expanders (a pool the plan cannot use would add a counter to every trace).
  plan::PerTier<bool> has_pool{};
  std::vector<des::TaskId> task;  // by op index
  // Compute ops fused into one engine task (see lower_stage): the op's start within its task;
  // -1 for ops that are a task of their own.
  std::vector<des::Time> offset;
  std::vector<des::Time> duration;
  // Compute ops: the kernel's time before SM sharing (compute_seconds), for retime.
  std::vector<double> base_s;
  // The ops retime sets: those with a base_s and the chained collectives, in op order.
  std::vector<std::size_t> timed;
  // Folded layers (LoweringContext::fold, fold_layers): each run of identical layers as op
  // indices (its first and last op), with the resources its chain holds; and every collective
  // outside the runs with what it holds, to check after a run that nothing shared them
  // (folds_undisturbed). An op of a run's later layers has no task of its own (offset kFolded;
  // its task is the run's chain end) unless it allocates or frees.
  struct Holder {
    std::size_t first, last;  // runs: op indices; others: the op's own index in both
    des::TaskId from;         // the task its time on a link starts with (a run's first collective's latency part)
    bool comm = false, nvlink = false, nic = false;
    // Runs: some collective chained into a compute task (`chained` below); when the first one
    // is, its op and latency (its time on a link starts `from_lead` before the op's interval).
    bool chained = false;
    std::size_t from_op = kNoOp;
    des::Time from_lead = 0;
  };
  static constexpr std::size_t kNoOp = static_cast<std::size_t>(-1);
  std::vector<Holder> folds, others;
  // A folded run's collectives that follow its kernels on one serial chain, lowered into the
  // chain's compute task (lower_stage) as if alone: the latency `lead`, then the op's interval
  // (l.offset, l.duration: its bytes at NVLink's rate, of which `moving` with data moving). No
  // task, no flow of their own: exact when nothing else held the comm stream or NVLink meanwhile
  // (folds_undisturbed), and what the engine did not see of them is added to its result after
  // the run (credit_chained): the comm stream's busy time, NVLink's bytes and busy time.
  struct Chained {
    std::size_t op;
    des::Time lead, moving;
    double bytes;
  };
  std::vector<Chained> chained;  // in op order
  std::vector<int> fold;         // fold_layers' verdict per op (empty: nothing folded)
  // The GPU kernels (gpu_kernel) with a time of their own (not folded), in op order: what the
  // compute stream computes, read without walking the stage's other ops.
  std::vector<std::size_t> kernels;
  // One period of the pipeline's steady state (mark_steady_window): the first kernels of two
  // forward passes of the same chunk `period` micro-batches apart, the first one the first
  // forward issued after the first backward; kNoOp where the stage has none.
  std::size_t window[2] = {kNoOp, kNoOp};
  static constexpr des::Time kFolded = -2;
  bool folded(std::size_t i) const { return offset[i] == kFolded; }
  des::Time start(const des::Result& r, std::size_t i) const {
    const des::Time base = r.tasks[task[i].index].start;
    return offset[i] < 0 ? base : base + offset[i];
  }
  des::Time end(const des::Result& r, std::size_t i) const {
    return offset[i] < 0 ? r.tasks[task[i].index].end : start(r, i) + duration[i];
  }
};

bool gpu_kernel(const Op& op);

// The links one rank's traffic crosses, and those reported as its own.
struct RankLinks {
  des::LinkId nvlink{}, nic{};
  // The host side's links by HostLink (host_link_rate says which a rank has, and their rates);
  // kAbsent where it has none.
  static constexpr des::LinkId kAbsent{0xffffffffu};
  std::array<des::LinkId, kHostLinks> host = [] {
    std::array<des::LinkId, kHostLinks> a;
    a.fill(kAbsent);
    return a;
  }();
  std::vector<des::LinkId> own;
  des::LinkId& operator[](HostLink h) { return host[static_cast<std::size_t>(h)]; }
  des::LinkId operator[](HostLink h) const { return host[static_cast<std::size_t>(h)]; }
};

// Whom a host link is shared among in a full-fidelity run: a rank's own (its PCIe link, its
// pageable staging), the GPUs behind one PCIe switch (its uplink), or a node's ranks (DRAM, the
// drives, the cores, the CXL expanders). A representative rank has each to itself, at its share.
enum class LinkScope { rank, pcie_switch, node };
struct HostLinkInfo {
  HostLink link;
  const char* name;  // a representative rank's (StepResult::links; to_string(HostLink))
  const char* part;  // in a full-fidelity run's name: "rank R pcie h2d", "node N host dram",
                     // "node N pcie switch uplink K h2d"
  LinkScope scope;
};
const HostLinkInfo& host_link_info(HostLink h);
// A rank's share of host link `h` (bytes/s), or nullopt where it has no such link: an uplink
// without a PCIe switch, the CXL links without expanders (host_path routes nothing there).
std::optional<double> host_link_rate(HostLink h, const plan::Plan& p, const schedule::StepIR& ir, const Topology& topo,
                                     const Efficiency& eff);

// The representative rank of a stage: every link its own, with its share of what the node's
// ranks share (they all do the same at the same time).
RankLinks representative_links(des::Engine& e, const plan::Plan& p, const schedule::StepIR& ir, const Topology& topo,
                               const Efficiency& eff, const std::string& prefix);

// Where a rank sits, for the full-fidelity mode (every rank simulated): its index, how many
// there are, and its coordinates in the plan's rank layout; collectives of one group instance
// start when every member is ready (`joins`, shared by the ranks).
struct RankPlace {
  int rank = 0, ranks = 1;
  // Ranks between this rank and the same place of the next stage: the layout's stage size when
  // every rank is lowered, 0 when one rank stands for its stage (sends are matched by tag alone).
  int stage_stride = 0;
  plan::RankLayout::Coord at;
  std::map<std::pair<std::size_t, std::int64_t>, des::TaskId>* joins = nullptr;
  std::string prefix;
};

// A GPU kernel's engine duration from its base time: slowed by the SMs NCCL takes, except the
// optimizer step, which runs after the step's communication (lower_stage and retime).
des::Time kernel_ns(const Op& op, double base_s, double compute_slowdown);

// What a rank's pools hold at most (by plan::Tier): the GPU's usable memory, its share of the
// host's DRAM, of the CXL expanders and of the drives (lower_stage's pools; the shortened pipeline's memory check).
plan::PerTier<double> pool_capacities(const plan::Cluster& c);

// One stage's rank lowered onto the engine (lower.cpp).
// What lowering a step's ranks share: the engine, the plan and its rates, and the pipeline's
// sends and receives (matched by tag once every rank is lowered).
struct LoweringContext {
  des::Engine& e;
  const plan::Plan& p;
  const Efficiency& eff;
  const Topology& topo;
  double compute_slowdown = 1;
  bool pp_across_nodes = false;
  bool trace = false;
  std::vector<std::pair<std::int64_t, des::TaskId>>& sends;
  std::vector<std::pair<std::int64_t, des::TaskId>>& receives;
  // Lower each run of identical layers as one (fold_layers); only for representative ranks.
  bool fold = false;
};
Lowered lower_stage(const LoweringContext& cx, const schedule::StepIR& ir, const RankLinks& links,
                    const RankPlace& place);

// A lowered stage's kernels set to `compute_slowdown` (the durations lower_stage gives them,
// from each op's base time): the same engine runs again without being lowered again.
void retime(des::Engine& e, Lowered& l, const schedule::StepIR& ir, double compute_slowdown);

// Appends `iv`, or extends the last interval when `iv` continues it: one component doing the same
// thing on one lane (stream), back to back, draws the same power (collect_stage, sim::unroll).
// Inline: called for every op's interval of every run read.
inline void push_merged(std::vector<Interval>& out, const Interval& iv) {
  if (!out.empty()) {
    Interval& last = out.back();
    if (last.component == iv.component && last.activity == iv.activity && last.lane == iv.lane &&
        last.end_s == iv.start_s) {
      last.end_s = iv.end_s;
      return;
    }
  }
  out.push_back(iv);
}

// What one stage's rank did, read from the engine's result. Without `activity` (the SM-sharing
// probe, which reads the step's length and the streams' busy time) no compute and exposed time
// and no intervals.
StageRun collect_stage(const des::Engine& e, const des::Result& r, const schedule::StepIR& ir, const Lowered& l,
                       bool activity);

// Full fidelity: every rank, each with its own GPU links (NVLink port, NIC rail, PCIe link) and
// the node's shared ones at their whole rate (the PCIe switch uplinks, host DRAM, the drives);
// `reported[s]` is the index in `lowered` of stage s's first rank.
void lower_every_rank(const LoweringContext& cx, const std::vector<schedule::StepIR>& irs,
                      std::vector<Lowered>& lowered, std::vector<int>& reported);

// The step IR of every pipeline stage.
std::vector<schedule::StepIR> build_stages(const model::ModelSpec& m, const plan::Plan& p, int micro_batches,
                                           bool names);

// What was live in the pool of `oom` when it overflowed, by memory category, largest first:
// " (weights 14.98 GiB, activations 10.02 GiB)": the tensors of `ir` allocated before the
// overflowing allocation (earlier, or at that instant and issued before it) and not yet freed.
std::string live_by_category(const schedule::StepIR& ir, const Lowered& l, const des::Result& r,
                             const des::OutOfMemory& oom);

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
                       double compute_slowdown, bool full, const std::vector<int>& real_stage = {}, bool fold = false);

// Folded layers (compiled chunks, docs/performance.md). A pipeline chunk's pass runs its layers
// one after another, each the same work: per op, 1 where it is lowered as it is, n >= 2 where it
// is an op of the first layer of a run of n identical layers and is lowered n times as long (its
// kernels' time, its collective's latency and bytes), 0 where it is an op of a later layer of the
// run (only its allocations and frees are lowered, in order, so every pool passes through the same
// levels). A run is consecutive layers whose ops do the same work op by op, form one serial chain
// on the compute and comm streams (each op waits on the one before it), and of which nothing
// outside waits on any op but the last. Then the run lasts the sum of its ops' times, as its
// folded form does, provided nothing else holds its comm stream or its links meanwhile: checked
// after the run (folds_undisturbed).
std::vector<int> fold_layers(const schedule::StepIR& ir);
// Whether no collective outside a folded run used the run's comm stream, NVLink or NIC while the
// run ran (then the folded run took exactly as long as its layers would have).
bool folds_undisturbed(const LoweredStep& step, const des::Result& r);

// Adds to a run's result what its stages' chained collectives (Lowered::chained) did outside the
// engine's sight: their time moves from the compute stream's busy time to the comm stream's, and
// their bytes and data-moving time go to NVLink. Call once per run, before reading it.
void credit_chained(const LoweredStep& step, des::Result& r);

// The steady state's window of each stage (Lowered::window), its two ends marked in the engine
// so that a run snapshots its counters there (des::Engine::mark).
void mark_steady_window(LoweredStep& step, const std::vector<schedule::StepIR>& irs, int period);

// A run of a pipeline whose steady state repeats every `period` micro-batches, less one period:
// `whole` (the run of `stage`, collect_step's) with the figures of the stage's window (its time,
// compute and exposed time, each stream's and link's busy time and bytes, its intervals cut out)
// taken away, i.e. the figures of the same pipeline with `period` micro-batches fewer. Nullopt
// where the window is not one period of a repeating schedule: checked op by op against the one
// after it, as far as the stage's last forward (each op of the same kind, layer and pass,
// `period` micro-batches later, and starting and ending exactly the window's length later).
// `activity`: as `whole` was collected (collect_stage).
std::optional<StageRun> less_one_period(const LoweredStep& step, const des::Result& r, const schedule::StepIR& ir,
                                        int stage, const StageRun& whole, int period, bool activity);

// Every lowered kernel at `compute_slowdown`.
void retime_step(LoweredStep& step, const std::vector<schedule::StepIR>& irs, double compute_slowdown);

// What a run of a lowered step gives: the stage whose compute stream is busiest (the pipeline's
// bottleneck) with the step's makespan, the memory high-water marks over all stages, and that
// stage in `stage_out`.
// `activity`: as collect_stage's; `phases`: also each stage's high-water marks by phase
// (StageRun::stage_peaks); `trace`: the Chrome trace and the tracks of stage `trace_stage`'s rank
// (-1 or out of range: the slowest stage's).
StageRun collect_step(const LoweredStep& step, const des::Result& r, const std::vector<schedule::StepIR>& irs,
                      int& stage_out, bool activity, bool trace, bool phases = false, int trace_stage = -1);

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
StageRun extrapolate_run(const StageRun& main, const std::vector<std::pair<const StageRun*, double>>& others);

// The busier of the reported stage's communication streams (NCCL's kernels), seconds.
double comm_busy_s(const StageRun& run);

// NCCL kernels take SMs from the compute kernels they overlap with: compute slows by the SMs'
// share NCCL holds for the fraction of the step its streams are busy (capped at half the SMs).
double sm_sharing_slowdown(const Efficiency& eff, int sms, double comm_busy, double step_s);

// Stage symmetry (performance issue): the middle stages of a 1F1B pipeline run the same work, and
// a 1F1B step with uniform stages lasts (m + pp - 1) slots (Narayanan et al. 2021 sec. 2.2.1): each
// further stage adds a slot of the pipeline's fill and drain, each further micro-batch one of its
// steady state, and neither changes what the other adds: f(q, k) = f(4, kA) + (q - 4) s + (k - kA) g.
// So the step of pp stages and M micro-batches is simulated as two short pipelines of the plan's
// own stages, A = 4 stages (first, two middle, last) x 6 micro-batches and B = 3 stages x 3: g per
// micro-batch is read from one period of A's steady state (less_one_period: where it repeats
// exactly, else from a third one, C = 3 stages x 4: g = f(C) - f(B)), s = f(A) - f(B) - 3 g per
// stage, and every additive figure is f(A) + wB (f(A) - f(B)) + wC (f(A) - f(C)) with C's figures
// A's less one period where C is not run (sim/timeline.hpp). Interleaved 1F1B (sec. 2.2.2:
// (m + (pp - 1)/v) chunk slots, also linear in each) the same with 12 and 6 micro-batches (C 9),
// whole groups of 4 and 3 stages with a steady state, A's period a group of 4. A is longer than
// B because the memory is read from it (below): with fewer micro-batches its first stages'
// steady state is too short to hold their high-water mark (1F1B A of 4 or 5 micro-batches missed
// it by up to 12% and 0.7%, interleaved A of 8 by 0.17%; tests/unit/simulate_test.cpp).
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
                                            const Efficiency& eff, std::int64_t accumulation, bool multi_gpu);

// Layer symmetry (performance issue): a step whose layers repeat the same work (one kind, or
// kinds with a period P <= 4) is linear in its layer count L, with boundary work (embedding,
// head, optimizer over the rest, the first and last prefetch) that does not grow with L; and
// bilinear in layers and micro-batches (each micro-batch passes through every layer). So a
// one-stage step is simulated with L1 = L2 + P and L2 >= 4 + prefetch depth layers (L2 = L mod P),
// at k1 and k2 micro-batches under the micro-batch shortcut (`micro`), and every additive figure
// extrapolated: f(L1) + (L - L1)/P (f(L1) - f(L2)), plus the micro-batch and cross terms (sim/timeline.hpp).
// The SM-sharing probe the same way; memory by place of the compute stream, fitted as
// a + bL + c/L through L1, L2 and L1 + P; power from the L1 run unrolled to L layers. Taken only
// where that holds and it saves work: representative fidelity, no trace, the shortcut on, pp 1, a
// decoder (or encoder) whose layer kinds repeat, L > L1 + L2, no NVMe writes, memory more than 2%
// below every pool's capacity, fit and line within 5% (else nullopt: the caller simulates every
// layer). docs/performance.md has the mechanism.
// tests/unit/simulate_test.cpp bounds it against the whole simulation.
std::optional<Simulated> fewer_layers(const model::ModelSpec& m, const plan::Plan& p, const Options& options,
                                      const Efficiency& eff, bool multi_gpu, std::int64_t accumulation,
                                      std::optional<std::pair<int, int>> micro);

}  // namespace detail
}  // namespace ftplan::sim
