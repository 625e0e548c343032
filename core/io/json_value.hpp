// A result row's value as JSON, for core's writers only (io/rows.cpp's JSON, sweep/output.cpp's
// journal): numbers that are not finite are null, as the CSV leaves them empty. Internal to core:
// nlohmann is core's private dependency, so this header is not part of io's public face.
#pragma once

#include <cmath>
#include <variant>

#include <nlohmann/json.hpp>

#include "io/rows.hpp"

namespace ftplan::io {

// Whether JSON holds `v` as null: null itself, or a number that is not finite (JSON has none).
// The one statement of that rule: json_value, the journal's text writer and the rows a sweep keeps
// in memory (sweep/output.cpp) all follow it.
inline bool json_null(const Value& v) {
  if (const double* d = std::get_if<double>(&v)) return !std::isfinite(*d);
  return std::holds_alternative<std::nullptr_t>(v);
}

nlohmann::ordered_json json_value(const Value& v);

}  // namespace ftplan::io
