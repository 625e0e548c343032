// How a scenario pays for its plans (docs/scenario-format.md, section `cost`). Defaults live here.
#pragma once

#include <span>

#include "common/enum_names.hpp"

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

inline std::span<const EnumName<CostSpec::Mode>> enum_table(CostSpec::Mode) {
  static constexpr EnumName<CostSpec::Mode> t[] = {{CostSpec::Mode::rent, "rent"}, {CostSpec::Mode::own, "own"}};
  return t;
}
inline std::span<const EnumName<CostSpec::Billing>> enum_table(CostSpec::Billing) {
  static constexpr EnumName<CostSpec::Billing> t[] = {{CostSpec::Billing::per_hour, "per-hour"},
                                                      {CostSpec::Billing::per_second, "per-second"}};
  return t;
}

}  // namespace ftplan::plan
