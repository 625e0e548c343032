#include "validate.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "common/error.hpp"
#include "cpu_device.hpp"
#include "cuda_device.hpp"
#include "inventory/inventory.hpp"
#include "runtime/kernels.hpp"
#include "runtime/measure.hpp"
#include "runtime/uring.hpp"

namespace ftplan::exec {

std::string state_file_name(const std::string& plan_name) {
  return "ftplan-exec-" + plan::file_tag(plan_name) + ".state";
}

std::string digest(const std::vector<float>& parameters) {
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a 64 (Fowler, Noll, Vo)
  const auto* p = reinterpret_cast<const unsigned char*>(parameters.data());
  for (std::size_t i = 0; i < parameters.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return fmt::format("{:016x}", h);
}

double error_pct(double simulated, double measured) {
  if (measured == 0) return simulated == 0 ? 0 : 100.0;
  return 100.0 * (simulated - measured) / measured;
}

Drift judge_drift(const std::vector<double>& simulated, const std::vector<double>& measured, double threshold_pct) {
  Drift d;
  d.measured_spread_pct = 100.0 * runtime::relative_spread(measured);
  const double measured_step_s = runtime::median(measured);
  if (simulated.empty()) return d;
  const auto [lo, hi] = std::minmax_element(simulated.begin(), simulated.end());
  d.drift_pct = 100.0 * runtime::relative_spread(simulated);
  d.drifted = d.drift_pct > threshold_pct;
  d.min_error_pct = error_pct(*lo, measured_step_s);
  d.max_error_pct = error_pct(*hi, measured_step_s);
  return d;
}

namespace {

// The device the step runs on: sized from the simulated peak (validate), CUDA or the CPU device.
std::unique_ptr<Device> make_step_device(bool cuda, double device_bytes, std::string& why) {
  const auto bytes = static_cast<std::uint64_t>(device_bytes);
  if (cuda) return make_cuda_device(bytes, 2 * schedule::kStreams, why);
  return std::make_unique<CpuDevice>(bytes, 2 * schedule::kStreams);
}

// The note of a row whose step, simulated at each rate sample, spread past the threshold.
std::string drift_note(const Validation& v, std::size_t samples, double threshold_pct) {
  const auto most =
      std::max_element(v.rate_spread.begin(), v.rate_spread.end(),
                       [](const RateSpread& a, const RateSpread& b) { return a.spread_pct() < b.spread_pct(); });
  return fmt::format(
      "rates drifted: {:.1f}% (compare with care): the step simulated at each of the {} "
      "rate samples taken during the run spans {:.0f}-{:.0f} ms (error {:+.1f}% to {:+.1f}%), "
      "more than the {:.0f}% threshold, while the timed steps spread {:.1f}%; the rate "
      "that moved most: {} {:.0f}%",
      v.drift.drift_pct, samples,
      1e3 * *std::min_element(v.sample_simulated_step_s.begin(), v.sample_simulated_step_s.end()),
      1e3 * *std::max_element(v.sample_simulated_step_s.begin(), v.sample_simulated_step_s.end()),
      v.drift.min_error_pct, v.drift.max_error_pct, threshold_pct, v.drift.measured_spread_pct,
      most == v.rate_spread.end() ? "?" : most->name, most == v.rate_spread.end() ? 0.0 : most->spread_pct());
}

// Measured beside simulated: step time, peaks per tier, per link and per stream, and which
// resource bound each step.
void compare_rows(Validation& v) {
  const Measured& m = v.measured;
  const sim::StepResult& s = v.simulated;
  v.measured_step_time_s = m.step_time_s;
  v.simulated_step_time_s = s.step_time_s;
  v.measured_device_peak_bytes = m.device_peak_bytes;
  v.simulated_device_peak_bytes = s.gpu_peak_bytes();
  v.measured_host_peak_bytes = m.host_peak_bytes;
  if (m.device_scratch_bytes > 0)
    v.measured_device_peak_with_scratch_bytes = m.device_peak_bytes + m.device_scratch_bytes;
  v.measured_process_peak_bytes = m.process_peak_rss_bytes;
  v.simulated_host_peak_bytes = s.peak(plan::Tier::cpu);
  v.measured_nvme_peak_bytes = m.nvme_peak_bytes;
  v.simulated_nvme_peak_bytes = s.peak(plan::Tier::nvme);
  v.host_memory = m.host_note;
  // Links: the simulator's, with what the executor moved over each.
  for (const auto& l : s.links) {
    LinkRow row{l.name, 0, l.bytes, 0, l.busy_s};
    for (const auto& x : m.links)
      if (x.name == l.name) row.measured_bytes = x.bytes, row.measured_busy_s = x.busy_s;
    v.links.push_back(row);
  }
  for (const auto& x : m.links)
    if (std::none_of(v.links.begin(), v.links.end(), [&](const LinkRow& r) { return r.name == x.name; }))
      v.links.push_back({x.name, x.bytes, 0, x.busy_s, 0});
  for (const auto& st : s.streams) {
    LinkRow row{st.name, 0, 0, 0, st.busy_s};
    for (const auto& x : m.streams)
      if (x.name == st.name) row.measured_busy_s = x.busy_s, row.measured_cpu_s = x.cpu_s;
    v.streams.push_back(row);
  }
  // The counts of what moved, beside the links that carried it.
  const Counted& c = m.counted;
  for (auto& row : v.links) {
    if (row.name == sim::to_string(sim::HostLink::pcie_h2d)) row.counted_bytes = c.h2d_bytes;
    if (row.name == sim::to_string(sim::HostLink::pcie_d2h)) row.counted_bytes = c.d2h_bytes;
    if (row.name == sim::to_string(sim::HostLink::nvme_read))
      row.counted_bytes = c.nvme_read_bytes, row.block_bytes = c.block_read_bytes;
    if (row.name == sim::to_string(sim::HostLink::nvme_write))
      row.counted_bytes = c.nvme_write_bytes, row.block_bytes = c.block_write_bytes;
  }
  v.simulated_bound_by = s.bound_by;
  // Only a plan whose step moves bytes between tiers has an offload overhead to speak of.
  const bool offloads =
      std::any_of(v.links.begin(), v.links.end(), [](const LinkRow& l) { return l.simulated_bytes > 0; });
  for (const auto& st : v.streams)
    if (offloads && st.name == schedule::to_string(schedule::Stream::compute)) {
      v.measured_overhead_s = std::max(0.0, v.measured_step_time_s - st.measured_busy_s);
      v.simulated_overhead_s = std::max(0.0, v.simulated_step_time_s - st.simulated_busy_s);
    }
  double best = 0;
  for (const auto& x : m.streams)
    if (x.busy_s > best) best = x.busy_s, v.measured_bound_by = "stream " + x.name;
  for (const auto& x : m.links)
    if (x.busy_s > best && x.name != sim::to_string(sim::HostLink::uplink_h2d) &&
        x.name != sim::to_string(sim::HostLink::uplink_d2h))
      best = x.busy_s, v.measured_bound_by = "link " + x.name;
}

// The plan's step IR as the executor runs it, or why it cannot run here.
std::string step_ir(const model::ModelSpec& model, const plan::Plan& p, bool have_storage_dirs, schedule::StepIR& ir) {
  try {
    ir = schedule::build_step(model, p, inventory::build_inventory(model, p, 0));
  } catch (const std::exception& e) {
    return e.what();
  }
  if (std::string why = unsupported(ir); !why.empty()) return why;
  for (const auto& t : ir.tensors)
    if (t.tier == plan::Tier::nvme && !have_storage_dirs) return "the plan keeps tensors on NVMe: give --storage-dir";
  return {};
}

// With in-run probes: the samples that bracket the timed steps, their median simulated (the
// comparison itself without a profile, a diagnostic beside the prediction with one), the step at
// each sample, and whether the rates drifted. Returns the simulation's problem, "" when none.
std::string simulate_in_run(Validation& v, const ValidateOptions& o,
                            const std::function<sim::StepResult(const DeviceRates&, bool)>& simulate_at) {
  // The samples that bracket the timed steps: with a warm-up step and probes after it, those
  // from after the warm-up on (the probe before it saw another machine state: fresh files, cold
  // pages). Else all.
  v.first_sample_used = v.measured.step_s.size() > 1 && v.rate_samples.size() > 2 ? 1 : 0;
  const std::vector<DeviceRates> used(v.rate_samples.begin() + v.first_sample_used, v.rate_samples.end());
  const DeviceRates in_run_rates = median_rates(used);
  v.rate_spread = rate_spreads(used);
  const sim::StepResult at = simulate_at(in_run_rates, o.trace && !o.profile);
  if (!at.ok) return "simulation: " + at.problem;
  v.in_run_simulated_step_time_s = at.step_time_s;
  if (!o.profile) {
    v.rates = in_run_rates;
    v.simulated = at;
  }
  for (const auto& sample : used) {
    const sim::StepResult s = simulate_at(sample, false);
    if (s.ok) v.sample_simulated_step_s.push_back(s.step_time_s);
  }
  const std::vector<double>& steps = v.measured.step_s;
  const std::vector<double> timed(steps.size() > 1 ? steps.begin() + 1 : steps.begin(), steps.end());
  v.drift = judge_drift(v.sample_simulated_step_s, timed, o.drift_threshold_pct);
  if (used.size() < 2) {
    v.notes.insert(v.notes.begin(), "one rate sample: whether the rates drifted during the run is not known");
  } else if (v.drift.drifted) {
    v.notes.insert(v.notes.begin(), drift_note(v, used.size(), o.drift_threshold_pct));
  }
  return {};
}

}  // namespace

Validation validate(const model::ModelSpec& model, const plan::Plan& plan, const ValidateOptions& o) {
  Validation v;
  v.plan = plan.name;
  const auto say = [&](const std::string& s) {
    if (o.progress) o.progress(fmt::format("{}: {}", plan.name, s));
  };
  const auto fail = [&](std::string why) {
    v.ok = false;
    v.problem = std::move(why);
    return v;
  };
  const int dirs = static_cast<int>(o.storage_dirs.size());
  constexpr double kLarge = 1e15;  // device memory while simulating: the peak is what we learn
  plan::Plan p = on_this_machine(plan, DeviceRates{}, kLarge, dirs);
  schedule::StepIR ir;
  if (const std::string why = step_ir(model, p, !o.storage_dirs.empty(), ir); !why.empty()) return fail(why);
  bool nvme = false;
  for (const auto& t : ir.tensors) nvme = nvme || t.tier == plan::Tier::nvme;
  const std::vector<std::filesystem::path> probe_dirs = nvme ? o.storage_dirs : std::vector<std::filesystem::path>{};
  // The prediction's rates: a calibration profile measured apart from this run (issue 40), or, as a
  // diagnostic that cannot disagree by much, rates probed from this run's own shapes and files.
  const bool in_run = o.in_run_rates || !o.profile;
  v.rates_from = o.profile ? "profile" : "in-run";
  DeviceRates predicted;
  if (o.profile) {
    if (o.cuda)
      return fail("a profile's cpu_device section describes the CPU device; --device cuda takes --in-run-rates");
    std::string why;
    predicted = rates_from_profile(*o.profile, ir, probe_dirs, why);
    if (!why.empty()) return fail(why + " (ftplan calibrate measures it; docs/validation.md)");
  }
  // The in-run probes drift with the machine's load (docs/validation.md: GEMMs 1.6x and striped
  // NVMe 3.4x slower in the seconds before a run than during it), so one probe before the run is
  // not what the run saw: validate probes before the first step and, with probe_between_steps,
  // after each step (outside the steps' timing: Options::after_step), and takes each rate's median
  // over the probes that bracket the timed steps (after the warm-up step to after the last).
  std::unique_ptr<Device> probe_gpu;       // the CUDA probes' device, kept for the probes between steps
  std::unique_ptr<NvmeProbe> probe_files;  // the storage probe's files, kept likewise (NvmeProbe)
  if (in_run) {
    say(fmt::format("measuring the {} device's rates at the step's shapes", o.cuda ? "CUDA" : "CPU"));
    try {
      if (o.cuda) {
        std::string why;
        probe_gpu = make_cuda_device(std::uint64_t{256} << 20, 1, why);
        if (!probe_gpu) throw SystemError("CUDA device: " + why);
      }
      if (!probe_dirs.empty()) probe_files = std::make_unique<NvmeProbe>(probe_dirs);
      v.rate_samples.push_back(measure_rates(ir, probe_dirs, probe_gpu.get(), {}, probe_files.get()));
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }
  sim::Options so;
  so.max_micro_batches = 0;  // every micro-batch, as the executor runs them
  const auto simulate_at = [&](const DeviceRates& rates, bool trace) {
    const plan::Plan at = on_this_machine(plan, rates, kLarge, nvme ? dirs : 0);
    const sim::Efficiency eff = efficiency_of(rates);
    sim::Options opt = so;
    opt.trace = trace;
    return sim::simulate_step(model, at, opt, &eff);
  };
  const DeviceRates& first = o.profile ? predicted : v.rate_samples.front();
  p = on_this_machine(plan, first, kLarge, nvme ? dirs : 0);
  say("simulating");
  // The device is sized from the step simulated before the run (its peak hardly depends on the
  // rates: only where a free waits for a copy).
  v.simulated = simulate_at(first, o.trace && o.profile);
  if (!v.simulated.ok) return fail("simulation: " + v.simulated.problem);
  // The device's memory: the simulated peak, plus a page per live tensor of rounding.
  const double device_bytes =
      v.simulated.gpu_peak_bytes() * 1.02 + static_cast<double>(ir.tensors.size()) * 4096 + (8 << 20);
  std::string why;
  const std::unique_ptr<Device> device_owned = make_step_device(o.cuda, device_bytes, why);
  if (!device_owned) return fail("CUDA device: " + why);
  Device& device = *device_owned;
  v.device = device.describe();
  device.check_work(true);
  say(fmt::format("running {} step(s) on the {}", o.steps, v.device));
  Options eo;
  eo.steps = o.steps;
  eo.storage_dirs = o.storage_dirs;
  eo.trace = o.trace;
  if (!o.state_dir.empty()) eo.state_file = o.state_dir / state_file_name(plan.name);
  eo.progress = [&](const std::string& s) { say(s); };
  if (o.train) {
    std::string unfit;
    Training t = training_of(model, p, unfit);
    if (!unfit.empty()) return fail("cannot train for real: " + unfit);
    t.learning_rate = o.learning_rate;
    eo.train = t;
  }
  std::vector<std::string> probe_notes;
  // Between steps the NVMe rates are the run's own files' (exec::TierRates), not the probe's.
  eo.probe_tier = in_run && nvme;
  if (in_run && o.probe_between_steps)
    eo.after_step = [&](int done, const TierRates* tier) {
      say(fmt::format("probing the rates after step {}", done));
      try {
        DeviceRates r = measure_rates(ir, tier ? std::vector<std::filesystem::path>{} : probe_dirs, probe_gpu.get(),
                                      kStepProbe, tier ? nullptr : probe_files.get());
        if (tier) {
          r.nvme_read_Bps = tier->read_Bps;
          r.nvme_write_Bps = tier->write_Bps;
        }
        v.rate_samples.push_back(r);
      } catch (const std::exception& e) {
        probe_notes.push_back(fmt::format("the rate probe after step {} failed: {}", done, e.what()));
      }
    };
  try {
    v.measured = run(ir, p, device, eo);
  } catch (const std::exception& e) {
    v.measured.ok = false;
    v.measured.problem = e.what();
  }
  if (!v.measured.ok) return fail("executor: " + v.measured.problem);
  // A device that did less work than the step asks, or other work, ran a different step: its time
  // says nothing of the simulator (WorkCheck shares no code with the kernels or the probes).
  v.work = device.work_check();
  if (v.work.wrong > 0)
    return fail(
        fmt::format("the device's results are wrong: {} of {} entries recomputed by a plain loop differ "
                    "(first: {}); the step it timed is not the step simulated",
                    v.work.wrong, v.work.checked, v.work.first_wrong));
  v.notes = v.measured.notes;
  if (in_run) {
    v.notes.insert(v.notes.end(), probe_notes.begin(), probe_notes.end());
    say("simulating at the median of the in-run rate samples");
    if (std::string why = simulate_in_run(v, o, simulate_at); !why.empty()) return fail(why);
  }
  if (o.profile) {
    v.rates = predicted;
  } else {
    v.notes.insert(v.notes.begin(),
                   "rates from this run's own probes (no profile): the simulation is given the step's measured "
                   "shapes and files, so the comparison checks the mechanisms, not a prediction "
                   "(ftplan calibrate --out P, then --profile P)");
  }
  if (plan.cluster.node.name != kLocalNode)
    v.notes.insert(v.notes.begin(),
                   fmt::format("the plan's {} x {} ran as this machine's CPU device, its host and drives as this "
                               "machine's (cluster: {{node: local}} says so in the scenario)",
                               plan.cluster.gpus(), plan.cluster.gpu.display_name));
  compare_rows(v);
  return v;
}

}  // namespace ftplan::exec
