// The executor's state file (Options::state_file, `validate --state-dir`): what a run stopped
// after step N resumes from. A header of six 64-bit words (magic, the step's fingerprint, steps
// done, trainable parameters, delayed-update gradients kept, FNV-1a 64 of the payload), then the
// payload: per optimizer chunk its master weights, m and v (fp32), then the kept gradients (fp32).
// Host byte order: a state file is read back by the machine that wrote it. Written atomically
// (io::write_file_atomically): a run killed while writing leaves the previous state whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace ftplan::exec {

// FNV-1a 64 of `n` bytes, continuing from `h` (the state's checksum and the step's fingerprint).
std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 14695981039346656037ULL);

struct SavedState {
  int steps_done = 0;
  std::vector<float> payload;  // 3 x params (per chunk: master, m, v), then `kept` gradients
  std::size_t kept = 0;
};

void write_state_file(const std::filesystem::path& path, std::uint64_t fingerprint, int steps_done, std::size_t params,
                      const SavedState& state);
// The state in `path`, or nothing where there is no file. Throws InputError naming the file when it
// is not a state file, is the state of another step (`fingerprint`, `params`) or is damaged.
std::optional<SavedState> read_state_file(const std::filesystem::path& path, std::uint64_t fingerprint,
                                          std::size_t params);

}  // namespace ftplan::exec
