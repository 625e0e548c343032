#include "evaluate/evaluate.hpp"

#include <cmath>
#include <vector>

#include "common/error.hpp"
#include "plan/checks.hpp"

namespace ftplan::evaluate {

double job_steps(const plan::Plan& plan, double tokens_per_step) {
  const plan::Job& j = plan.job;
  if (j.steps > 0) return static_cast<double>(j.steps);
  if (tokens_per_step <= 0) return 0;
  if (j.tokens > 0) return std::ceil(static_cast<double>(j.tokens) / tokens_per_step);
  if (j.epochs > 0) return std::ceil(j.epochs * static_cast<double>(j.dataset_tokens) / tokens_per_step);
  return 0;
}

void choose_open_knobs(const model::ModelSpec& model, plan::Plan& plan) {
  std::vector<plan::Checkpointing> ckpts = {plan.job.checkpointing};
  if (plan.job.checkpointing_auto)
    ckpts = {plan::Checkpointing::none, plan::Checkpointing::selective, plan::Checkpointing::full};
  int best_mb = plan.job.micro_batch_auto ? 1 : plan.job.micro_batch;
  plan::Checkpointing best_ckpt = plan.job.checkpointing_auto ? plan::Checkpointing::full : plan.job.checkpointing;
  double best_s = 0;
  for (const auto ckpt : ckpts) {
    plan::Plan q = plan;
    q.job.checkpointing = ckpt;
    const int largest = plan.job.micro_batch_auto ? footprint::max_micro_batch(model, q, 256) : plan.job.micro_batch;
    for (int mb = plan.job.micro_batch_auto ? 1 : plan.job.micro_batch; mb <= largest; ++mb) {
      if (!plan::splits_global_batch(plan, mb)) continue;
      plan::Plan p = q;
      p.job.micro_batch = mb;
      if (!footprint::footprint(model, p).fits) continue;
      const sim::StepResult r = sim::simulate_step(model, p);
      if (!r.ok || r.step_time_s <= 0) continue;
      // Without a fixed global batch each micro-batch is its own recipe: compare time per sample.
      const double per = plan.job.global_batch > 0 ? r.step_time_s : r.step_time_s / mb;
      if (best_s == 0 || per < best_s) {
        best_s = per;
        best_mb = mb;
        best_ckpt = ckpt;
      }
    }
  }
  plan.job.micro_batch = best_mb;
  plan.job.checkpointing = best_ckpt;
  plan.job.open_knobs_chosen = true;
}

void choose_open_knobs(plan::Scenario& s) {
  for (plan::Plan& p : s.plans)
    if (p.job.micro_batch_auto || p.job.checkpointing_auto) choose_open_knobs(s.model, p);
}

Measured measured_from_profile(const hardware::CalibrationProfile& profile, const plan::Plan& plan) {
  const hardware::Dtype dtype = plan::compute_dtype(plan.job.precision);
  return {sim::efficiency_from_profile(profile, plan.cluster.gpu, dtype),
          cost::gpu_power_from_profile(profile, plan.cluster.gpu, dtype)};
}

Evaluation evaluate_plan(const model::ModelSpec& model, const plan::Plan& plan, const sim::Options& options,
                         const Measured* measured) {
  FTPLAN_ASSERT(!plan.job.knobs_open(), "a plan's open knobs are chosen (choose_open_knobs) before it is evaluated");
  Evaluation e;
  e.memory = footprint::footprint(model, plan);
  // Where the footprint accepts the plan, its row's reason is the simulation's, should memory run
  // out there: the moment it did. Where it refuses it, the footprint's reason is the row's and
  // the step may keep the layer shortcut past capacity (the same simulated peak).
  sim::Options o = options;
  if (!o.out_of_memory_moment) o.out_of_memory_moment = e.memory.fits;
  e.step = sim::simulate_step(model, plan, o, measured ? &measured->efficiency : nullptr);
  e.steps = job_steps(plan, e.step.tokens_per_step);
  // A step that does not run draws no curve: the plan's idle and maximum draw only (every figure
  // of a run is null in its row, "-" in the comparison).
  const sim::Timeline none;
  e.power = cost::power(plan, e.feasible() ? e.step.timeline : none, measured ? &measured->gpu_power : nullptr);
  e.cost = cost::dollars(plan, plan.cost, e.power, e.steps, e.step.step_time_s, e.step.tokens_per_step,
                         e.step.nvme_written_bytes * plan.cluster.gpus());
  return e;
}

bool meets_constraints(const plan::Constraints& k, const plan::Plan& plan, const Evaluation& e) {
  return e.feasible() && (k.deadline_s <= 0 || e.cost.job_time_s <= k.deadline_s) &&
         (k.budget_usd <= 0 || (e.cost.priced() && e.cost.cost_usd <= k.budget_usd)) &&
         (k.peak_power_w <= 0 || e.power.peak_power_w <= k.peak_power_w) &&
         (k.max_gpus <= 0 || plan.cluster.gpus() <= k.max_gpus);
}

}  // namespace ftplan::evaluate
