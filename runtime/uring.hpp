// Direct I/O through io_uring (liburing) on scratch files the calibration creates itself.
// Mirrors what fio's io_uring engine does with --direct=1: no page cache, `queue_depth` blocks in
// flight per file, one thread and one ring per file, completions reaped in batches.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hardware/profile.hpp"

namespace ftplan::runtime {

// A file created by the calibration in a directory it was given: created exclusively (a name no
// other file has), opened with O_DIRECT, preallocated, and removed when destroyed. Its path is also
// registered for removal if the process is interrupted (see remove_scratch_files_on_signal).
class ScratchFile {
 public:
  // Throws SystemError when the directory is missing or not writable, the file system
  // refuses O_DIRECT (tmpfs), or there is not room for `bytes` plus a 1 GiB margin.
  ScratchFile(const std::filesystem::path& dir, std::uint64_t bytes);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& dir() const { return dir_; }
  std::uint64_t size() const { return bytes_; }
  int fd() const { return fd_; }

 private:
  std::filesystem::path dir_, path_;
  std::uint64_t bytes_ = 0;
  int fd_ = -1;
  int slot_ = -1;
};

// On SIGINT, SIGTERM or SIGHUP, unlink every live scratch file, then die of the signal as usual.
void remove_scratch_files_on_signal();

// The name prefix of every scratch file (tests look for leftovers with it).
inline constexpr const char* kScratchPrefix = "ftplan-calibrate-";

// SIGKILL cannot be caught: a killed run leaves its scratch files behind. Removes the scratch
// files in `dir` whose creator (the pid in the name, "PREFIXPID-N.tmp") no longer runs
// (kill(pid, 0) fails with ESRCH); returns how many. Files of live processes, and anything not
// named like a scratch file, are left alone.
int remove_stale_scratch_files(const std::filesystem::path& dir);

struct IoPattern {
  hardware::StorageOp op = hardware::StorageOp::read;
  std::uint32_t block_bytes = 1 << 20;
  int queue_depth = 16;  // per file
};

struct IoResult {
  std::uint64_t bytes = 0;
  std::uint64_t ios = 0;
  double elapsed_s = 0;  // first submission to last completion, over all files
  double bandwidth_Bps() const { return elapsed_s > 0 ? static_cast<double>(bytes) / elapsed_s : 0; }
  double iops() const { return elapsed_s > 0 ? static_cast<double>(ios) / elapsed_s : 0; }
};

// Runs `pattern` on all `files` at once for `duration_s`, or until each file has moved `max_bytes`
// (when > 0) — whichever comes first. Sequential patterns walk each file from offset 0 and wrap at
// its end; random ones pick block-aligned offsets from a fixed-seed generator. Throws
// SystemError on an I/O error or when io_uring is unavailable.
IoResult run_io(const std::vector<ScratchFile*>& files, const IoPattern& pattern, double duration_s,
                std::uint64_t max_bytes = 0);

// Runs `pattern` like run_io but reports the bytes completed in each window of `window_s`: after
// each window `on_window(window_Bps)` is called and the run stops when it returns false, or at
// `max_bytes` per file. Returns what run_io would.
IoResult run_io_windows(const std::vector<ScratchFile*>& files, const IoPattern& pattern, double window_s,
                        std::uint64_t max_bytes, const std::function<bool(double)>& on_window);

// One direct read or write of `bytes` at `offset` of `fd` (an O_DIRECT file: buffer, offset and
// size aligned to the logical block, 4096 covers every drive).
struct IoRequest {
  int fd = -1;
  std::byte* buffer = nullptr;
  std::uint32_t bytes = 0;
  std::uint64_t offset = 0;
  bool write = false;
};

// The requests moving [offset, offset + bytes) of an address space striped round-robin over
// `files` in units of `stripe_bytes` (stripe s lives in files[s % files.size()] at
// (s / files.size()) * stripe_bytes) to or from `buffer`, in pieces of at most `block_bytes` that
// do not cross a stripe: how the executor's NVMe tier lays its tensors over the storage
// directories (exec/), and how validate measures their rate, so both issue the same I/O.
// REQUIRES: !files.empty(), stripe_bytes > 0, block_bytes > 0.
std::vector<IoRequest> striped_requests(const std::vector<const ScratchFile*>& files, std::uint64_t stripe_bytes,
                                        std::uint64_t offset, std::byte* buffer, std::uint64_t bytes, bool write,
                                        std::uint32_t block_bytes);

// A ring of one thread that runs lists of requests with up to `queue_depth` in flight, reaping
// completions as they come (the executor's NVMe streams, exec/; DeepSpeed's aio handle does the
// same with its queue_depth). Throws SystemError when io_uring is unavailable.
class DirectIo {
 public:
  explicit DirectIo(int queue_depth);
  ~DirectIo();
  DirectIo(const DirectIo&) = delete;
  DirectIo& operator=(const DirectIo&) = delete;
  // Runs every request; returns when all have completed. Throws SystemError on an I/O
  // error or a short transfer.
  void run(const std::vector<IoRequest>& requests);

 private:
  struct Ring;
  std::unique_ptr<Ring> ring_;
  unsigned depth_ = 1;
};

}  // namespace ftplan::runtime
