// Quantities written the way people write them ("80 GiB", "3.35 TB/s", "700 W", "$2.99/h")
// are parsed here and nowhere else. Values come back in base units:
//   bytes, bytes/s, watts, FLOP/s, USD, USD/hour, seconds, hertz, transfers/s, joules, USD/kWh, count.
// GB means 10^9 bytes and GiB 2^30; Gb/s (bits) is divided by 8. Units are case-sensitive
// because "Gb/s" and "GB/s" differ by 8x; a near miss gets a "did you mean".
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace ftplan {

enum class Quantity {
  bytes,             // "80 GiB", "141 GB", "512 MiB"
  bandwidth,         // "3.35 TB/s", "64 GB/s", "400 Gb/s"
  power,             // "700 W", "10.2 kW"
  flops,             // "989.4 TFLOPS", "1979 TOPS"
  money,             // "$25,000", "1500 USD"
  money_per_hour,    // "$2.99/h", "$98.32/hr"
  duration,          // "1.3 us", "30 min", "5 years"
  frequency,         // "2.0 GHz"
  transfer_rate,     // "4800 MT/s"
  energy,            // "3.27 kWh", "1 MJ"
  money_per_energy,  // "$0.12/kWh"
  count,             // "1e9", "1,000,000", "2B", "500M"
};

// What a quantity of this kind looks like, for messages: "a size like '80 GiB'".
std::string_view describe(Quantity kind);

// Thrown for text that is not a quantity of the asked kind; the message says what was expected.
// A UsageError where it reaches the command line (an option's value); the readers turn it into an
// InputError at the key's file, line and column.
class UnitError : public UsageError {
 public:
  using UsageError::UsageError;
};

// Parses `text` as a quantity of `kind`; returns the value in the base unit of that kind.
double parse_quantity(std::string_view text, Quantity kind);

// Human-readable forms for tables and messages (not for machine output).
std::string format_bytes(double bytes);            // "79.65 GiB", "512.0 MiB"
std::string format_count(double count);            // "8.03B", "124.4M"
std::string format_bandwidth(double bytes_per_s);  // "3.35 TB/s"
std::string format_duration(double seconds);       // "1.25 ms", "3.4 h"
std::string format_money(double usd);              // "$12.34" under $100, else whole dollars: "$1,200,000"
std::string format_energy(double kwh);             // "0.18 kWh" under 10 kWh, else "53.2 kWh"

}  // namespace ftplan
