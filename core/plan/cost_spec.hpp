// How a scenario pays for its plans (docs/scenario-format.md, section `cost`). Defaults live here.
#pragma once

namespace ftplan::plan {

// How the scenario pays: rented by the hour or second, or owned (capex amortised + energy).
struct CostSpec {
  enum class Mode { rent, own } mode = Mode::rent;
  enum class Billing { per_hour, per_second } billing = Billing::per_second;
  double energy_usd_per_kwh = 0.10;  // US industrial average ~$0.08-0.12/kWh (EIA Electric Power Monthly, 2025)
  double pue = 1.3;              // facility overhead; Uptime Institute 2023 survey average 1.58, new builds ~1.2-1.4
  double lifetime_years = 5;     // server depreciation period (typical 4-6 years)
  double utilization = 0.7;      // share of the lifetime the hardware does paid work
  double rent_usd_per_hour = 0;  // per node; 0 = the catalog's node or GPU rate
};

}  // namespace ftplan::plan
