#include "cost/cost.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "common/least_squares.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"

namespace ftplan::cost {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// GPU board power by what it runs, as a share between its idle and TDP. Dense GEMMs run near
// TDP (DESIGN.md); memory-bound kernels and communication draw less; a GPU with a process
// attached but waiting sits above bare idle at raised clocks (an A40: ~30 W idle, ~110 W at full
// clocks with a process attached, NVIDIA/open-gpu-kernel-modules#874). Estimates where no
// calibration profile is given; with one, its `power` table (NVML per kernel class) replaces them
// where it measured, and these shares place the classes it did not measure on its fitted line
// (gpu_power_from_profile).
double gpu_share(Activity a) {
  switch (a) {
    case Activity::gemm: return 0.95;
    case Activity::attention: return 0.85;
    case Activity::memory_bound: return 0.65;
    case Activity::communication: return 0.40;
    case Activity::copy: return 0.30;
    case Activity::cpu_compute:
    case Activity::nvme_read:
    case Activity::nvme_write:
    case Activity::idle: return 0.12;
  }
  return 0.12;
}

struct Segment {
  double t0, t1, watts;
};

struct End {
  double t;
  int activity;
  int delta;
};

// Out of order by at most this much counts as in order: the layer symmetry's unrolled copies
// (sim::unroll) meet the pieces after them to within float rounding, not exactly. Merged so, two
// ends at most this far apart may sweep in the other order: a draw over a sub-femtosecond
// segment, nothing a figure shows.
constexpr double kOrderSlack_s = 1e-12;

// The ends of a component's intervals in time order. A lane's intervals (a stream's kernels) come
// one after another, so its ends already ascend: the lanes are merged pairwise (O(n log k) for k
// lanes, against O(n log n) for a sort of thousands of ends; a sweep point spent a tenth of its
// time sorting). A lane whose ends do not ascend (overlapping intervals, unrolled copies) makes it
// one sort. Equal times in any order: the sweep below emits nothing between them.
std::vector<End> ends_in_order(const std::vector<Interval>& in, Interval::Component component, double step_s) {
  std::array<std::uint32_t, 257> begin{};  // per lane, then its offset
  for (const auto& i : in)
    if (i.component == component) begin[i.lane + 1u] += 2;
  for (std::size_t l = 1; l < begin.size(); ++l) begin[l] += begin[l - 1];
  std::vector<End> ends(begin.back());
  std::array<std::uint32_t, 256> fill{};
  std::copy(begin.begin(), begin.end() - 1, fill.begin());
  bool ascending = true;
  for (const auto& i : in)
    if (i.component == component) {
      const double t0 = std::clamp(i.start_s, 0.0, step_s), t1 = std::clamp(i.end_s, 0.0, step_s);
      if (!(t0 < t1)) continue;
      std::uint32_t& at = fill[i.lane];
      if (at > begin[i.lane] && ends[at - 1].t > t0 + kOrderSlack_s) ascending = false;
      ends[at++] = {t0, static_cast<int>(i.activity), +1};
      ends[at++] = {t1, static_cast<int>(i.activity), -1};
    }
  // Close the gaps left by empty intervals: each lane's run becomes [begin, fill).
  std::vector<std::uint32_t> runs{0};
  std::size_t n = 0;
  for (std::size_t l = 0; l < fill.size(); ++l) {
    if (fill[l] == begin[l]) continue;
    if (n != begin[l])
      std::copy(ends.begin() + begin[l], ends.begin() + fill[l], ends.begin() + static_cast<std::ptrdiff_t>(n));
    n += fill[l] - begin[l];
    runs.push_back(static_cast<std::uint32_t>(n));
  }
  ends.resize(n);
  const auto by_time = [](const End& x, const End& y) { return x.t < y.t; };
  if (!ascending) {
    std::sort(ends.begin(), ends.end(), by_time);
    return ends;
  }
  // Bottom-up: merge neighbouring runs until one is left.
  while (runs.size() > 2) {
    std::vector<std::uint32_t> merged{0};
    for (std::size_t r = 0; r + 1 < runs.size(); r += 2) {
      const std::size_t last = std::min(r + 2, runs.size() - 1);
      std::inplace_merge(ends.begin() + runs[r], ends.begin() + runs[r + 1], ends.begin() + runs[last], by_time);
      merged.push_back(runs[last]);
    }
    runs = std::move(merged);
  }
  return ends;
}

// Piecewise-constant power of one component from overlapping intervals: the highest draw wins.
// The intervals' ends in time order (ends_in_order), then a sweep that keeps a count of each
// activity in progress.
template <class PowerOf>
std::vector<Segment> curve(const std::vector<Interval>& in, Interval::Component component, double step_s, double idle_w,
                           PowerOf power_of) {
  const std::vector<End> ends = ends_in_order(in, component, step_s);
  std::array<double, kActivities> watts{};
  for (std::size_t a = 0; a < kActivities; ++a) watts[a] = power_of(static_cast<Activity>(a));
  std::array<int, kActivities> active{};
  static_assert(kActivities <= 32);
  std::uint32_t in_progress = 0;  // bit a: activity a in progress
  double w = idle_w;              // the draw for `in_progress`
  std::vector<Segment> out;
  out.reserve(ends.size() + 1);
  double t = 0;
  const auto emit = [&](double until) {
    if (!(t < until)) return;
    if (!out.empty() && out.back().watts == w)
      out.back().t1 = until;  // same draw: extend
    else
      out.push_back({t, until, w});
    t = until;
  };
  for (const End& e : ends) {
    emit(e.t);
    const auto a = static_cast<std::size_t>(e.activity);
    const bool was = active[a] > 0;
    active[a] += e.delta;
    if (was == (active[a] > 0)) continue;
    in_progress ^= 1u << a;
    w = idle_w;
    for (std::uint32_t m = in_progress; m != 0; m &= m - 1) {
      const auto b = static_cast<std::size_t>(std::countr_zero(m));
      w = std::max(w, watts[b]);
    }
  }
  emit(step_s);
  return out;
}

// Highest average over any window of `window_s` of a periodic piecewise-constant curve with
// period `period_s` (the step repeats for the whole job).
double peak_window_average(const std::vector<Segment>& segs, double period_s, double window_s) {
  if (segs.empty() || period_s <= 0) return 0;
  std::vector<double> t = {0.0}, e = {0.0};  // cumulative energy at breakpoints
  for (const auto& s : segs) {
    t.push_back(s.t1);
    e.push_back(e.back() + s.watts * (s.t1 - s.t0));
  }
  const double period_energy = e.back();
  // E(cycles x period + r) for r in [0, period], with a cursor `k` that only moves forward while
  // r grows (reset by the caller when r wraps).
  const auto energy = [&](double cycles, double r, std::size_t& k) {
    while (k + 1 < segs.size() && !(r < t[k + 1])) ++k;
    return cycles * period_energy + e[k] + segs[k].watts * (r - t[k]);
  };
  // The window average is piecewise linear in its start; its maximum is at a start where the
  // window's start or its end meets a breakpoint. Both candidate lists ascend (the second is the
  // first shifted back by the window, modulo the period: a rotation of a sorted list), and so do
  // the window ends: one pass with forward-only cursors.
  const double shift = std::fmod(window_s, period_s);
  std::vector<double> starts;
  starts.reserve(2 * t.size());
  std::vector<double> back;
  back.reserve(t.size());
  // (The last breakpoint, the period's end, is the first's start again: left out, or the list
  // would hold that start twice, once on each side of its wrap, and not ascend after the rotation.)
  // t[i] - shift + period_s lies in (0, 2 period): one subtraction is fmod's result, exactly
  // (Sterbenz: x - period is exact for x in [period, 2 period]), at a twentieth of its cost.
  for (std::size_t i = 0; i + 1 < t.size(); ++i) {
    const double x = t[i] - shift + period_s;
    back.push_back(x < period_s ? x : x - period_s);
  }
  const auto lowest = std::min_element(back.begin(), back.end());
  std::rotate(back.begin(), lowest, back.end());
  std::merge(t.begin(), t.end(), back.begin(), back.end(), std::back_inserter(starts));
  double best = 0;
  std::size_t ka = 0, kb = 0;
  double wrap_cycles = -1;
  for (double a : starts) {
    if (a >= period_s) continue;  // the same start as 0, a candidate already
    const double x = a + window_s;
    const double cycles = std::floor(x / period_s);
    if (cycles != wrap_cycles) {  // the window's end entered a new period: restart its cursor
      wrap_cycles = cycles;
      kb = 0;
    }
    const double end = energy(cycles, x - cycles * period_s, kb);
    best = std::max(best, (end - energy(0, a, ka)) / window_s);
  }
  return best;
}

// Power over one simulated step of `step_s` (every step of the job alike). `peak` false leaves
// the peak 1-second average out (a shortcut's partial runs need only energy and idle time).
PowerReport power_of_step(const plan::Plan& p, const GpuPower& gpu_power, const std::vector<Interval>& iv,
                          double step_s, bool peak = true) {
  PowerReport r;
  const plan::Cluster& c = p.cluster;
  // Node-level parts count at the plan's share of each node (plan::Cluster::exclusive).
  const double gpus = c.gpus(), nodes = c.nodes * c.node_share();
  const double tdp = c.gpu.tdp_w, gpu_idle = c.gpu.idle_power_w;
  const auto gpu_w = [&](Activity a) { return gpu_power.at(a); };
  const double gpu_waiting = gpu_w(Activity::idle);

  // Node-level parts.
  const hardware::HostSpec& h = c.host;
  const double cpu_idle = h.cpu_idle_power_w * h.sockets, cpu_max = h.cpu_tdp_w * h.sockets;
  // The host's DIMMs draw per DIMM; a plan with more (or less) DRAM than the host as priced has
  // more (or fewer) DIMMs of the same size (as the bill of materials buys them, issue 41).
  const double dimm_scale = c.as_sold.host_dram_bytes > 0 ? h.dram_bytes / c.as_sold.host_dram_bytes : 1.0;
  // CXL memory expanders draw like DIMMs: their figure under load, whole while the node runs.
  double expander_w = 0;
  for (const auto& [x, n] : c.expanders) expander_w += n * x.power_w;
  const double dram_w = h.dram_power_per_dimm_w * h.dimms_per_socket * h.sockets * dimm_scale + expander_w;
  double nic_w = 0, drive_idle = 0, drive_read = 0, drive_write = 0;
  for (const auto& [nic, n] : c.nics) nic_w += n * (nic.power_w + nic.switch_power_per_port_w * nic.ports);
  for (const auto& [d, n] : c.drives) {
    drive_idle += n * d.idle_power_w;
    drive_read += n * d.read_power_w;
    drive_write += n * d.write_power_w;
  }
  const double base = c.node.base_power_w;
  r.idle_power_w = nodes * (base + cpu_idle + dram_w + nic_w + drive_idle) + gpus * gpu_idle;
  r.max_power_w = nodes * (base + cpu_max + dram_w + nic_w + std::max(drive_read, drive_write)) + gpus * tdp;
  if (step_s <= 0) return r;

  // One rank's GPU curve, times every GPU; the CPU and drives per node follow the rank's CPU and
  // NVMe activity (every rank of a node does the same at the same time).
  const auto gpu_curve = curve(iv, Interval::Component::gpu, step_s, gpu_waiting, gpu_w);
  const auto cpu_curve = curve(iv, Interval::Component::cpu, step_s, cpu_idle, [&](Activity) { return cpu_max; });
  const auto nvme_curve = curve(iv, Interval::Component::nvme, step_s, drive_idle,
                                [&](Activity a) { return a == Activity::nvme_write ? drive_write : drive_read; });
  // The three curves cover [0, step) each: walk them together, cutting at every breakpoint.
  std::vector<Segment> total;
  total.reserve(gpu_curve.size() + cpu_curve.size() + nvme_curve.size());
  std::size_t jg = 0, jc = 0, jn = 0;
  double t = 0;
  while (jg < gpu_curve.size() && jc < cpu_curve.size() && jn < nvme_curve.size()) {
    const double until = std::min({gpu_curve[jg].t1, cpu_curve[jc].t1, nvme_curve[jn].t1});
    const double w =
        gpus * gpu_curve[jg].watts + nodes * (base + dram_w + nic_w + cpu_curve[jc].watts + nvme_curve[jn].watts);
    if (until > t) total.push_back({t, until, w});
    t = until;
    if (!(gpu_curve[jg].t1 > until)) ++jg;
    if (!(cpu_curve[jc].t1 > until)) ++jc;
    if (!(nvme_curve[jn].t1 > until)) ++jn;
  }
  double energy = 0;
  for (const auto& seg : total) energy += seg.watts * (seg.t1 - seg.t0);
  r.energy_per_step_j = energy;
  r.average_power_w = energy / step_s;
  // Facilities provision for the highest 1-second average (DESIGN.md "Power").
  if (peak) r.peak_power_w = peak_window_average(total, step_s, 1.0);
  // Not computing: the compute stream idle (sim::kComputeLane), as simulate splits the step into
  // compute / waiting on comm or copies / idle. Memory-bound kernels on a side stream (DeepSpeed's
  // gradient upcast on its reduction stream) draw power above, but are not the step's compute.
  double computing = 0;
  for (const auto& x : iv)
    if (x.component == Interval::Component::gpu && x.lane == sim::kComputeLane)
      computing += std::min(x.end_s, step_s) - std::max(0.0, x.start_s);
  r.gpu_idle_s_per_step = std::max(0.0, step_s - computing) * gpus;
  return r;
}

}  // namespace

