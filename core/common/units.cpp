#include "common/units.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "common/strings.hpp"

namespace ftplan {
namespace {

struct Unit {
  std::string_view name;
  double factor;  // multiply the number by this to get base units
};

constexpr double kKi = 1024.0;
constexpr double kHour = 3600.0;
constexpr double kYear = 365.0 * 24 * kHour;

const std::vector<Unit>& units_of(Quantity kind) {
  static const std::vector<Unit> bytes = {{"B", 1},
                                          {"KB", 1e3},
                                          {"kB", 1e3},
                                          {"MB", 1e6},
                                          {"GB", 1e9},
                                          {"TB", 1e12},
                                          {"PB", 1e15},
                                          {"KiB", kKi},
                                          {"MiB", kKi * kKi},
                                          {"GiB", kKi * kKi * kKi},
                                          {"TiB", kKi * kKi * kKi * kKi},
                                          {"PiB", kKi * kKi * kKi * kKi * kKi}};
  static const std::vector<Unit> bandwidth = {{"B/s", 1},
                                              {"KB/s", 1e3},
                                              {"kB/s", 1e3},
                                              {"MB/s", 1e6},
                                              {"GB/s", 1e9},
                                              {"TB/s", 1e12},
                                              {"KiB/s", kKi},
                                              {"MiB/s", kKi * kKi},
                                              {"GiB/s", kKi * kKi * kKi},
                                              {"TiB/s", kKi * kKi * kKi * kKi},
                                              {"b/s", 1.0 / 8},
                                              {"Kb/s", 1e3 / 8},
                                              {"kb/s", 1e3 / 8},
                                              {"Mb/s", 1e6 / 8},
                                              {"Gb/s", 1e9 / 8},
                                              {"Tb/s", 1e12 / 8},
                                              {"Mbps", 1e6 / 8},
                                              {"Gbps", 1e9 / 8},
                                              {"Tbps", 1e12 / 8},
                                              {"Gbit/s", 1e9 / 8}};
  static const std::vector<Unit> power = {{"W", 1}, {"mW", 1e-3}, {"kW", 1e3}, {"MW", 1e6}};
  static const std::vector<Unit> flops = {{"FLOPS", 1},     {"FLOP/s", 1},     {"GFLOPS", 1e9},  {"GFLOP/s", 1e9},
                                          {"TFLOPS", 1e12}, {"TFLOP/s", 1e12}, {"PFLOPS", 1e15}, {"PFLOP/s", 1e15},
                                          {"OPS", 1},       {"GOPS", 1e9},     {"TOPS", 1e12},   {"POPS", 1e15}};
  static const std::vector<Unit> money = {{"USD", 1}};
  static const std::vector<Unit> money_per_hour = {{"/h", 1},     {"/hr", 1},         {"/hour", 1}, {"/min", 60},
                                                   {"/s", kHour}, {"/day", 1.0 / 24}, {"USD/h", 1}};
  static const std::vector<Unit> duration = {
      {"ns", 1e-9}, {"us", 1e-6},     {"µs", 1e-6},      {"ms", 1e-3},         {"s", 1},         {"min", 60},
      {"h", kHour}, {"hours", kHour}, {"d", 24 * kHour}, {"days", 24 * kHour}, {"years", kYear}, {"y", kYear}};
  static const std::vector<Unit> frequency = {{"Hz", 1}, {"kHz", 1e3}, {"MHz", 1e6}, {"GHz", 1e9}};
  static const std::vector<Unit> transfer_rate = {{"MT/s", 1e6}, {"GT/s", 1e9}};
  static const std::vector<Unit> energy = {{"J", 1},      {"kJ", 1e3},          {"MJ", 1e6},         {"GJ", 1e9},
                                           {"Wh", kHour}, {"kWh", 1e3 * kHour}, {"MWh", 1e6 * kHour}};
  static const std::vector<Unit> money_per_energy = {{"/kWh", 1}, {"/MWh", 1e-3}, {"USD/kWh", 1}};
  static const std::vector<Unit> count = {{"", 1},    {"K", 1e3}, {"k", 1e3}, {"M", 1e6},
                                          {"B", 1e9}, {"G", 1e9}, {"T", 1e12}};
  switch (kind) {
    case Quantity::bytes: return bytes;
    case Quantity::bandwidth: return bandwidth;
    case Quantity::power: return power;
    case Quantity::flops: return flops;
    case Quantity::money: return money;
    case Quantity::money_per_hour: return money_per_hour;
    case Quantity::duration: return duration;
    case Quantity::frequency: return frequency;
    case Quantity::transfer_rate: return transfer_rate;
    case Quantity::energy: return energy;
    case Quantity::money_per_energy: return money_per_energy;
    case Quantity::count: return count;
  }
  return count;
}

bool is_money_kind(Quantity kind) {
  return kind == Quantity::money || kind == Quantity::money_per_hour || kind == Quantity::money_per_energy;
}

std::vector<std::string> unit_names(Quantity kind) {
  std::vector<std::string> names;
  for (const auto& u : units_of(kind))
    if (!u.name.empty()) names.emplace_back(u.name);
  return names;
}

// " (did you mean ...?)" for a unit that is not one of `kind`'s. A bare prefix ("192G") means a
// unit that starts with it: the two shortest of those, so bytes get "GB or GiB" and bandwidths
// "GB/s or Gb/s" (edit distance alone would offer "B", one deletion away). Otherwise the nearest by
// spelling.
std::string unit_hint(const std::string& unit, Quantity kind) {
  const auto names = unit_names(kind);
  std::vector<std::string> starts;
  for (const bool exact_case : {true, false}) {
    for (const auto& n : names)
      if (n.size() > unit.size() && (exact_case ? n.rfind(unit, 0) == 0 : to_lower(n).rfind(to_lower(unit), 0) == 0))
        starts.push_back(n);
    if (!starts.empty()) break;
  }
  std::stable_sort(starts.begin(), starts.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
  if (starts.size() > 2) starts.resize(2);
  if (starts.size() == 2) return fmt::format(" (did you mean '{}' or '{}'?)", starts[0], starts[1]);
  if (starts.size() == 1) return fmt::format(" (did you mean '{}'?)", starts[0]);
  return did_you_mean(unit, names);
}

}  // namespace

std::string_view describe(Quantity kind) {
  switch (kind) {
    case Quantity::bytes: return "a size like '80 GiB' or '141 GB'";
    case Quantity::bandwidth: return "a bandwidth like '3.35 TB/s' or '400 Gb/s'";
    case Quantity::power: return "a power like '700 W' or '10.2 kW'";
    case Quantity::flops: return "a compute rate like '989.4 TFLOPS'";
    case Quantity::money: return "an amount like '$25,000'";
    case Quantity::money_per_hour: return "an hourly rate like '$2.99/h'";
    case Quantity::duration: return "a duration like '1.3 us', '30 min' or '4 years'";
    case Quantity::frequency: return "a frequency like '2.0 GHz'";
    case Quantity::transfer_rate: return "a transfer rate like '4800 MT/s'";
    case Quantity::energy: return "an energy like '3.27 kWh'";
    case Quantity::money_per_energy: return "a price like '$0.12/kWh'";
    case Quantity::count: return "a number like '1000000', '1e9' or '2B'";
  }
  return "a quantity";
}

double parse_quantity(std::string_view text, Quantity kind) {
  std::string_view s = trim(text);
  const auto fail = [&](const std::string& why) -> UnitError {
    return UnitError(fmt::format("expected {}; got '{}'{}", describe(kind), text, why.empty() ? "" : ": " + why));
  };
  if (s.empty()) throw fail("");

  bool dollar = false;
  if (s.front() == '$') {
    dollar = true;
    s.remove_prefix(1);
  }
  // Number: digits with optional thousands commas, a decimal point and an exponent.
  std::string number;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) number += s[i++];
  bool digits = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      number += c;
      digits = true;
    } else if (c == '.') {
      number += c;
    } else if (c == ',' && digits && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      continue;  // thousands separator
    } else if ((c == 'e' || c == 'E') && digits && i + 1 < s.size() &&
               (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '-' || s[i + 1] == '+')) {
      number += c;
      ++i;
      number += s[i];
    } else {
      break;
    }
  }
  if (!digits) throw fail("no number");
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) throw fail("not a number");

  std::string unit(trim(s.substr(i)));
  if (is_money_kind(kind)) {
    if (!dollar && unit.rfind("USD", 0) != 0) throw fail("amounts of money start with '$' or end with 'USD'");
    if (unit.rfind("USD", 0) == 0 && kind != Quantity::money) unit = unit.substr(3);  // "2.99 USD/h" -> "/h"
    if (kind == Quantity::money && dollar && unit.empty()) return value;
  } else if (dollar) {
    throw fail("'$' belongs only to prices");
  }

  for (const auto& u : units_of(kind))
    if (u.name == unit) return value * u.factor;

  const auto names = unit_names(kind);
  if (unit.empty()) throw fail(fmt::format("a unit is needed (one of {})", join(names, ", ")));
  throw fail(fmt::format("unknown unit '{}'{}; use one of {}", unit, unit_hint(unit, kind), join(names, ", ")));
}

