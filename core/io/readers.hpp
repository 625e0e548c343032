// Private to core/io: pieces one reader lends another (an inline model in a scenario is read
// with the zoo's field reader).
#pragma once

#include "io/yaml_reader.hpp"
#include "model/model.hpp"

namespace ftplan::io::detail {

// Reads the architecture keys of docs/model-format.md from `v` into `m` (not name/schema_version).
void read_model_fields(MapView& v, model::ModelSpec& m);

}  // namespace ftplan::io::detail