namespace {

// default_gpu_power without its words (power() runs for every plan of a sweep).
GpuPower estimate(const hardware::GpuSpec& gpu) {
  GpuPower g;
  for (std::size_t a = 0; a < kActivities; ++a)
    g.watts[a] = gpu.idle_power_w + gpu_share(static_cast<Activity>(a)) * (gpu.tdp_w - gpu.idle_power_w);
  return g;
}

}  // namespace

GpuPower default_gpu_power(const hardware::GpuSpec& gpu) {
  GpuPower g = estimate(gpu);
  g.source = fmt::format("catalog estimate for {}: idle {:g} W + a share of TDP {:g} W by activity", gpu.name,
                         gpu.idle_power_w, gpu.tdp_w);
  return g;
}

namespace {

// The kernel class of calibrate's `power` table (calibrate/cuda/cuda_bench.cu) that measures an
// activity's draw; "" where none does. GEMMs: the plan's dtype. The GPU is "idle" (process
// attached, waiting) while the CPU or the drives work.
std::string kernel_class(Activity a, hardware::Dtype dtype) {
  switch (a) {
    case Activity::gemm: return std::string("gemm_") + hardware::to_string(dtype);
    case Activity::attention: return "attention";
    case Activity::memory_bound: return "hbm_copy";
    case Activity::communication: return "nccl";
    case Activity::copy: return "h2d_copy";
    case Activity::cpu_compute:
    case Activity::nvme_read:
    case Activity::nvme_write:
    case Activity::idle: return "idle";
  }
  return "";
}

}  // namespace

