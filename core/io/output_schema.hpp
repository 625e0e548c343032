// The version of the JSON documents the CLI prints (`--format json`) and the GUI exports.
#pragma once

namespace ftplan::io {

inline constexpr int kOutputSchemaVersion = 1;

}  // namespace ftplan::io
