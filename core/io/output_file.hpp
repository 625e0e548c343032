// The files ftplan writes (profiles, traces, step IR, sweep results): whole or not at all, and
// one writer at a time. Every writer in cli/ goes through write_file_atomically, so a killed run,
// a full disk or a failed write never leaves a truncated file or loses the previous one.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace ftplan::io {

// Where the output goes: a regular file (or a new one) is replaced as below; "-" is standard
// output; a character or block device, a FIFO or a socket is written through (renaming a file over
// /dev/null would replace the device with a plain file); a symbolic link is followed, the file it
// names replaced and the link kept; a directory is refused. Temporaries are named
// ".NAME.PID.N.RANDOM.tmp" beside the file: those of processes no longer running are removed
// when the next writer of NAME starts, and unlink_live_temporaries() removes this process's.
//
// Replaces `path` with `text`, all or nothing: writes a temporary file in the same directory
// (rename is atomic only within one file system), fsyncs it, renames it over `path`, and fsyncs
// the directory so the rename itself survives a power cut (without the two fsyncs a crash can
// leave an empty or a missing file: Pillai et al., "All File Systems Are Not Created Equal",
// OSDI 2014, section 2). On any failure
// the temporary file is removed, `path` keeps its old content (or stays absent), and a
// SystemError names the file and the reason. A new file gets mode 0666 less the umask;
// a replaced file keeps its mode.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

// The same for a file too large to hold in memory, written piece by piece (a sweep's results):
// append() goes to the temporary file beside `path` (through a buffer of kBuffer_bytes), commit()
// flushes, fsyncs, renames and fsyncs the directory. Until commit() returns, `path` keeps its old
// content (or stays absent); destroyed uncommitted (an exception), the temporary file is removed.
// Failures throw SystemError naming `path`. write_file_atomically is one append + commit.
class AtomicFile {
 public:
  explicit AtomicFile(const std::filesystem::path& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void append(std::string_view text);
  void commit();

  static constexpr std::size_t kBuffer_bytes = 1 << 20;

 private:
  void flush();
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  int slot_ = -1;         // in the registry unlink_live_temporaries reads
  bool through_ = false;  // written straight to a device, FIFO or standard output
  std::string buffer_;
};

// Unlinks every temporary this process is writing now: for a SIGINT/SIGTERM handler, which then
// dies of the signal (async-signal-safe: unlink(2) on paths kept in plain arrays).
void unlink_live_temporaries() noexcept;

// Checks now that write_file_atomically(path, ...) can work later: the directory exists and a
// file can be created in it. For commands that measure or compute for minutes before writing.
void check_file_writable(const std::filesystem::path& path);

// Another process holds the lock; `pid` and `holder` are what it wrote into the lock file (0 and
// "" when unknown: a lock file of an older ftplan, or of another program).
class OutputLocked : public SystemError {
 public:
  OutputLocked(const std::string& message, long pid, std::string holder)
      : SystemError(message), pid_(pid), holder_(std::move(holder)) {}
  long pid() const { return pid_; }
  const std::string& holder() const { return holder_; }

 private:
  long pid_;
  std::string holder_;
};

// An exclusive lock on the output `path`, held from construction to destruction: flock(2) on
// `path` + ".lock", which holds the owner's pid and `holder` (what it is: "sweep", "sweep-merge"),
// as "PID HOLDER\n". flock locks belong to the open file, so the kernel drops them when the process
// dies, however it dies: a stale lock file is harmless and simply taken over. The destructor
// removes the lock file. Throws OutputLocked, whose message names the holder and its pid, when
// another process holds it; SystemError when the lock file cannot be created.
class OutputLock {
 public:
  OutputLock(const std::filesystem::path& path, std::string_view holder);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  const std::filesystem::path& lock_path() const { return lock_path_; }

 private:
  std::filesystem::path lock_path_;
  int fd_ = -1;
};

// The lock every ftplan process that writes scratch or state files into a directory takes
// (calibrate's and validate's storage directories, validate's --state-dir): two of them at once
// would time each other's I/O or share one state file. One lock per directory of `dirs`, however it
// is named (a directory given twice, or also as the state directory, would lock out its own
// process); none where no lock file can be created (a read-only or full directory, which its
// writer reports). Throws OutputLocked naming the directory, `holder`'s kind and the pid.
std::vector<std::unique_ptr<OutputLock>> lock_directories(const std::vector<std::filesystem::path>& dirs,
                                                          std::string_view holder);
// Whether a process holds the output lock of `path` now (OutputLock's), without taking or creating
// it: its pid and what it is, as OutputLocked reports them; nullopt when nobody holds it.
std::optional<std::pair<long, std::string>> output_lock_holder(const std::filesystem::path& path);

}  // namespace ftplan::io