GpuPower gpu_power_from_profile(const hardware::CalibrationProfile& profile, const hardware::GpuSpec& gpu,
                                hardware::Dtype dtype) {
  GpuPower g = default_gpu_power(gpu);
  // Every NVML sample of the classes some activity maps to: (the activity's share, watts).
  std::vector<double> share, watts;
  std::array<std::optional<double>, kActivities> measured{};
  std::vector<std::string> classes;
  for (std::size_t a = 0; a < kActivities; ++a) {
    const std::string cls = kernel_class(static_cast<Activity>(a), dtype);
    double sum = 0;
    std::size_t n = 0;
    for (const auto& row : profile.power) {
      if (row.kernel_class != cls) continue;
      if (row.samples.empty() && row.power_w > 0) {
        sum += row.power_w;
        ++n;
      }
      for (const double w : row.samples) {
        sum += w;
        ++n;
      }
    }
    if (n == 0) continue;
    measured[a] = sum / static_cast<double>(n);
    if (std::find(classes.begin(), classes.end(), cls) != classes.end()) continue;  // idle: one class, four activities
    classes.push_back(cls);
    for (const auto& row : profile.power) {
      if (row.kernel_class != cls) continue;
      const auto add = [&](double w) {
        share.push_back(gpu_share(static_cast<Activity>(a)));
        watts.push_back(w);
      };
      if (row.samples.empty() && row.power_w > 0) add(row.power_w);  // as in the mean above
      for (const double w : row.samples) add(w);
    }
  }
  if (classes.empty()) return g;
  const std::optional<LineFit> line = fit_line(share, watts);
  for (std::size_t a = 0; a < kActivities; ++a) {
    if (measured[a])
      g.watts[a] = *measured[a];
    else if (line)
      g.watts[a] = std::max(0.0, line->at(gpu_share(static_cast<Activity>(a))));
  }
  g.source = fmt::format("calibration profile of {} ({}): NVML power of {}; {}", profile.machine.hostname,
                         profile.machine.date, join(classes, ", "),
                         line ? fmt::format("the rest on the line fitted to them, {:.0f} W + {:.0f} W x share",
                                            line->intercept, line->slope)
                              : std::string("the rest the catalog's estimate"));
  return g;
}

