// Power, energy and dollars of a plan, from its simulated step timeline (DESIGN.md "Power",
// "Dollars"). Peak power and energy are different numbers and both are reported: a tiered plan
// usually lowers the peak while its longer run can use as much energy or more.
#pragma once

#include <string>
#include <vector>

#include "plan/cost_spec.hpp"
#include "plan/plan.hpp"
#include "sim/timeline.hpp"

namespace ftplan::cost {

using sim::Activity;
using sim::Interval;
using sim::Timeline;

using plan::CostSpec;

struct PowerReport {
  double peak_power_w = 0;        // highest 1-second average over the cluster, at the wall (IT power)
  double average_power_w = 0;
  double idle_power_w = 0;        // the cluster doing nothing
  double max_power_w = 0;         // sum of component maxima
  double energy_per_step_j = 0;   // IT energy
  double gpu_idle_s_per_step = 0; // GPU-seconds per step spent waiting (all GPUs)
};

// Power of the plan's cluster over one step built from one rank's timeline (every rank alike).
PowerReport power(const plan::Plan& plan, const Timeline& rank_timeline);

struct CostReport {
  double job_time_s = 0;
  double energy_kwh = 0;         // facility energy (IT x PUE) for the job
  double hardware_usd = 0;       // rent, or amortised capex
  double energy_usd = 0;         // owned only (rent includes it)
  double wear_usd = 0;           // flash endurance consumed x drive price
  double cost_usd = 0;
  double usd_per_million_tokens = 0;
  double nvme_written_bytes = 0; // per job, whole cluster
  double wear_fraction = 0;      // share of the drives' rated endurance this job uses
  double drive_lifetime_years = 0;  // if this plan ran continuously
};

CostReport dollars(const plan::Plan& plan, const CostSpec& spec, const PowerReport& power, double steps,
                   double step_s, double tokens_per_step, double nvme_written_per_step_bytes);

// Capital cost of the cluster (node purchase price, else the sum of its parts), and its rent per hour.
double capex_usd(const plan::Plan& plan);
double rent_usd_per_hour(const plan::Plan& plan, const CostSpec& spec);

}  // namespace ftplan::cost
