#include "io/output_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
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

AtomicFile::AtomicFile(const fs::path& path) : path_(path) {
  fd_ = open_temporary(path_, tmp_);
  // A replaced file keeps its permissions (a new one has 0666 less the umask, from open()).
  struct stat old {};
  if (::stat(path_.c_str(), &old) == 0 && S_ISREG(old.st_mode)) ::fchmod(fd_, old.st_mode & 07777);
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::flush() {
  write_all(fd_, buffer_, path_);
  buffer_.clear();
}

void AtomicFile::append(std::string_view text) {
  if (fd_ < 0)
    throw std::runtime_error(fmt::format("writing {} failed: the file is already committed", path_.string()));
  if (buffer_.size() + text.size() > kBuffer_bytes) {
    flush();
    if (text.size() > kBuffer_bytes) {
      write_all(fd_, text, path_);
      return;
    }
  }
  buffer_.append(text);
}

void AtomicFile::commit() {
  if (fd_ < 0)
    throw std::runtime_error(fmt::format("writing {} failed: the file is already committed", path_.string()));
  flush();
  if (::fsync(fd_) != 0)
    throw std::runtime_error(fmt::format("writing {} failed: {}", path_.string(), errno_text(errno)));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw std::runtime_error(fmt::format("writing {} failed: {}", path_.string(), errno_text(err)));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path_.string(), errno_text(err)));
  }
  // The rename is in the directory: flush it too. A directory that cannot be opened or synced
  // (some network file systems refuse fsync on directories) leaves the file written all the same.
  const int dir = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void write_file_atomically(const fs::path& path, std::string_view text) {
  AtomicFile file(path);
  file.append(text);
  file.commit();
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

OutputLock::OutputLock(const fs::path& path, std::string_view holder) : lock_path_(path.string() + ".lock") {
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0)
      throw std::runtime_error(
          fmt::format("cannot create the lock file {}: {}", lock_path_.string(), errno_text(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      // The holder wrote "PID HOLDER\n" (an older ftplan wrote "PID\n").
      long pid = 0;
      std::string holder_of_lock;
      char buf[128] = {};
      if (err == EWOULDBLOCK) {
        const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
        if (n > 0) {
          char* end = buf;
          pid = std::strtol(buf, &end, 10);
          if (*end == ' ')
            for (++end; *end != 0 && *end != '\n' && holder_of_lock.size() < 32; ++end)
              if (std::isalnum(static_cast<unsigned char>(*end)) || *end == '-') holder_of_lock += *end;
        }
      }
      ::close(fd_);
      fd_ = -1;
      if (err != EWOULDBLOCK)
        throw std::runtime_error(fmt::format("cannot lock {}: {}", lock_path_.string(), errno_text(err)));
      throw OutputLocked(fmt::format("{}: another {} writes this file, pid {} (lock {})", path.string(),
                                     holder_of_lock.empty() ? "process" : "ftplan " + holder_of_lock,
                                     pid > 0 ? std::to_string(pid) : "unknown", lock_path_.string()),
                         pid, holder_of_lock);
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
  const std::string pid = fmt::format("{} {}\n", ::getpid(), holder);
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