PowerReport power(const plan::Plan& p, const Timeline& t, const GpuPower* gpu) {
  const GpuPower fallback = gpu ? GpuPower{} : estimate(p.cluster.gpu);
  const GpuPower& g = gpu ? *gpu : fallback;
  PowerReport r = power_of_step(p, g, t.intervals, t.step_s);
  if (t.partials.empty()) return r;
  // The simulator's shortcuts: energy and waiting GPU time extrapolate exactly from the main and
  // partial runs (sim/timeline.hpp). The highest 1-second average is the main step's: it holds
  // the step's head, its tail and a stretch of the steady state.
  const PowerReport main = r;
  for (const auto& q : t.partials) {
    const PowerReport part = power_of_step(p, g, q.intervals, q.step_s, false);
    r.energy_per_step_j += q.weight * (main.energy_per_step_j - part.energy_per_step_j);
    r.gpu_idle_s_per_step += q.weight * (main.gpu_idle_s_per_step - part.gpu_idle_s_per_step);
  }
  const double whole_s = t.whole_step_s();
  r.average_power_w = whole_s > 0 ? r.energy_per_step_j / whole_s : 0;
  return r;
}

Bom bill_of_materials(const plan::Plan& p) {
  const plan::Cluster& c = p.cluster;
  const double units = c.nodes * c.node_share();  // nodes bought (a slice of one: its share)
  Bom bom;
  bom.share = c.node_share();
  bom.share_gpus = c.gpus_per_node;
  bom.node_gpus = c.node.gpus;
  const auto add = [&](const std::string& item, double count, std::optional<double> unit) {
    if (count == 0) return;
    bom.lines.push_back({item, count * units, unit});
    if (!unit && bom.missing.empty()) bom.missing = fmt::format("no purchase price for {} in the catalog", item);
  };
  // Devices of one kind: what the plan has, less what the price already covers.
  const auto devices = [&](const auto& have, const auto& covered) {
    std::vector<std::string> names;
    for (const auto& [d, n] : have) names.push_back(d.name);
    for (const auto& [d, n] : covered) names.push_back(d.name);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    for (const auto& name : names) {
      int count = 0;
      std::optional<double> unit;
      std::string display = name;
      for (const auto& [d, n] : have)
        if (d.name == name) count += n, unit = d.price.purchase_usd, display = d.display_name;
      for (const auto& [d, n] : covered)
        if (d.name == name) count -= n, unit = d.price.purchase_usd, display = d.display_name;
      add(display, count, unit);
    }
  };
  const bool whole = c.node.price.purchase_usd && c.as_sold.catalog_node;
  if (whole) {
    add(c.node.display_name, 1, c.node.price.purchase_usd);
  } else {
    add(c.gpu.display_name, c.node.gpus, c.gpu.price.purchase_usd);
    add(c.host.display_name, 1, c.host.price.purchase_usd);
  }
  // DRAM beyond (or short of) what the price includes, at the host's DIMM price per GiB.
  const double included = whole ? c.as_sold.node_dram_bytes : c.as_sold.host_dram_bytes;
  if (included > 0)
    add(fmt::format("GiB of DRAM in the {}", c.host.display_name), (c.host.dram_bytes - included) / kGiB,
        c.host.price.dram_usd_per_gib);
  plan::for_each_device_kind([&](const auto& kind) {
    const std::remove_cvref_t<decltype(c.*kind.in_cluster)> none;
    devices(c.*kind.in_cluster, whole ? c.as_sold.*kind.as_sold : none);
  });
  for (const auto& l : bom.lines) bom.capex_usd += l.usd();
  return bom;
}

