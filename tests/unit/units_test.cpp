#include <doctest/doctest.h>

#include "common/units.hpp"

using ftplan::format_energy;
using ftplan::format_money;
using ftplan::parse_quantity;
using ftplan::Quantity;
using ftplan::UnitError;

TEST_CASE("sizes: GB is 10^9 bytes, GiB is 2^30") {
  CHECK(parse_quantity("80 GiB", Quantity::bytes) == 80.0 * 1024 * 1024 * 1024);
  CHECK(parse_quantity("141 GB", Quantity::bytes) == 141e9);
  CHECK(parse_quantity("512MiB", Quantity::bytes) == 512.0 * 1024 * 1024);
  CHECK(parse_quantity("2 TiB", Quantity::bytes) == 2.0 * (1ull << 40));
}

TEST_CASE("bandwidths: bytes and bits differ by 8") {
  CHECK(parse_quantity("3.35 TB/s", Quantity::bandwidth) == doctest::Approx(3.35e12));
  CHECK(parse_quantity("400 Gb/s", Quantity::bandwidth) == doctest::Approx(50e9));
  CHECK(parse_quantity("25 GB/s", Quantity::bandwidth) == doctest::Approx(25e9));
}

TEST_CASE("power, compute, time, money") {
  CHECK(parse_quantity("700 W", Quantity::power) == 700);
  CHECK(parse_quantity("10.2 kW", Quantity::power) == doctest::Approx(10200));
  CHECK(parse_quantity("989.4 TFLOPS", Quantity::flops) == doctest::Approx(989.4e12));
  CHECK(parse_quantity("1979 TOPS", Quantity::flops) == doctest::Approx(1979e12));
  CHECK(parse_quantity("1.3 us", Quantity::duration) == doctest::Approx(1.3e-6));
  CHECK(parse_quantity("$25,000", Quantity::money) == 25000);
  CHECK(parse_quantity("$2.99/h", Quantity::money_per_hour) == doctest::Approx(2.99));
  CHECK(parse_quantity("$0.05/min", Quantity::money_per_hour) == doctest::Approx(3.0));
  CHECK(parse_quantity("$0.12/kWh", Quantity::money_per_energy) == doctest::Approx(0.12));
  CHECK(parse_quantity("4800 MT/s", Quantity::transfer_rate) == 4.8e9);
  CHECK(parse_quantity("3.27 kWh", Quantity::energy) == doctest::Approx(3.27 * 3.6e6));
}

TEST_CASE("counts take plain numbers, exponents, thousands separators and SI suffixes") {
  CHECK(parse_quantity("1e9", Quantity::count) == 1e9);
  CHECK(parse_quantity("1,000,000", Quantity::count) == 1e6);
  CHECK(parse_quantity("2B", Quantity::count) == 2e9);
  CHECK(parse_quantity("500M", Quantity::count) == 5e8);
}

TEST_CASE("bad quantities say what was expected") {
  CHECK_THROWS_WITH_AS(
      parse_quantity("80", Quantity::bytes),
      "expected a size like '80 GiB' or '141 GB'; got '80': a unit is needed (one of B, KB, kB, MB, GB, "
      "TB, PB, KiB, MiB, GiB, TiB, PiB)",
      UnitError);
  // Case matters (Gb vs GB), so a case slip gets a hint rather than a silent guess.
  const std::string msg = [] {
    try {
      parse_quantity("80 gib", Quantity::bytes);
    } catch (const UnitError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  CHECK(msg.find("unknown unit 'gib' (did you mean 'GiB'?)") != std::string::npos);
  // A bare prefix means a unit that starts with it, for the quantity asked: a size "192G" is GB or
  // GiB (edit distance alone would say "B", one deletion away); a bandwidth "25G" is GB/s or Gb/s.
  const auto message = [](std::string_view text, Quantity kind) {
    try {
      parse_quantity(text, kind);
    } catch (const UnitError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(message("192G", Quantity::bytes).find("unknown unit 'G' (did you mean 'GB' or 'GiB'?)") != std::string::npos);
  CHECK(message("192 g", Quantity::bytes).find("unknown unit 'g' (did you mean 'GB' or 'GiB'?)") != std::string::npos);
  CHECK(message("2 Ti", Quantity::bytes).find("unknown unit 'Ti' (did you mean 'TiB'?)") != std::string::npos);
  CHECK(message("25 G", Quantity::bandwidth).find("unknown unit 'G' (did you mean 'GB/s' or 'Gb/s'?)") !=
        std::string::npos);
  CHECK(message("10 k", Quantity::power).find("unknown unit 'k' (did you mean 'kW'?)") != std::string::npos);
  CHECK_THROWS_AS(parse_quantity("fast", Quantity::bandwidth), UnitError);
  CHECK_THROWS_AS(parse_quantity("2.99/h", Quantity::money_per_hour), UnitError);  // no '$'
  CHECK_THROWS_AS(parse_quantity("$700 W", Quantity::power), UnitError);
  CHECK_THROWS_AS(parse_quantity("", Quantity::power), UnitError);
  CHECK_THROWS_AS(parse_quantity("1e999 W", Quantity::power), UnitError);
}

TEST_CASE("money and energy print one way everywhere") {
  CHECK(format_money(12.345) == "$12.35");
  CHECK(format_money(1200000) == "$1,200,000");
  CHECK(format_money(-36200) == "-$36,200");
  // A short job's energy keeps two decimals (plan's table printed 0.23 kWh as "0 kWh").
  CHECK(format_energy(0.2305) == "0.23 kWh");
  CHECK(format_energy(53.2) == "53.2 kWh");
}

// common/error.hpp: whatever ftplan reports to a person is an ftplan::Error of the kind that says
// whose the problem is; a broken invariant (FTPLAN_ASSERT) is not one of them (the CLI calls it a
// bug to report).
TEST_CASE("errors are one hierarchy; an internal invariant is not an Error") {
  CHECK_THROWS_AS(parse_quantity("eighty", Quantity::bytes), ftplan::UsageError);  // UnitError is one
  CHECK_THROWS_AS(parse_quantity("eighty", Quantity::bytes), ftplan::Error);
  CHECK_THROWS_AS(throw ftplan::InputError({"f.yaml", 3, 1}, "k", "bad"), ftplan::Error);
  CHECK_THROWS_AS(throw ftplan::SystemError("disk full"), ftplan::Error);
  CHECK_THROWS_AS(throw ftplan::UnsupportedError("built without CUDA"), ftplan::Error);
  bool as_error = false, as_logic = false;
  try {
    FTPLAN_ASSERT(1 + 1 == 3, "arithmetic");
  } catch (const ftplan::Error&) {
    as_error = true;
  } catch (const std::logic_error& e) {
    as_logic = std::string(e.what()).find("internal error: arithmetic") != std::string::npos;
  }
  CHECK_FALSE(as_error);
  CHECK(as_logic);
}
