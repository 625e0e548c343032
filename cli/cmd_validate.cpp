// `ftplan validate`: each plan simulated and run for real by the executor on this machine,
// measured against simulated (exec/validate.hpp).
#include <algorithm>
#include <cstdio>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app.hpp"
#include "calibrate/machine.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"
#include "exec/validate.hpp"
#include "io/output_file.hpp"
#include "io/profile_io.hpp"
#include "runtime/uring.hpp"
#include "scenario_source.hpp"
#include "table.hpp"

namespace ftplan::cli {
namespace {

std::string pct(double simulated, double measured) {
  return fmt::format("{:+.1f}%", exec::error_pct(simulated, measured));
}

void print_table(const exec::Validation& v) {
  fmt::print("== {}\n", v.plan);
  if (!v.ok) {
    fmt::print("not validated: {}\n\n", v.problem);
    return;
  }
  using A = Table::Align;
  Table t;
  const bool predicted = v.rates_from == "profile";
  t.columns({{"", A::left},
             {"measured", A::right},
             {predicted ? "predicted (profile)" : "simulated (in-run rates)", A::right},
             {"error", A::right}});
  t.row({"step time", ftplan::format_duration(v.measured_step_time_s), ftplan::format_duration(v.simulated_step_time_s),
         pct(v.simulated_step_time_s, v.measured_step_time_s)});
  // What the tiers add to the step beyond its compute: the part a tiered plan's verdict turns on.
  if (v.measured_overhead_s > 0 || v.simulated_overhead_s > 0)
    t.row({"offload overhead (step - compute)", ftplan::format_duration(v.measured_overhead_s),
           ftplan::format_duration(v.simulated_overhead_s), pct(v.simulated_overhead_s, v.measured_overhead_s)});
  if (predicted && v.in_run_simulated_step_time_s > 0)
    t.row({"step time at in-run rates", "", ftplan::format_duration(v.in_run_simulated_step_time_s),
           pct(v.in_run_simulated_step_time_s, v.measured_step_time_s)});
  t.row({"device peak", ftplan::format_bytes(v.measured_device_peak_bytes),
         ftplan::format_bytes(v.simulated_device_peak_bytes),
         pct(v.simulated_device_peak_bytes, v.measured_device_peak_bytes)});
  if (v.measured_device_peak_with_scratch_bytes >= 0)
    t.row({"device peak + kernel scratch", ftplan::format_bytes(v.measured_device_peak_with_scratch_bytes),
           ftplan::format_bytes(v.simulated_device_peak_bytes),
           pct(v.simulated_device_peak_bytes, v.measured_device_peak_with_scratch_bytes)});
  t.row({"host peak", ftplan::format_bytes(v.measured_host_peak_bytes),
         ftplan::format_bytes(v.simulated_host_peak_bytes),
         pct(v.simulated_host_peak_bytes, v.measured_host_peak_bytes)});
  // The process as the kernel counts it, against what the simulator says the step holds in all.
  if (v.measured_process_peak_bytes >= 0) {
    const double held = v.simulated_device_peak_bytes + v.simulated_host_peak_bytes;
    t.row({"process peak RSS", ftplan::format_bytes(v.measured_process_peak_bytes), ftplan::format_bytes(held),
           pct(held, v.measured_process_peak_bytes)});
  }
  if (v.measured_nvme_peak_bytes > 0 || v.simulated_nvme_peak_bytes > 0)
    t.row({"NVMe peak", ftplan::format_bytes(v.measured_nvme_peak_bytes),
           ftplan::format_bytes(v.simulated_nvme_peak_bytes),
           pct(v.simulated_nvme_peak_bytes, v.measured_nvme_peak_bytes)});
  for (const auto& s : v.streams) {
    t.row({"stream " + s.name + " busy", ftplan::format_duration(s.measured_busy_s),
           ftplan::format_duration(s.simulated_busy_s), pct(s.simulated_busy_s, s.measured_busy_s)});
    // Its worker's CPU time in those ops: busy time beyond it is waiting (for a core, a drive).
    t.row({"stream " + s.name + " CPU", ftplan::format_duration(s.measured_cpu_s), "", ""});
  }
  for (const auto& l : v.links) {
    t.row({"link " + l.name + " bytes", ftplan::format_bytes(l.measured_bytes), ftplan::format_bytes(l.simulated_bytes),
           pct(l.simulated_bytes, l.measured_bytes)});
    // What moved, counted as it moved (and by the kernel's block-I/O counters), not the ops' sizes.
    if (l.counted_bytes >= 0)
      t.row({"link " + l.name + " counted", ftplan::format_bytes(l.counted_bytes),
             ftplan::format_bytes(l.simulated_bytes), pct(l.simulated_bytes, l.counted_bytes)});
    if (l.block_bytes >= 0)
      t.row({"link " + l.name + " block I/O", ftplan::format_bytes(l.block_bytes),
             ftplan::format_bytes(l.simulated_bytes), pct(l.simulated_bytes, l.block_bytes)});
    t.row({"link " + l.name + " busy", ftplan::format_duration(l.measured_busy_s),
           ftplan::format_duration(l.simulated_busy_s), pct(l.simulated_busy_s, l.measured_busy_s)});
  }
  t.row({"bound by", v.measured_bound_by, v.simulated_bound_by, ""});
  fmt::print("{}", t.text());
  if (!v.sample_simulated_step_s.empty()) {
    const auto [lo, hi] = std::minmax_element(v.sample_simulated_step_s.begin(), v.sample_simulated_step_s.end());
    fmt::print(
        "in-run rates: median of {} probe(s) during the run; the step simulated at each: {} to {} "
        "(error {:+.1f}% to {:+.1f}%, drift {:.1f}%{}); the timed steps spread {:.1f}%\n",
        v.sample_simulated_step_s.size(), ftplan::format_duration(*lo), ftplan::format_duration(*hi),
        v.drift.min_error_pct, v.drift.max_error_pct, v.drift.drift_pct, v.drift.drifted ? ": compare with care" : "",
        v.drift.measured_spread_pct);
  }
  fmt::print("device: {}\nhost memory: {}\n", v.device, v.host_memory);
  fmt::print("work check: {}\n", v.work.checked > 0 ? fmt::format("{} entries of the device's products recomputed by "
                                                                  "a plain loop, {} wrong",
                                                                  v.work.checked, v.work.wrong)
                                                    : std::string("none (this device has no spot check)"));
  fmt::print("parameters after step {}: digest {}\n",
             v.measured.first_step + static_cast<int>(v.measured.step_s.size()), exec::digest(v.measured.master));
  if (!v.measured.losses.empty()) {
    std::string losses;
    for (const double x : v.measured.losses) losses += fmt::format("{}{:.4f}", losses.empty() ? "" : " ", x);
    fmt::print("losses (steps {} to {}): {}\n", v.measured.first_step + 1,
               v.measured.first_step + static_cast<int>(v.measured.losses.size()), losses);
  }
  for (const auto& n : v.notes) fmt::print("note: {}\n", n);
  fmt::print("\n");
}

nlohmann::json to_json(const exec::Validation& v) {
  nlohmann::json j = {{"plan", v.plan}, {"ok", v.ok}};
  if (!v.ok) {
    j["problem"] = v.problem;
    return j;
  }
  j["rates_from"] = v.rates_from;
  j["measured_step_time_s"] = v.measured_step_time_s;
  j["simulated_step_time_s"] = v.simulated_step_time_s;
  j["step_time_error_pct"] = exec::error_pct(v.simulated_step_time_s, v.measured_step_time_s);
  const bool overhead = v.measured_overhead_s > 0 || v.simulated_overhead_s > 0;
  j["measured_offload_overhead_s"] = v.measured_overhead_s;
  j["simulated_offload_overhead_s"] = v.simulated_overhead_s;
  j["offload_overhead_error_pct"] =
      overhead ? nlohmann::json(exec::error_pct(v.simulated_overhead_s, v.measured_overhead_s)) : nlohmann::json();
  if (v.in_run_simulated_step_time_s > 0) {
    j["in_run_simulated_step_time_s"] = v.in_run_simulated_step_time_s;
    j["in_run_step_time_error_pct"] = exec::error_pct(v.in_run_simulated_step_time_s, v.measured_step_time_s);
  }
  j["measured_step_times_s"] = v.measured.step_s;
  j["first_step"] = v.measured.first_step;
  j["parameters_digest"] = exec::digest(v.measured.master);
  j["losses"] = v.measured.losses;  // with --train: one per step run; else empty
  j["measured_device_peak_bytes"] = v.measured_device_peak_bytes;
  j["simulated_device_peak_bytes"] = v.simulated_device_peak_bytes;
  j["device_peak_error_pct"] = exec::error_pct(v.simulated_device_peak_bytes, v.measured_device_peak_bytes);
  j["measured_host_peak_bytes"] = v.measured_host_peak_bytes;
  const auto known = [](double x) { return x >= 0 ? nlohmann::json(x) : nlohmann::json(); };
  j["measured_device_peak_with_scratch_bytes"] = known(v.measured_device_peak_with_scratch_bytes);
  j["measured_process_peak_bytes"] = known(v.measured_process_peak_bytes);
  j["simulated_host_peak_bytes"] = v.simulated_host_peak_bytes;
  j["measured_nvme_peak_bytes"] = v.measured_nvme_peak_bytes;
  j["simulated_nvme_peak_bytes"] = v.simulated_nvme_peak_bytes;
  j["device"] = v.device;
  j["work_checked"] = v.work.checked;
  j["work_wrong"] = v.work.wrong;
  // The rates the prediction was given (the profile's, or the in-run probes' medians), then each
  // in-run rate over the probes used.
  j["simulated_rates"] = {{"attention_flops_per_s", v.rates.attention_flops_per_s},
                          {"memory_Bps", v.rates.memory_Bps},
                          {"copy_Bps", v.rates.copy_Bps},
                          {"dram_Bps", v.rates.dram_Bps},
                          {"adam_params_per_s", v.rates.adam_params_per_s},
                          {"nvme_read_Bps", v.rates.nvme_read_Bps},
                          {"nvme_write_Bps", v.rates.nvme_write_Bps},
                          {"gemm_points", v.rates.gemm.size()}};
  nlohmann::json rates = nlohmann::json::object();
  for (const auto& r : v.rate_spread)
    rates[r.name] = {{"min", r.min}, {"median", r.median}, {"max", r.max}, {"spread_pct", r.spread_pct()}};
  j["rates"] = rates;
  j["rate_samples"] = v.rate_samples.size();
  j["rate_samples_used"] = v.rate_samples.size() - static_cast<std::size_t>(v.first_sample_used);
  j["simulated_step_times_at_samples_s"] = v.sample_simulated_step_s;
  j["rate_drift_pct"] = v.drift.drift_pct;
  j["rates_drifted"] = v.drift.drifted;
  j["step_time_error_pct_range"] = {v.drift.min_error_pct, v.drift.max_error_pct};
  j["measured_step_spread_pct"] = v.drift.measured_spread_pct;
  j["host_memory"] = v.host_memory;
  j["host_pinned"] = v.measured.host_pinned;
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : v.links)
    links.push_back({{"name", l.name},
                     {"measured_bytes", l.measured_bytes},
                     {"counted_bytes", known(l.counted_bytes)},
                     {"block_io_bytes", known(l.block_bytes)},
                     {"simulated_bytes", l.simulated_bytes},
                     {"measured_busy_s", l.measured_busy_s},
                     {"simulated_busy_s", l.simulated_busy_s}});
  j["links"] = links;
  nlohmann::json streams = nlohmann::json::array();
  for (const auto& s : v.streams)
    streams.push_back({{"name", s.name},
                       {"measured_busy_s", s.measured_busy_s},
                       {"measured_cpu_s", s.measured_cpu_s},
                       {"simulated_busy_s", s.simulated_busy_s}});
  j["streams"] = streams;
  j["bound_by"] = {{"measured", v.measured_bound_by}, {"simulated", v.simulated_bound_by}};
  j["notes"] = v.notes;
  return j;
}

// --steps is the executor's step count here, not the quick form's job length: taken out of argv
// before the scenario options see it (default 3).
struct StepsArg {
  std::vector<std::string> argv;  // the rest
  std::string steps = "3";
};

StepsArg take_steps(const std::vector<std::string>& argv_in) {
  StepsArg out;
  for (std::size_t i = 0; i < argv_in.size(); ++i) {
    if (argv_in[i] == "--steps" && i + 1 < argv_in.size()) {
      out.steps = argv_in[++i];
    } else if (argv_in[i].starts_with("--steps=")) {
      out.steps = argv_in[i].substr(8);
    } else {
      out.argv.push_back(argv_in[i]);
    }
  }
  return out;
}

std::vector<OptionSpec> validate_options() {
  auto options = scenario_options();
  std::erase_if(options, [](const OptionSpec& o) { return o.name == "steps"; });
  options.push_back({"steps", true, "optimizer steps the executor runs (default 3; the first is a warm-up)"});
  options.push_back(
      {"scale", true, "shrink the model: layers=N,hidden=H[,vocab=V][,seq=S] (placements and ratios kept)"});
  options.push_back({"storage-dir", true, "directories of the NVMe tier's files, comma-separated (striped over them)"});
  options.push_back(
      {"device", true, "what plays the GPU: cpu (the CPU device, default) or cuda (a CUDA build's GPU 0)"});
  options.push_back({"state-dir", true,
                     "keep each plan's training state (parameters, Adam moments, step) in DIR after every step, "
                     "and resume from it: a run killed and started again continues its steps"});
  options.push_back({"in-run-rates", false,
                     "also probe the device's rates at the step's own shapes before and between the steps and "
                     "simulate at them: a diagnostic beside the profile's prediction (without --profile, the "
                     "whole comparison; it checks mechanisms, since the rates come from the run checked)"});
  options.push_back({"train", false,
                     "train for real: the compute runs the model's decoder on the parameters each step streams, on "
                     "the synthetic corpus, and each step's loss is printed (the CPU device; full and LoRA fine-tunes; "
                     "the step then times the decoder's kernels)"});
  options.push_back({"trace", true,
                     "write the measured timeline of each plan's last step as Chrome trace JSON "
                     "(PLAN is appended to the name); the simulated one goes beside it as .sim"});
  return options;
}

// The executor's options: --steps, --scale, --device, --state-dir. Throws UsageError.
exec::Scale read_run_options(const Args& args, const std::string& steps, exec::ValidateOptions& o) {
  std::size_t used = 0;
  try {
    o.steps = std::stoi(steps, &used);
  } catch (const std::exception&) {
    used = 0;  // not a number, or out of int's range
  }
  if (used == 0 || used != steps.size()) throw UsageError("--steps wants a whole number");
  if (o.steps < 1 || o.steps > 1000) throw UsageError("--steps must be 1..1000");
  exec::Scale scale;
  if (auto text = args.value("scale")) scale = exec::parse_scale(*text);
  if (auto dev = args.value("device")) {
    if (*dev != "cpu" && *dev != "cuda") throw UsageError(fmt::format("--device: '{}' is not cpu or cuda", *dev));
    o.cuda = *dev == "cuda";
  }
  o.train = args.flag("train");
  if (auto dir = args.value("state-dir")) {
    o.state_dir = *dir;
    std::error_code ec;
    if (!std::filesystem::is_directory(o.state_dir, ec))
      throw UsageError(fmt::format("--state-dir {}: not a directory", *dir));
  }
  return scale;
}

// --format json or csv: every plan's validation.
void print_results(const App& app, const plan::Scenario& s, const model::ModelSpec& model, const std::string& note,
                   const std::vector<exec::Validation>& results) {
  if (app.format() == Format::json) {
    nlohmann::json doc = {{"schema_version", kOutputSchemaVersion}, {"scenario", s.name}, {"model", model.name}};
    if (!note.empty()) doc["scale"] = note;
    doc["results"] = nlohmann::json::array();
    for (const auto& v : results) doc["results"].push_back(to_json(v));
    fmt::print("{}\n", doc.dump(2));
  } else if (app.format() == Format::csv) {
    fmt::print(
        "plan,ok,rates_from,measured_step_time_s,simulated_step_time_s,step_time_error_pct,"
        "offload_overhead_error_pct,measured_device_peak_bytes,simulated_device_peak_bytes,measured_bound_by,"
        "simulated_bound_by\n");
    for (const auto& v : results)
      fmt::print(
          "\"{}\",{},{},{},{},{:.2f},{},{},{},\"{}\",\"{}\"\n", v.plan, v.ok, v.rates_from, v.measured_step_time_s,
          v.simulated_step_time_s, exec::error_pct(v.simulated_step_time_s, v.measured_step_time_s),
          v.measured_overhead_s > 0 || v.simulated_overhead_s > 0
              ? fmt::format("{:.2f}", exec::error_pct(v.simulated_overhead_s, v.measured_overhead_s))
              : std::string(),
          v.measured_device_peak_bytes, v.simulated_device_peak_bytes, v.measured_bound_by, v.simulated_bound_by);
  }
}

}  // namespace