std::string bom_text(const Bom& bom) {
  std::vector<std::string> parts;
  for (const auto& l : bom.lines) {
    const double count = l.count / bom.share;  // a slice's lines are shown for the node whole
    parts.push_back(fmt::format("{}{:g} x {} {}", count < 0 ? "less " : (parts.empty() ? "" : "+"), std::abs(count),
                                l.item, l.unit_usd ? "at " + format_money(*l.unit_usd) : std::string("(no price)")));
  }
  const std::string text = join(parts, "; ");
  if (bom.share >= 1) return text;
  // The share as the fraction of the node's GPUs it uses, reduced: 2 of 8 GPUs is 1/4.
  const int d = std::gcd(bom.share_gpus, bom.node_gpus);
  return fmt::format("a {}/{} share ({} of its {} GPUs) of {}", bom.share_gpus / d, bom.node_gpus / d, bom.share_gpus,
                     bom.node_gpus, text);
}

double capex_usd(const plan::Plan& p) { return bill_of_materials(p).capex_usd; }

double rent_usd_per_hour(const plan::Plan& p, const CostSpec& spec) {
  const plan::Cluster& c = p.cluster;
  double per_node = spec.rent_usd_per_hour;
  if (per_node <= 0 && c.node.price.cloud_usd_per_hour) per_node = *c.node.price.cloud_usd_per_hour;
  // GPU on-demand rates are quoted per GPU with the host share included (mercatus-ai.com, 2026-05).
  if (per_node <= 0) per_node = c.gpu.price.cloud_usd_per_hour.value_or(0) * c.node.gpus;
  // A slice of a node rents at the node's rate times its share of the GPUs (cloud providers
  // price 1-, 2-, 4- and 8-GPU shapes of a server linearly: GCP a2-highgpu-1g/2g/4g/8g).
  return per_node * c.nodes * c.node_share();
}

