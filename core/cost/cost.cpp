#include "cost/cost.hpp"

#include <algorithm>
#include <iterator>
#include <array>
#include <cmath>

namespace ftplan::cost {

namespace {

// GPU board power by what it runs, as a share between its idle and TDP. Dense GEMMs run near
// TDP (DESIGN.md); memory-bound kernels and communication draw less; a GPU with a process
// attached but waiting sits above bare idle at raised clocks (an A40: ~30 W idle, ~110 W at full
// clocks with a process attached, NVIDIA/open-gpu-kernel-modules#874). Estimates until a
// calibration profile's `power` table (NVML per kernel class) replaces them.
double gpu_share(Activity a) {
  switch (a) {
    case Activity::gemm:
      return 0.95;
    case Activity::attention:
      return 0.85;
    case Activity::memory_bound:
      return 0.65;
    case Activity::communication:
      return 0.40;
    case Activity::copy:
      return 0.30;
    case Activity::cpu_compute:
    case Activity::nvme_read:
    case Activity::nvme_write:
    case Activity::idle:
      return 0.12;
  }
  return 0.12;
}

struct Segment {
  double t0, t1, watts;
};

// Piecewise-constant power of one component from overlapping intervals: the highest draw wins.
// An interval covers a piece when start <= the piece's midpoint < end. The midpoints ascend, so
// each interval covers a contiguous run of pieces, found by binary search and marked with a
// count per activity at its ends: O((pieces + intervals) log) rather than pieces x intervals
// (a step of many micro-batches has thousands of intervals).
template <class PowerOf>
std::vector<Segment> curve(const std::vector<Interval>& in, Interval::Component component, double step_s, double idle_w,
                           PowerOf power_of) {
  std::vector<double> cuts = {0.0, step_s};
  for (const auto& i : in)
    if (i.component == component) {
      cuts.push_back(std::clamp(i.start_s, 0.0, step_s));
      cuts.push_back(std::clamp(i.end_s, 0.0, step_s));
    }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  const std::size_t pieces = cuts.size() - 1;
  std::vector<double> mids(pieces);
  for (std::size_t k = 0; k < pieces; ++k) mids[k] = 0.5 * (cuts[k] + cuts[k + 1]);
  constexpr std::size_t kActivities = static_cast<std::size_t>(Activity::idle) + 1;
  std::vector<std::array<int, kActivities>> delta(pieces + 1, std::array<int, kActivities>{});
  for (const auto& i : in) {
    if (i.component != component) continue;
    const auto lo = static_cast<std::size_t>(std::lower_bound(mids.begin(), mids.end(), i.start_s) - mids.begin());
    const auto hi = static_cast<std::size_t>(std::lower_bound(mids.begin(), mids.end(), i.end_s) - mids.begin());
    if (lo >= hi) continue;
    ++delta[lo][static_cast<std::size_t>(i.activity)];
    --delta[hi][static_cast<std::size_t>(i.activity)];
  }
  std::array<double, kActivities> watts{};
  for (std::size_t a = 0; a < kActivities; ++a) watts[a] = power_of(static_cast<Activity>(a));
  std::array<int, kActivities> active{};
  std::vector<Segment> out;
  out.reserve(pieces);
  for (std::size_t k = 0; k < pieces; ++k) {
    double w = idle_w;
    for (std::size_t a = 0; a < kActivities; ++a) {
      active[a] += delta[k][a];
      if (active[a] > 0) w = std::max(w, watts[a]);
    }
    out.push_back({cuts[k], cuts[k + 1], w});
  }
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
  for (double b : t) back.push_back(std::fmod(b - shift + period_s, period_s));
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

}  // namespace

PowerReport power(const plan::Plan& p, const std::vector<Interval>& iv, double step_s) {
  PowerReport r;
  const plan::Cluster& c = p.cluster;
  const double gpus = c.gpus(), nodes = c.nodes;
  const double tdp = c.gpu.tdp_w, gpu_idle = c.gpu.idle_power_w;
  const auto gpu_w = [&](Activity a) { return gpu_idle + gpu_share(a) * (tdp - gpu_idle); };
  const double gpu_waiting = gpu_w(Activity::idle);

  // Node-level parts.
  const hardware::HostSpec& h = c.host;
  const double cpu_idle = h.cpu_idle_power_w * h.sockets, cpu_max = h.cpu_tdp_w * h.sockets;
  const double dram_w = h.dram_power_per_dimm_w * h.dimms_per_socket * h.sockets;
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
  std::vector<double> cuts = {0.0, step_s};
  for (const auto* cv : {&gpu_curve, &cpu_curve, &nvme_curve})
    for (const auto& s : *cv) cuts.push_back(s.t0);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // The watts of the piece of `cv` holding x (else its last piece's). Pieces ascend and x ascends
  // from call to call, so each curve keeps a cursor instead of searching from its start.
  const auto at = [](const std::vector<Segment>& cv, std::size_t& j, double x) {
    while (j < cv.size() && !(x < cv[j].t1)) ++j;
    if (j < cv.size() && cv[j].t0 <= x) return cv[j].watts;
    return cv.empty() ? 0.0 : cv.back().watts;
  };
  std::size_t jg = 0, jc = 0, jn = 0;
  std::vector<Segment> total;
  for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
    const double mid = 0.5 * (cuts[k] + cuts[k + 1]);
    const double w = gpus * at(gpu_curve, jg, mid) +
                     nodes * (base + dram_w + nic_w + at(cpu_curve, jc, mid) + at(nvme_curve, jn, mid));
    total.push_back({cuts[k], cuts[k + 1], w});
  }
  double energy = 0;
  for (const auto& s : total) energy += s.watts * (s.t1 - s.t0);
  r.energy_per_step_j = energy;
  r.average_power_w = energy / step_s;
  // Facilities provision for the highest 1-second average (DESIGN.md "Power").
  r.peak_power_w = peak_window_average(total, step_s, 1.0);
  // Idle compute: GPU time not spent in kernels (waiting on communication, copies, the CPU, bubbles).
  const auto computing = curve(iv, Interval::Component::gpu, step_s, 0.0, [](Activity a) {
    return a == Activity::gemm || a == Activity::attention || a == Activity::memory_bound ? 1.0 : 0.0;
  });
  double busy = 0;
  for (const auto& s : computing)
    if (s.watts > 0) busy += s.t1 - s.t0;
  r.gpu_idle_s_per_step = (step_s - busy) * gpus;
  return r;
}

double capex_usd(const plan::Plan& p) {
  const plan::Cluster& c = p.cluster;
  double node = 0;
  if (c.node.price.purchase_usd) {
    node = *c.node.price.purchase_usd;
  } else {
    node += c.gpu.price.purchase_usd.value_or(0) * c.node.gpus;
    node += c.host.price.purchase_usd.value_or(0);
    for (const auto& [d, n] : c.drives) node += n * d.price.purchase_usd.value_or(0);
    for (const auto& [nic, n] : c.nics) node += n * nic.price.purchase_usd.value_or(0);
  }
  return node * c.nodes;
}

double rent_usd_per_hour(const plan::Plan& p, const CostSpec& spec) {
  const plan::Cluster& c = p.cluster;
  double per_node = spec.rent_usd_per_hour;
  if (per_node <= 0 && c.node.price.cloud_usd_per_hour) per_node = *c.node.price.cloud_usd_per_hour;
  // GPU on-demand rates are quoted per GPU with the host share included (mercatus-ai.com, 2026-05).
  if (per_node <= 0) per_node = c.gpu.price.cloud_usd_per_hour.value_or(0) * c.node.gpus;
  return per_node * c.nodes;
}

CostReport dollars(const plan::Plan& p, const CostSpec& spec, const PowerReport& pw, double steps, double step_s,
                   double tokens_per_step, double nvme_written_per_step) {
  CostReport r;
  r.job_time_s = steps * step_s;
  const double hours = r.job_time_s / 3600.0;
  r.energy_kwh = pw.average_power_w * r.job_time_s * spec.pue / 3.6e6;
  if (spec.mode == CostSpec::Mode::rent) {
    const double billed = spec.billing == CostSpec::Billing::per_hour ? std::ceil(hours) : hours;
    r.hardware_usd = rent_usd_per_hour(p, spec) * billed;
  } else {
    // Capex spread over the hours of paid work in the hardware's life.
    const double life_hours = spec.lifetime_years * 365.0 * 24.0 * std::max(0.01, spec.utilization);
    r.hardware_usd = capex_usd(p) * hours / life_hours;
    r.energy_usd = r.energy_kwh * spec.energy_usd_per_kwh;
  }
  // Flash wear: bytes written over the drives' rated endurance, at the drives' price.
  double endurance = 0, drive_price = 0;
  for (const auto& [d, n] : p.cluster.drives) {
    endurance += d.endurance_bytes * n;
    drive_price += d.price.purchase_usd.value_or(0) * n;
  }
  endurance *= p.cluster.nodes;
  drive_price *= p.cluster.nodes;
  r.nvme_written_bytes = nvme_written_per_step * steps;
  if (endurance > 0 && r.nvme_written_bytes > 0) {
    r.wear_fraction = r.nvme_written_bytes / endurance;
    r.wear_usd = r.wear_fraction * drive_price;
    const double write_rate = nvme_written_per_step / std::max(1e-9, step_s);
    r.drive_lifetime_years = endurance / write_rate / (365.0 * 24 * 3600);
  }
  r.cost_usd = r.hardware_usd + r.energy_usd + r.wear_usd;
  const double tokens = steps * tokens_per_step;
  if (tokens > 0) r.usd_per_million_tokens = r.cost_usd / tokens * 1e6;
  return r;
}

}  // namespace ftplan::cost
