#include "io/output_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

namespace ftplan::io {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int err) { return std::strerror(err); }

fs::path directory_of(const fs::path& path) {
  const fs::path dir = path.parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

// A name no other writer (thread or process) picks: ".NAME.PID.COUNTER.RANDOM.tmp" beside `path`.
// The leading dot keeps it out of globs such as *.csv.
fs::path temporary_beside(const fs::path& path) {
  static std::atomic<unsigned> counter{0};
  thread_local std::mt19937_64 random{std::random_device{}()};
  return directory_of(path) / fmt::format(".{}.{}.{}.{:08x}.tmp", path.filename().string(), ::getpid(),
                                          counter.fetch_add(1), static_cast<std::uint32_t>(random()));
}

// Opens a fresh temporary file beside `path` (O_EXCL: never someone else's file).
int open_temporary(const fs::path& path, fs::path& tmp) {
  for (int attempt = 0;; ++attempt) {
    tmp = temporary_beside(path);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno == EEXIST && attempt < 100) continue;
    throw std::runtime_error(fmt::format("cannot write {}: cannot create a file in {}: {}", path.string(),
                                         directory_of(path).string(), errno_text(errno)));
  }
}

void write_all(int fd, std::string_view data, const fs::path& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(fmt::format("writing {} failed: {}", path.string(), errno_text(errno)));
    if (n == 0) throw std::runtime_error(fmt::format("writing {} failed: no progress", path.string()));
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

void write_file_atomically(const fs::path& path, std::string_view text) {
  fs::path tmp;
  const int fd = open_temporary(path, tmp);
  try {
    // A replaced file keeps its permissions (a new one has 0666 less the umask, from open()).
    struct stat old {};
    if (::stat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode)) ::fchmod(fd, old.st_mode & 07777);
    write_all(fd, text, path);
    if (::fsync(fd) != 0)
      throw std::runtime_error(fmt::format("writing {} failed: {}", path.string(), errno_text(errno)));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("writing {} failed: {}", path.string(), errno_text(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path.string(), errno_text(err)));
  }
  // The rename is in the directory: flush it too. A directory that cannot be opened or synced
  // (some network file systems refuse fsync on directories) leaves the file written all the same.
  const int dir = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void check_file_writable(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw std::runtime_error(fmt::format("cannot write {}: it is a directory", path.string()));
  fs::path tmp;
  const int fd = open_temporary(path, tmp);
  ::close(fd);
  ::unlink(tmp.c_str());
}

OutputLock::OutputLock(const fs::path& path) : lock_path_(path.string() + ".lock") {
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0)
      throw std::runtime_error(
          fmt::format("cannot create the lock file {}: {}", lock_path_.string(), errno_text(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      long pid = 0;
      char buf[32] = {};
      if (err == EWOULDBLOCK) {
        const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
        if (n > 0) pid = std::strtol(buf, nullptr, 10);
      }
      ::close(fd_);
      fd_ = -1;
      if (err != EWOULDBLOCK)
        throw std::runtime_error(fmt::format("cannot lock {}: {}", lock_path_.string(), errno_text(err)));
      throw OutputLocked(fmt::format("{}: another sweep writes this file, pid {} (lock {})", path.string(),
                                     pid > 0 ? std::to_string(pid) : "unknown", lock_path_.string()),
                         pid);
    }
    // The holder before us may have removed the file between our open and our flock: then we hold a
    // lock on a file nobody else can find. Lock only the file that is still at the path.
    struct stat held {
    }, named{};
    if (::fstat(fd_, &held) == 0 && ::stat(lock_path_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino)
      break;
    ::close(fd_);
    fd_ = -1;
    if (attempt >= 100) throw std::runtime_error(fmt::format("cannot lock {}: it keeps changing", lock_path_.string()));
  }
  const std::string pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int err = errno;
    ::unlink(lock_path_.c_str());
    ::close(fd_);
    throw std::runtime_error(fmt::format("cannot write the lock file {}: {}", lock_path_.string(), errno_text(err)));
  }
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  // Unlink while still holding the lock: a process that opened the old file then sees it is no
  // longer at the path (above) and tries again on a new one.
  ::unlink(lock_path_.c_str());
  ::close(fd_);
}

}  // namespace ftplan::io