int cmd_validate(const std::vector<std::string>& argv_in) {
  const StepsArg taken = take_steps(argv_in);
  const auto options = validate_options();
  const Args args(taken.argv, 2, options);
  App app(args);
  // This machine, for plans on `cluster: {node: local}`: the calibration profile's CPU and DRAM
  // (--profile), else this machine's as calibrate reads them; its storage directories are
  // --storage-dir's, else those the profile measured.
  hardware::CalibrationProfile machine;
  const auto profile_path = args.value("profile");
  if (profile_path)
    machine = io::load_profile(*profile_path);
  else
    machine.machine.cpu = calibrate::read_cpu_identity();
  exec::ValidateOptions o;
  if (auto dirs = args.value("storage-dir"))
    for (const std::string& d : split_list(*dirs)) o.storage_dirs.emplace_back(d);
  else
    for (const auto& d : machine.machine.drives) o.storage_dirs.emplace_back(d.path);
  app.set_catalog(exec::with_local_node(app.catalog(), machine, static_cast<int>(o.storage_dirs.size())));
  plan::Scenario s = scenario_from_args(app, args);
  const exec::Scale scale = read_run_options(args, taken.steps, o);
  o.in_run_rates = args.flag("in-run-rates");
  // The prediction's rates come from a profile measured apart from the run (issue 40).
  // The CUDA device has no such section yet: it validates at in-run rates.
  if (o.cuda && !o.in_run_rates)
    throw UsageError("--device cuda: validate has no profile of the CUDA device's rates yet; give --in-run-rates");
  if (!o.cuda && profile_path && !machine.cpu_device.empty()) {
    o.profile = &machine.cpu_device;
  } else if (!o.in_run_rates) {
    throw UsageError(fmt::format(
        "validate predicts each step from the CPU device's rates measured apart from the run: {}, then give "
        "--profile P (or --in-run-rates to simulate at rates probed from the run itself, which checks the "
        "mechanisms but cannot disagree by much)",
        profile_path ? fmt::format("{} has no cpu_device section; run `ftplan calibrate --quick --storage-dir DIR "
                                   "--out P` (this version measures it)",
                                   *profile_path)
                     : std::string("run `ftplan calibrate --quick --storage-dir DIR --out P` first")));
  }
  const auto trace = args.value("trace");
  o.trace = trace.has_value();
  o.progress = [](const std::string& line) { fmt::print(stderr, "validate: {}\n", line); };
  runtime::remove_scratch_files_on_signal();
  // One process at a time in a storage or state directory: two would time each other's I/O or
  // share a state file (refused with the holder's pid; calibrate takes the same lock).
  std::vector<std::filesystem::path> dirs(o.storage_dirs.begin(), o.storage_dirs.end());
  if (!o.state_dir.empty()) dirs.push_back(o.state_dir);
  const auto locks = io::lock_directories(dirs, "validate");
  model::ModelSpec model = s.model;
  std::string note;
  if (scale.any()) {
    model = exec::scaled(s.model, scale);
    note = exec::scale_note(s.model, model, scale);
    for (auto& p : s.plans)
      if (scale.seq_len > 0) p.job.seq_len = scale.seq_len;
  }
  if (app.format() == Format::table && !note.empty()) fmt::print("{}\n\n", note);
  std::vector<exec::Validation> results;
  for (const auto& p : s.plans) {
    results.push_back(exec::validate(model, p, o));
    const exec::Validation& v = results.back();
    if (trace && v.ok) {
      const std::string tag = plan::file_tag(p.name);
      io::write_file_atomically(*trace + "." + tag + ".json", v.measured.trace_json);
      io::write_file_atomically(*trace + "." + tag + ".sim.json", v.simulated.trace_json);
    }
    if (app.format() == Format::table) print_table(v);
  }
  print_results(app, s, model, note, results);
  for (const auto& v : results)
    if (!v.ok) return 1;
  return 0;
}

}  // namespace ftplan::cli
