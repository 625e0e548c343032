// Power, energy and dollars of a plan, from its simulated step timeline (DESIGN.md "Power",
// "Dollars"). Peak power and energy are different numbers and both are reported: a tiered plan
// usually lowers the peak while its longer run can use as much energy or more.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "hardware/profile.hpp"
#include "plan/cost_spec.hpp"
#include "plan/plan.hpp"
#include "sim/timeline.hpp"

namespace ftplan::cost {

using sim::Activity;
using sim::Interval;
using sim::Timeline;

using plan::CostSpec;

struct PowerReport {
  double peak_power_w = 0;  // highest 1-second average over the cluster, at the wall (IT power)
  double average_power_w = 0;
  double idle_power_w = 0;         // the cluster doing nothing
  double max_power_w = 0;          // sum of component maxima
  double energy_per_step_j = 0;    // IT energy
  double gpu_idle_s_per_step = 0;  // GPU-seconds per step spent waiting (all GPUs)
};

inline constexpr std::size_t kActivities = static_cast<std::size_t>(Activity::idle) + 1;

// Board power of one GPU by what it runs, watts, indexed by Activity (idle: a process attached
// and waiting, as between kernels; the bare idle of the report's idle_power_w is the catalog's).
struct GpuPower {
  std::array<double, kActivities> watts{};
  std::string source;  // where the figures come from
  double at(Activity a) const { return watts[static_cast<std::size_t>(a)]; }
};

// The catalog's estimate for `gpu`: idle + share(activity) x (TDP - idle), the shares in cost.cpp.
GpuPower default_gpu_power(const hardware::GpuSpec& gpu);

// From a calibration profile's `power` table (NVML board power per kernel class): each activity
// whose kernel class was measured takes the mean of that class's samples (the least-squares
// constant); GEMMs take the class of `dtype` (gemm_bf16, ...). The others come from a line fitted
// by least squares to every sample of the measured classes against their activity's share:
// watts = intercept + slope x share (a linear power model in load, Fan, Weber and Barroso 2007),
// the catalog's idle and TDP rescaled to what this GPU drew. With fewer than two distinct shares
// measured, the others keep the catalog's estimate.
GpuPower gpu_power_from_profile(const hardware::CalibrationProfile& profile, const hardware::GpuSpec& gpu,
                                hardware::Dtype dtype);

// Power of the plan's cluster over one step built from one rank's timeline (every rank alike).
// GPU draw from `gpu` when given (a calibration profile's, gpu_power_from_profile), else the
// catalog's estimate for the plan's GPU.
PowerReport power(const plan::Plan& plan, const Timeline& rank_timeline, const GpuPower* gpu = nullptr);

struct CostReport {
  double job_time_s = 0;
  double energy_kwh = 0;    // facility energy (IT x PUE) for the job
  double hardware_usd = 0;  // rent, or amortised capex
  double energy_usd = 0;    // owned only (rent includes it)
  double wear_usd = 0;      // flash endurance consumed x drive price
  double cost_usd = 0;
  double usd_per_million_tokens = 0;
  double nvme_written_bytes = 0;    // per job, whole cluster
  double wear_fraction = 0;         // share of the drives' rated endurance this job uses
  double drive_lifetime_years = 0;  // if this plan ran continuously
  // Why the plan has no price: the rate or the part the catalog lacks and the scenario does not
  // give ("no purchase price for DGX-2 or its GPU (Tesla V100 SXM3 32GB)"); "" when it is priced.
  // An unpriced plan's dollars are no figure (null in rows), never $0, and no answer ranks it.
  std::string unpriced;
  bool priced() const { return unpriced.empty(); }
};

CostReport dollars(const plan::Plan& plan, const CostSpec& spec, const PowerReport& power, double steps, double step_s,
                   double tokens_per_step, double nvme_written_per_step_bytes);

// What a plan's hardware costs to buy, line by line, for the whole cluster (its nodes, or its
// share of one): a catalog node with a purchase price is bought whole, as sold, with the DRAM,
// drives and NICs the plan adds (or leaves out) priced on top; any other node is the sum of its
// parts (GPUs, host with the DRAM its price includes, more or less DRAM, drives, NICs). A line
// whose part has no price leaves the total unknown: `missing` says which (capex is then no figure).
struct BomLine {
  std::string item;                // "Workstation with 4x RTX 6000 Ada", "DRAM (GiB)", a drive's name
  double count = 0;                // units for the cluster; negative: fewer than the node as sold
  std::optional<double> unit_usd;  // the catalog's price of one
  double usd() const { return count * unit_usd.value_or(0); }
};
struct Bom {
  std::vector<BomLine> lines;
  // A plan on a slice of one node buys its share of the node (plan::Cluster::node_share): the
  // lines count that share; the words show the node whole and the share.
  double share = 1;
  int share_gpus = 0, node_gpus = 0;
  double capex_usd = 0;  // the lines' sum (when nothing is missing)
  std::string missing;   // "" when every line is priced
};
Bom bill_of_materials(const plan::Plan& plan);
// The BOM in words: "1 x Workstation with 4x RTX 6000 Ada at $35,000; +1536 x GiB of DRAM in the ...
// at $4.69; less 2 x <drive> at $600", a slice as "a 1/4 share (1 of its 4 GPUs) of 1 x ...".
std::string bom_text(const Bom& bom);

// Owning a plan's hardware to run a given number of such jobs a year (issue 41: the crossover
// at which owning each plan is cheaper). `dollars` prices a job at the hardware's full paid use
// (capex over lifetime_years x utilization of its hours); when demand is what keeps it busy, the
// year's bill is as many clusters as the demand needs, each doing paid work `utilization` of the
// year's hours and written off over `lifetime_years` (straight-line depreciation), plus each
// job's energy and flash wear. REQUIRES: job_time_s > 0.
struct OwnedPlan {
  double capex_usd = 0;
  double job_time_s = 0;
  double running_usd_per_job = 0;  // energy + flash wear (CostReport::energy_usd + wear_usd)
  double lifetime_years = 5;       // CostSpec's
  double utilization = 0.7;        // CostSpec's: the share of a year's hours a cluster does paid work
};
// The jobs one cluster does in a year (busy `utilization` of its 8,760 hours), the clusters
// needed and the year's bill at `jobs_per_year`.
double owned_jobs_per_cluster_year(const OwnedPlan& plan);
int owned_clusters(const OwnedPlan& plan, double jobs_per_year);
double owned_usd_per_year(const OwnedPlan& plan, double jobs_per_year);
// Which plan is cheapest to own at each whole number of jobs a year, from 1 to `max_jobs` (the
// bill is a step function of the demand: a cluster is bought whole), as ranges [from, to] in
// order; ties go to the earlier plan.
struct OwnedRange {
  long long from = 0, to = 0;
  std::size_t plan = 0;
};
std::vector<OwnedRange> cheapest_to_own(const std::vector<OwnedPlan>& plans, long long max_jobs);

// Capital cost of the cluster (bill_of_materials' total), and its rent per hour.
double capex_usd(const plan::Plan& plan);
double rent_usd_per_hour(const plan::Plan& plan, const CostSpec& spec);
// Where a rented plan's hourly rate comes from, in words, and what it leaves out: the scenario's
// cost.rent; else the catalog node's own rate (a cloud instance rents as catalogued, so DRAM,
// drives or NICs the plan changes are not in it); else the GPU's on-demand rate x GPUs, which
// rents no host of the plan's own (its DRAM and drives are not in it). "" when owned or unpriced.
std::string rent_basis(const plan::Plan& plan, const CostSpec& spec);

}  // namespace ftplan::cost