namespace {

// What the plan's node has that the catalog's node as sold does not (or lacks that it has), in
// words: "1,536 GiB more DRAM, 10 more Samsung PM9A3 3.84 TB"; "" when it is the node as sold.
std::string changes_from_as_sold(const plan::Cluster& c) {
  if (!c.as_sold.catalog_node) return "";
  std::vector<std::string> parts;
  const double dram = (c.host.dram_bytes - c.as_sold.node_dram_bytes) / kGiB;
  if (std::abs(dram) >= 1)
    parts.push_back(fmt::format("{:.0f} GiB {} DRAM", std::abs(dram), dram > 0 ? "more" : "less"));
  const auto delta = [&](const auto& have, const auto& sold) {
    std::map<std::string, int> n;
    for (const auto& [d, k] : have) n[d.display_name] += k;
    for (const auto& [d, k] : sold) n[d.display_name] -= k;
    for (const auto& [name, k] : n)
      if (k != 0) parts.push_back(fmt::format("{} {} {}", std::abs(k), k > 0 ? "more" : "fewer", name));
  };
  plan::for_each_device_kind([&](const auto& kind) { delta(c.*kind.in_cluster, c.as_sold.*kind.as_sold); });
  return join(parts, ", ");
}

}  // namespace

std::string rent_basis(const plan::Plan& p, const CostSpec& spec) {
  const plan::Cluster& c = p.cluster;
  if (spec.mode != CostSpec::Mode::rent) return "";
  if (spec.rent_usd_per_hour > 0) return fmt::format("cost.rent, ${:.2f}/h a node", spec.rent_usd_per_hour);
  if (c.node.price.cloud_usd_per_hour) {
    const double rate = *c.node.price.cloud_usd_per_hour;
    std::string words = fmt::format("{}'s rate, ${:.2f}/h a node (catalog)", c.node.display_name, rate);
    if (c.node_share() < 1)
      words += fmt::format(", {} of its {} GPUs at ${:.2f}/h", c.gpus_per_node, c.node.gpus, rate * c.node_share());
    if (const std::string changed = changes_from_as_sold(c); !changed.empty())
      words += fmt::format("; the instance rents as catalogued, so the plan's {} are not in it (cost.rent prices them)",
                           changed);
    return words;
  }
  if (!c.gpu.price.cloud_usd_per_hour) return "";
  int drives = 0;
  for (const auto& [d, n] : c.drives) drives += n;
  return fmt::format(
      "{} x {} at ${:.2f}/h a GPU (catalog), host share included; no cloud rents {}: its {:.0f} GiB of "
      "DRAM{} are not in the rent (cost.rent prices them)",
      c.gpus(), c.gpu.display_name, *c.gpu.price.cloud_usd_per_hour, c.node.display_name, c.host.dram_bytes / kGiB,
      drives > 0 ? fmt::format(" and {} drive{}", drives, drives == 1 ? "" : "s") : "");
}

