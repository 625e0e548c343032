// The published measurements of ../shared/validation/published_public.csv (copied to
// tests/data/validation/) and the one documented function that maps a row to a scenario
// (docs/memory-model.md, "Validation"). No per-row overrides: every rule below applies to
// every row whose columns match it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/scenario.hpp"

namespace ftplan::validation {

struct PublishedRow {
  int line = 0;  // in the CSV file
  std::map<std::string, std::string> col;
  const std::string& at(const std::string& key) const;
};

std::vector<PublishedRow> read_published(const std::string& path);

// What kind of GPU memory a source measured.
enum class MemoryKind { allocated, reserved, device };
const char* to_string(MemoryKind k);

struct Mapped {
  std::optional<plan::Scenario> scenario;  // one plan
  std::vector<std::string> missing;        // what the row leaves unsaid (when no scenario)
};

// Maps a row to a one-plan scenario, or says which configuration it leaves unsaid. `all` is the
// whole table: what a source states once (its software environment) holds for all its rows.
Mapped scenario_for(const PublishedRow& row, const std::vector<PublishedRow>& all);

// The memory kind a row's metric measured, and its value in bytes.
MemoryKind memory_kind(const PublishedRow& row);
double measured_bytes(const PublishedRow& row);

}  // namespace ftplan::validation
