#include "io/results.hpp"

#include <algorithm>
#include <cmath>

#include "common/strings.hpp"
#include "plan/checks.hpp"
#include "plan/framework.hpp"

namespace ftplan::io {

namespace {
Value bytes(double b) { return static_cast<std::int64_t>(std::llround(b)); }  // bytes are whole numbers
}  // namespace

Row footprint_row(const plan::Plan& plan, const footprint::Footprint& f) {
  Row r;
  r.set("plan", plan.name);
  r.set("feasible", f.fits);
  r.set("infeasible_reason", f.fits ? Value(nullptr) : Value(f.infeasible_reason));
  r.set("gpu_count", static_cast<std::int64_t>(plan.cluster.gpus()));
  r.set("gpu", plan.cluster.gpu.name);
  // What the plan runs as, the knobs `auto` chose included (issue 39: "show what the stack chose").
  r.set("framework", plan::framework_row(plan.job.framework).name);
  r.set("micro_batch", static_cast<std::int64_t>(plan.job.micro_batch));
  r.set("micro_batch_auto", plan.job.micro_batch_auto);
  r.set("grad_accumulation_steps", static_cast<std::int64_t>(plan::grad_accumulation_steps(plan)));
  r.set("activation_checkpointing", plan::to_string(plan.job.checkpointing));
  r.set("activation_checkpointing_auto", plan.job.checkpointing_auto);
  r.set("gpu_allocated_peak_bytes", bytes(f.gpu_allocated_peak_bytes));
  r.set("gpu_reserved_peak_bytes", bytes(f.gpu_reserved_peak_bytes));
  r.set("gpu_peak_bytes", bytes(f.gpu_peak_bytes()));
  r.set("gpu_capacity_bytes", bytes(f.gpu_capacity_bytes()));
  for (const plan::TierInfo& t : plan::kTiers) {
    if (t.tier == plan::Tier::gpu) continue;  // its three views above
    r.set(t.peak_column, bytes(f.peak(t.tier)));
    r.set(std::string(t.row) + "_capacity_bytes", bytes(f.capacity(t.tier)));
  }
  r.set("peak_phase", footprint::to_string(f.peak_phase));
  r.set("peak_stage", static_cast<std::int64_t>(f.peak_stage));
  for (const plan::TierInfo& t : plan::kTiers)
    for (int c = 0; c < inventory::kCategories; ++c)
      r.set(std::string("memory.") + t.row + "." + inventory::to_string(static_cast<inventory::Category>(c)) + "_bytes",
            bytes(f.bytes(t.tier).bytes[c]));
  return r;
}

namespace {

// A figure that only means something for a plan that runs: null for one that does not fit (a
// step that cannot run has no time, no throughput and no cost).
Value if_runs(bool feasible, Value v) { return feasible ? std::move(v) : Value(nullptr); }

}  // namespace

Row simulation_row(const plan::Plan& plan, const footprint::Footprint& f, const sim::StepResult& s) {
  Row r = footprint_row(plan, f);
  const bool feasible = f.fits && s.ok;
  r.set("feasible", feasible);
  if (!feasible) r.set("infeasible_reason", f.fits ? s.problem : f.infeasible_reason);
  const double steps = evaluate::job_steps(plan, s.tokens_per_step);
  r.set("step_time_s", if_runs(feasible, s.step_time_s));
  r.set("tokens_per_step", s.tokens_per_step);
  r.set("tokens_per_s", if_runs(feasible, s.tokens_per_s));
  r.set("tokens_per_s_per_gpu", if_runs(feasible, s.tokens_per_s_per_gpu));
  r.set("mfu", if_runs(feasible, s.mfu));
  r.set("hfu", if_runs(feasible, s.hfu));
  r.set("model_tflops_per_gpu", if_runs(feasible, s.model_tflops_per_gpu));
  r.set("hardware_tflops_per_gpu", if_runs(feasible, s.hardware_tflops_per_gpu));
  r.set("job_steps", static_cast<std::int64_t>(steps));
  r.set("job_time_s", if_runs(feasible, steps * s.step_time_s));
  r.set("time.compute_s", if_runs(feasible, s.compute_s));
  r.set("time.exposed_comm_s", if_runs(feasible, s.exposed_comm_s));
  r.set("time.idle_s", if_runs(feasible, s.idle_s));
  r.set("simulated_gpu_peak_bytes", bytes(s.gpu_peak_bytes()));
  r.set("simulated_stage", static_cast<std::int64_t>(s.stage));
  r.set("bound_by", if_runs(feasible, s.bound_by));
  r.set("bound_utilization_fraction", if_runs(feasible, s.bound_utilization));
  if (!feasible) return r;
  // Streams and links carry display names ("host dram (share)", "stage 1 comm-reduce"); their
  // columns are plain identifiers (links.host_dram_share.bytes) that every CSV and JSON reader takes.
  for (const auto& st : s.streams) r.set("utilization." + identifier(st.name) + "_fraction", st.utilization);
  for (const auto& l : s.links) {
    const std::string key = "links." + identifier(l.name);
    r.set(key + ".bytes", bytes(l.bytes));
    r.set(key + ".utilization_fraction", l.utilization);
  }
  return r;
}

namespace {

// What the plan's hardware costs to buy, and its bill of materials (cost::bill_of_materials).
// (Its own function: inlined into cost_row, GCC 12 warns of a maybe-uninitialized string inside
// io::Value's variant on the next field, a false positive.)
[[gnu::noinline]] void bom_fields(Row& r, const plan::Plan& plan) {
  const cost::Bom bom = cost::bill_of_materials(plan);
  r.set("capex_usd", if_runs(bom.missing.empty(), bom.capex_usd));
  r.set("bom", cost::bom_text(bom));
}

}  // namespace

Row cost_row(const plan::Plan& plan, const footprint::Footprint& f, const sim::StepResult& s,
             const cost::PowerReport& pw, const cost::CostReport& c) {
  Row r = simulation_row(plan, f, s);
  const bool feasible = f.fits && s.ok;
  r.set("peak_power_w", if_runs(feasible, pw.peak_power_w));
  r.set("average_power_w", if_runs(feasible, pw.average_power_w));
  r.set("idle_power_w", pw.idle_power_w);
  r.set("max_power_w", pw.max_power_w);
  r.set("energy_kwh", if_runs(feasible, c.energy_kwh));
  // A plan the catalog cannot price has no dollar figures (null), and says why.
  const bool priced = feasible && c.priced();
  r.set("cost_usd", if_runs(priced, c.cost_usd));
  r.set("cost_missing_reason", c.priced() ? Value(nullptr) : Value(c.unpriced));
  r.set("cost.hardware_usd", if_runs(priced, c.hardware_usd));
  r.set("cost.energy_usd", if_runs(priced, c.energy_usd));
  r.set("cost.wear_usd", if_runs(priced, c.wear_usd));
  r.set("usd_per_million_tokens", if_runs(priced, c.usd_per_million_tokens));
  bom_fields(r, plan);
  r.set("nvme_written_bytes", if_runs(feasible, bytes(c.nvme_written_bytes)));
  // Wear of drives the plan does not have (or whose endurance is not rated) is no figure, not 0.
  const bool has_drives = std::any_of(plan.cluster.drives.begin(), plan.cluster.drives.end(),
                                      [](const auto& d) { return d.second > 0 && d.first.endurance_bytes > 0; });
  r.set("flash_wear_fraction", if_runs(feasible && has_drives, c.wear_fraction));
  r.set("drive_lifetime_years", if_runs(feasible && c.drive_lifetime_years > 0, c.drive_lifetime_years));
  const double steps = evaluate::job_steps(plan, s.tokens_per_step);
  r.set("idle_gpu_hours", if_runs(feasible, pw.gpu_idle_s_per_step * steps / 3600.0));
  return r;
}

}  // namespace ftplan::io
