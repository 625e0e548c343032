// A result row's value as JSON, for core's writers only (io/rows.cpp's JSON, sweep/output.cpp's
// journal): numbers that are not finite are null, as the CSV leaves them empty. Internal to core:
// nlohmann is core's private dependency, so this header is not part of io's public face.
#pragma once

#include <nlohmann/json.hpp>

#include "io/rows.hpp"

namespace ftplan::io {

nlohmann::ordered_json json_value(const Value& v);

}  // namespace ftplan::io
