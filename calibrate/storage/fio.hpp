// fio (Jens Axboe's flexible I/O tester, the Debian package `fio`) as the reference the storage
// benchmark is checked against: the same files, block size, queue depth and engine
// (--ioengine=io_uring --direct=1), one job per file, reported as a group.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "runtime/uring.hpp"

namespace ftplan::calibrate::storage {

// fio on PATH, or nullopt.
std::optional<std::filesystem::path> find_fio();

// The arguments fio is run with for `pattern` on `files` for `duration_s` (without the program name).
std::vector<std::string> fio_arguments(const std::vector<runtime::ScratchFile*>& files,
                                       const runtime::IoPattern& pattern, double duration_s);

struct FioResult {
  double bandwidth_Bps = 0;
  double iops = 0;
};

// Reads fio's --output-format=json text (anything before the JSON, such as warnings, is skipped).
// Throws SystemError when there is no job result in it.
FioResult parse_fio_json(const std::string& text, hardware::StorageOp op);

// Runs fio and parses its result. Throws SystemError when fio fails.
FioResult run_fio(const std::filesystem::path& fio, const std::vector<runtime::ScratchFile*>& files,
                  const runtime::IoPattern& pattern, double duration_s);

}  // namespace ftplan::calibrate::storage
