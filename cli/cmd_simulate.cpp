// `ftplan simulate`: one optimizer step simulated per plan; time, throughput, utilization.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "app.hpp"
#include "common/units.hpp"
#include "footprint/footprint.hpp"
#include "inventory/inventory.hpp"
#include "io/output_file.hpp"
#include "io/results.hpp"
#include "plan/checks.hpp"
#include "plan/framework.hpp"
#include "present/layout.hpp"
#include "scenario_source.hpp"
#include "schedule/step_ir.hpp"
#include "sim/simulate.hpp"
#include "table.hpp"

namespace ftplan::cli {
namespace {

// A resource busy this share of the step or more is what the step waits on.
constexpr double kSaturated = 0.9;

// How the data-parallel dimension shards state (the framework's rule, plan::sharding_in_effect).
std::string sharding(const plan::Plan& p) {
  return plan::sharding_in_effect(p).label +
         (p.parallel.zero == 3 && p.parallel.dp > 1 &&
                  plan::framework_row(p.job.framework).sharding == plan::Sharding::deepspeed &&
                  p.job.zero3_fetch == plan::Zero3Fetch::per_parameter
              ? " (per-parameter fetch)"
              : "");
}

// With a trace: which streams of the traced rank the step's critical path (des::critical_path: what
// its end waited for, back to its start) runs on, as shares of the step; the GUI's timeline bands
// the same spans. The rest is on other stages' ranks (a pipeline) or on no stream.
void print_critical_path(const plan::Plan& p, const sim::StepResult& s) {
  if (s.tracks.streams.empty() || s.step_time_s <= 0) return;
  std::vector<std::pair<double, std::string>> on;
  double total = 0;
  for (const auto& t : s.tracks.streams) {
    const double share = sim::covered_s(t, true) / s.step_time_s;
    total += share;
    if (share >= 0.005) on.emplace_back(share, t.name);
  }
  std::stable_sort(on.begin(), on.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> parts;
  for (const auto& [share, name] : on) parts.push_back(fmt::format("{} {:.0f}%", name, 100 * share));
  const double rest = std::max(0.0, 1 - total);
  fmt::print("critical path (what the step's end waited for){}: {}{}\n",
             p.parallel.pp > 1 ? fmt::format(" on stage {}'s rank", s.tracks.stage) : std::string(),
             fmt::join(parts, ", "),
             rest < 0.005 ? std::string()
                          : fmt::format("; {:.0f}% {}", 100 * rest,
                                        p.parallel.pp > 1 ? "on other stages' ranks or no stream" : "on no stream"));
}

void print_plan(const plan::Plan& p, const model::ModelSpec& model, const footprint::Footprint& f,
                const sim::StepResult& s, double steps, bool one_step_default) {
  fmt::print("== {} — {} x {}, {}, {}, {}, micro-batch {}{} x seq {}, {} accumulation step(s), checkpointing {}{}\n",
             p.name, p.cluster.gpus(), p.cluster.gpu.display_name, plan::framework_row(p.job.framework).display_name,
             present::layout_words(p, model), sharding(p), p.job.micro_batch, p.job.micro_batch_auto ? " (auto)" : "",
             p.job.seq_len, plan::grad_accumulation_steps(p), plan::to_string(p.job.checkpointing),
             p.job.checkpointing_auto ? " (auto)" : "");
  if (!f.fits) fmt::print("does not fit: {}\n", f.infeasible_reason);
  if (!s.ok) fmt::print("simulation: {}\n", s.problem);
  Table t;
  using A = Table::Align;
  t.columns({{"metric", A::left}, {"value", A::right}});
  if (!f.fits || !s.ok) {
    // A step that cannot run has no time: show where the memory went, nothing that uses a time.
    t.row({"GPU memory allocated, peak (simulated / analytic)",
           fmt::format("{} / {}", ftplan::format_bytes(s.gpu_peak_bytes()),
                       ftplan::format_bytes(f.gpu_allocated_peak_bytes))});
    t.row(
        {"GPU memory on the device (judged for fit)", fmt::format("{} of {}", ftplan::format_bytes(f.gpu_peak_bytes()),
                                                                  ftplan::format_bytes(f.gpu_capacity_bytes()))});
    fmt::print("{}\n", t.text());
    return;
  }
  t.row({"step time", ftplan::format_duration(s.step_time_s)});
  t.row({"tokens/s (all GPUs)", fmt::format("{:.0f}", s.tokens_per_s)});
  t.row({"tokens/s per GPU", fmt::format("{:.0f}", s.tokens_per_s_per_gpu)});
  t.row({"MFU / HFU", fmt::format("{:.1f}% / {:.1f}%", 100 * s.mfu, 100 * s.hfu)});
  t.row({"model / hardware TFLOP/s per GPU",
         fmt::format("{:.1f} / {:.1f}", s.model_tflops_per_gpu, s.hardware_tflops_per_gpu)});
  // The GPU not computing is the last two together: what compare's "GPU time not computing" adds up.
  t.row({p.parallel.pp > 1 ? "compute / waiting on comm or copies / idle (bubble)"
                           : "compute / waiting on comm or copies / idle",
         fmt::format("{} / {} / {}", ftplan::format_duration(s.compute_s), ftplan::format_duration(s.exposed_comm_s),
                     ftplan::format_duration(s.idle_s))});
  t.row({"GPU memory allocated, peak (simulated / analytic)",
         fmt::format("{} / {}", ftplan::format_bytes(s.gpu_peak_bytes()),
                     ftplan::format_bytes(f.gpu_allocated_peak_bytes))});
  t.row({"GPU memory on the device (judged for fit)", fmt::format("{} of {}", ftplan::format_bytes(f.gpu_peak_bytes()),
                                                                  ftplan::format_bytes(f.gpu_capacity_bytes()))});
  for (const plan::TierInfo& tier : plan::kTiers)
    if (tier.tier != plan::Tier::gpu && s.peak(tier.tier) > 0)
      t.row({fmt::format("{} peak per rank (simulated)", tier.label), ftplan::format_bytes(s.peak(tier.tier))});
  t.row({"job", one_step_default
                    ? "1 step (no --tokens, --steps or epochs given)"
                    : fmt::format("{:.0f} steps, {}", steps, ftplan::format_duration(steps * s.step_time_s))});
  fmt::print("{}", t.text());
  Table u;
  u.columns({{"resource (stage " + std::to_string(s.stage) + ")", A::left},
             {"busy", A::right},
             {"utilization", A::right},
             {"bytes", A::right}});
  for (const auto& st : s.streams)
    u.row({"stream " + st.name, ftplan::format_duration(st.busy_s), fmt::format("{:.0f}%", 100 * st.utilization), ""});
  for (const auto& l : s.links)
    u.row({"link " + l.name, ftplan::format_duration(l.busy_s), fmt::format("{:.0f}%", 100 * l.utilization),
           ftplan::format_bytes(l.bytes)});
  fmt::print("{}", u.text());
  // "Bound by" only where one resource is busy through nearly all of the step; otherwise the step
  // is the chain of waits between streams, and the busiest resource is named as only that.
  if (!s.bound_by.empty() && s.bound_utilization >= kSaturated)
    fmt::print("the step is bound by {} ({:.0f}% busy)\n", s.bound_by, 100 * s.bound_utilization);
  else if (!s.bound_by.empty())
    fmt::print(
        "no resource is busy through the step (the busiest, {}, {:.0f}%): it waits on the dependencies between "
        "streams, {} of it with the GPU's compute stream idle\n",
        s.bound_by, 100 * s.bound_utilization, ftplan::format_duration(s.step_time_s - s.compute_s));
  print_critical_path(p, s);
  fmt::print("\n");
}

// `path` with the plan's file tag inserted before its extension ("step.json" -> "step.A_plan.json").
std::string tagged_path(const std::string& path, const std::string& name) {
  const std::string tag = plan::file_tag(name);
  const auto dot = path.rfind('.');
  const auto slash = path.rfind('/');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return has_ext ? path.substr(0, dot) + "." + tag + path.substr(dot) : path + "." + tag;
}

}  // namespace

int cmd_simulate(const std::vector<std::string>& argv) {
  auto options = scenario_options();
  options.push_back({"trace", true,
                     "write the simulated step of each plan as Chrome trace JSON (Perfetto); "
                     "with several plans, PLAN is appended to the name"});
  options.push_back({"ir", true,
                     "write the step IR each plan's ranks run (tensors with tier, type and shape; ops "
                     "with their streams, dependencies and the tensors they touch) as JSON, one file per "
                     "pipeline stage; PLAN and stageN are appended to the name as needed"});
  options.push_back(fidelity_option());
  const Args args(argv, 2, options);
  App app(args);
  const plan::Scenario s = scenario_from_args(app, args);
  const bool one_step_default = quick_form_without_amount(args);  // the quick form simulates one step
  std::vector<io::Row> rows;
  const sim::Options base_options = simulation_options(args);  // bad options fail before any output
  print_headline(app, s);
  const auto trace = args.value("trace");
  const auto ir_path = args.value("ir");
  // "-" is standard output: one file's worth (a name per plan or stage would be "-.PLAN").
  if (trace == "-" && s.plans.size() > 1)
    throw UsageError("--trace -: several plans write several traces; give a file name (or --plan NAME)");
  if (ir_path == "-" && (s.plans.size() > 1 || std::any_of(s.plans.begin(), s.plans.end(),
                                                           [](const plan::Plan& p) { return p.parallel.pp > 1; })))
    throw UsageError("--ir -: several plans or pipeline stages write several files; give a file name");
  int status = 0;
  for (const auto& p : s.plans) {
    sim::Options o = base_options;
    o.trace = trace.has_value();
    o.out_of_memory_moment = true;  // "simulation: gpu ran out of memory at ..." for a plan that does not fit
    // A trace shows the whole step: simulate_step simulates every micro-batch for it (the figures
    // printed are then those of that run, within the shortcut's 0.5% of what the other verbs report).
    const auto measured = profile_measured(args, p);
    const evaluate::Evaluation e = evaluate::evaluate_plan(s.model, p, o, measured ? &*measured : nullptr);
    const footprint::Footprint& f = e.memory;
    const sim::StepResult& r = e.step;
    if (trace) {
      const std::string path = s.plans.size() > 1 ? tagged_path(*trace, p.name) : *trace;
      if (r.trace_json.empty()) {
        // Nothing was simulated (the step is refused): no trace to write, and the file keeps
        // what it held. The command fails once every plan is reported.
        fmt::print(stderr, "error: no trace of '{}' written to {}: {}\n", p.name, path, r.problem);
        status = 1;
      } else {
        std::fflush(stdout);  // what was printed comes before a trace written to standard output
        io::write_file_atomically(path, r.trace_json);
        if (app.format() == Format::table)
          fmt::print("trace of '{}' written to {} (every micro-batch simulated for it)\n", p.name, path);
      }
    }
    if (ir_path) {
      const std::string base = s.plans.size() > 1 ? tagged_path(*ir_path, p.name) : *ir_path;
      const int stages = std::max(1, p.parallel.pp);
      for (int stage = 0; stage < stages; ++stage) {
        const auto ir = schedule::build_step(s.model, p, inventory::build_inventory(s.model, p, stage));
        const std::string path = stages > 1 ? tagged_path(base, fmt::format("stage{}", stage)) : base;
        std::fflush(stdout);
        io::write_file_atomically(path, schedule::to_json(ir, p.name));
        if (app.format() == Format::table)
          fmt::print("step IR of '{}'{} written to {} ({} ops, {} tensors)\n", p.name,
                     stages > 1 ? fmt::format(" stage {}", stage) : "", path, ir.ops.size(), ir.tensors.size());
      }
    }
    if (app.format() == Format::table) {
      print_plan(p, s.model, f, r, e.steps, one_step_default);
      continue;
    }
    rows.push_back(io::simulation_row(p, f, r));
  }
  print_rows(app, s, rows);
  return status;
}

}  // namespace ftplan::cli
