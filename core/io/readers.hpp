// Private to core/io: pieces one reader lends another (an inline model in a scenario is read
// with the zoo's field reader; a scenario's job block, and a plan's, with job_io.cpp's).
#pragma once

#include "io/yaml_reader.hpp"
#include "model/model.hpp"
#include "plan/job.hpp"

namespace ftplan::io::detail {

// Reads the architecture keys of docs/model-format.md from `v` into `m` (not name/schema_version).
void read_model_fields(MapView& v, model::ModelSpec& m);

// Reads a `job:` block (docs/scenario-format.md) into `job`: the keys given replace those of `job`
// (the scenario's, for a plan's own block). `model` resolves LoRA target groups (gated MLPs).
void read_job(MapView& v, plan::Job& job, const model::ModelSpec& model);

}  // namespace ftplan::io::detail