namespace {

// Why `p` has no price under `spec` (CostReport::unpriced): rented, no cost.rent, node or GPU
// hourly rate; owned, a part of its bill of materials (`bom`, the one dollars() priced) without a
// price, or an owned drive without one whose flash the job wears; "" when every figure is known.
std::string missing_price(const plan::Plan& p, const CostSpec& spec, double nvme_written_bytes, const Bom* bom) {
  const plan::Cluster& c = p.cluster;
  if (spec.mode == CostSpec::Mode::rent) {
    if (spec.rent_usd_per_hour > 0 || c.node.price.cloud_usd_per_hour || c.gpu.price.cloud_usd_per_hour) return "";
    return fmt::format("no hourly rate for {} or its GPU ({}) in the catalog; give cost.rent", c.node.display_name,
                       c.gpu.display_name);
  }
  if (bom && !bom->missing.empty()) return bom->missing + " (" + c.node.display_name + ")";
  // Flash wear is priced at the drives' price (dollars()); an owned drive without one leaves it unknown.
  if (nvme_written_bytes > 0)
    for (const auto& [d, n] : c.drives)
      if (n > 0 && d.endurance_bytes > 0 && !d.price.purchase_usd)
        return fmt::format("no purchase price for the drive {} in the catalog, so its flash wear", d.display_name);
  return "";
}

}  // namespace