std::string format_bytes(double bytes) {
  constexpr std::array<std::string_view, 6> names = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  std::size_t i = 0;
  double v = bytes;
  while (std::abs(v) >= 1024.0 && i + 1 < names.size()) {
    v /= 1024.0;
    ++i;
  }
  return i == 0 ? fmt::format("{:.0f} B", v) : fmt::format("{:.2f} {}", v, names[i]);
}

std::string format_count(double count) {
  const double a = std::abs(count);
  if (a >= 1e12) return fmt::format("{:.2f}T", count / 1e12);
  if (a >= 1e9) return fmt::format("{:.2f}B", count / 1e9);
  if (a >= 1e6) return fmt::format("{:.1f}M", count / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f}K", count / 1e3);
  return fmt::format("{:.0f}", count);
}

std::string format_bandwidth(double bytes_per_s) {
  const double a = std::abs(bytes_per_s);
  if (a >= 1e12) return fmt::format("{:.2f} TB/s", bytes_per_s / 1e12);
  if (a >= 1e9) return fmt::format("{:.1f} GB/s", bytes_per_s / 1e9);
  if (a >= 1e6) return fmt::format("{:.1f} MB/s", bytes_per_s / 1e6);
  return fmt::format("{:.0f} B/s", bytes_per_s);
}

std::string format_energy(double kwh) {
  // Two decimals below 10 kWh, so a short job's energy does not read "0 kWh".
  return std::abs(kwh) < 10 ? fmt::format("{:.2f} kWh", kwh) : fmt::format("{:.1f} kWh", kwh);
}

std::string format_money(double usd) {
  if (std::abs(usd) < 100) return fmt::format("${:.2f}", usd);
  // Whole dollars with thousands separators: "$1,200,000" reads at a glance, "$1200000" does not.
  const std::string digits = fmt::format("{:.0f}", std::abs(usd));
  std::string out = usd < 0 ? "-$" : "$";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format_duration(double seconds) {
  const double a = std::abs(seconds);
  if (a >= 2 * 86400) return fmt::format("{:.1f} d", seconds / 86400);
  if (a >= 2 * 3600) return fmt::format("{:.1f} h", seconds / 3600);
  if (a >= 120) return fmt::format("{:.1f} min", seconds / 60);
  if (a >= 1) return fmt::format("{:.2f} s", seconds);
  if (a >= 1e-3) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.1f} us", seconds * 1e6);
}

}  // namespace ftplan
