// Reading and writing calibration profiles (docs/calibration-profile.md). The reader validates
// everything and reports every problem at once, each with file:line:column and key; the writer
// produces text the reader takes back unchanged (numbers in shortest round-trip form).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "hardware/profile.hpp"

namespace ftplan::io {

hardware::CalibrationProfile load_profile(const std::filesystem::path& path);

// The same from text in memory; `name` stands for the file in messages.
hardware::CalibrationProfile parse_profile(std::string_view text, const std::string& name);

// The profile as YAML text.
std::string profile_to_yaml(const hardware::CalibrationProfile& profile);

}  // namespace ftplan::io