CostReport dollars(const plan::Plan& p, const CostSpec& spec, const PowerReport& pw, double steps, double step_s,
                   double tokens_per_step, double nvme_written_per_step) {
  CostReport r;
  r.job_time_s = steps * step_s;
  const double hours = r.job_time_s / 3600.0;
  r.energy_kwh = pw.average_power_w * r.job_time_s * spec.pue / 3.6e6;
  std::optional<Bom> bom;  // owned: what the hardware cost to buy, priced once
  if (spec.mode == CostSpec::Mode::rent) {
    const double billed = spec.billing == CostSpec::Billing::per_hour ? std::ceil(hours) : hours;
    r.hardware_usd = rent_usd_per_hour(p, spec) * billed;
  } else {
    // Capex spread over the hours of paid work in the hardware's life.
    const double life_hours = spec.lifetime_years * 365.0 * 24.0 * std::max(0.01, spec.utilization);
    bom = bill_of_materials(p);
    r.hardware_usd = bom->capex_usd * hours / life_hours;
    r.energy_usd = r.energy_kwh * spec.energy_usd_per_kwh;
  }
  // Flash wear: bytes written over the drives' rated endurance, at the drives' price.
  double endurance = 0, drive_price = 0;
  for (const auto& [d, n] : p.cluster.drives) {
    endurance += d.endurance_bytes * n;
    drive_price += d.price.purchase_usd.value_or(0) * n;
  }
  endurance *= p.cluster.nodes * p.cluster.node_share();
  drive_price *= p.cluster.nodes * p.cluster.node_share();
  r.nvme_written_bytes = nvme_written_per_step * steps;
  if (endurance > 0 && r.nvme_written_bytes > 0) {
    r.wear_fraction = r.nvme_written_bytes / endurance;
    r.wear_usd = r.wear_fraction * drive_price;
    const double write_rate = nvme_written_per_step / std::max(1e-9, step_s);
    r.drive_lifetime_years = endurance / write_rate / (365.0 * 24 * 3600);
  }
  r.unpriced = missing_price(p, spec, r.nvme_written_bytes, bom ? &*bom : nullptr);
  r.cost_usd = r.hardware_usd + r.energy_usd + r.wear_usd;
  const double tokens = steps * tokens_per_step;
  if (tokens > 0) r.usd_per_million_tokens = r.cost_usd / tokens * 1e6;
  return r;
}

double owned_jobs_per_cluster_year(const OwnedPlan& p) {
  // A cluster does paid work `utilization` of the year's 8,760 hours.
  return 365.0 * 24.0 * 3600.0 * std::max(0.01, p.utilization) / p.job_time_s;
}

int owned_clusters(const OwnedPlan& p, double jobs_per_year) {
  return std::max(1, static_cast<int>(std::ceil(jobs_per_year / owned_jobs_per_cluster_year(p) - 1e-9)));
}

double owned_usd_per_year(const OwnedPlan& p, double jobs_per_year) {
  return owned_clusters(p, jobs_per_year) * p.capex_usd / std::max(0.01, p.lifetime_years) +
         jobs_per_year * p.running_usd_per_job;
}

std::vector<OwnedRange> cheapest_to_own(const std::vector<OwnedPlan>& plans, long long max_jobs) {
  std::vector<OwnedRange> out;
  if (plans.empty()) return out;
  for (long long n = 1; n <= max_jobs; ++n) {
    std::size_t best = 0;
    double best_usd = owned_usd_per_year(plans[0], static_cast<double>(n));
    for (std::size_t i = 1; i < plans.size(); ++i) {
      const double usd = owned_usd_per_year(plans[i], static_cast<double>(n));
      if (usd < best_usd) best = i, best_usd = usd;
    }
    if (out.empty() || out.back().plan != best)
      out.push_back({n, n, best});
    else
      out.back().to = n;
  }
  return out;
}

}  // namespace ftplan::cost
