#include "io/output_file.hpp"
#include "common/error.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>
#include <tuple>

#include <algorithm>

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
    throw SystemError(fmt::format("cannot write {}: cannot create a file in {}: {}", path.string(),
                                  directory_of(path).string(), errno_text(errno)));
  }
}

// The temporaries being written now, in plain char arrays so that a signal handler may unlink
// them (unlink_live_temporaries).
constexpr std::size_t kMaxLive = 64, kMaxPath = 4096;
std::array<std::array<char, kMaxPath>, kMaxLive> g_live_paths{};
std::array<std::atomic<bool>, kMaxLive> g_live{};
static_assert(std::atomic<bool>::is_always_lock_free);  // read by a signal handler
std::mutex g_live_mutex;

int register_live(const fs::path& tmp) {
  const std::string s = tmp.string();
  if (s.size() >= kMaxPath) return -1;
  std::lock_guard lock(g_live_mutex);
  for (std::size_t i = 0; i < kMaxLive; ++i) {
    if (g_live[i].load()) continue;
    std::memcpy(g_live_paths[i].data(), s.c_str(), s.size() + 1);
    g_live[i].store(true);
    return static_cast<int>(i);
  }
  return -1;
}

void unregister_live(int slot) {
  if (slot >= 0) g_live[static_cast<std::size_t>(slot)].store(false);
}

// Removes the temporaries of `path` that processes no longer alive left (killed by SIGKILL, or
// before this cleanup existed): ".NAME.PID.*.tmp" whose PID does not run.
void remove_stale_temporaries(const fs::path& path) {
  const std::string prefix = "." + path.filename().string() + ".";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory_of(path), ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || !name.ends_with(".tmp")) continue;
    // Exactly "PID.COUNTER.XXXXXXXX" between the prefix and ".tmp" (temporary_beside's shape): the
    // temporaries of "NAME.123" start with this prefix too and are not NAME's.
    const std::string rest = name.substr(prefix.size(), name.size() - prefix.size() - 4);
    const auto digits = [](std::string_view t) {
      return !t.empty() && t.size() <= 9 &&
             std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    const std::size_t a = rest.find('.'), b = a == std::string::npos ? a : rest.find('.', a + 1);
    if (b == std::string::npos || !digits(rest.substr(0, a)) || !digits(rest.substr(a + 1, b - a - 1)) ||
        rest.size() - b - 1 != 8 ||
        !std::all_of(rest.begin() + static_cast<std::ptrdiff_t>(b + 1), rest.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(rest.substr(0, a)));
    if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) ::unlink(entry.path().c_str());
  }
}

// Where an output path leads: symbolic links followed (the file a link names is replaced and the
// link stays), at most 40 of them as the kernel allows (ELOOP).
fs::path follow_links(const fs::path& path) {
  fs::path at = path;
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return at;
    if (hops >= 40) throw SystemError(fmt::format("cannot write {}: too many symbolic links", path.string()));
    std::error_code ec;
    fs::path target = fs::read_symlink(at, ec);
    if (ec) throw SystemError(fmt::format("cannot write {}: {}", path.string(), ec.message()));
    at = target.is_absolute() ? target : at.parent_path() / target;
  }
}

// Files the system owns a meaning for are written through, never replaced: renaming a file over
// /dev/null or a FIFO would replace the device or the pipe with a plain file.
bool written_through(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  return S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
}

void refuse_directory(const fs::path& shown, const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw SystemError(fmt::format("cannot write {}: it is a directory", shown.string()));
}

// What a lock file holds: "PID HOLDER\n" (an older ftplan wrote "PID\n").
std::pair<long, std::string> read_holder(int fd) {
  long pid = 0;
  std::string holder;
  char buf[128] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n > 0) {
    char* end = buf;
    pid = std::strtol(buf, &end, 10);
    if (*end == ' ')
      for (++end; *end != 0 && *end != '\n' && holder.size() < 32; ++end)
        if (std::isalnum(static_cast<unsigned char>(*end)) || *end == '-') holder += *end;
  }
  return {pid, holder};
}

void write_all(int fd, std::string_view data, const fs::path& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError(fmt::format("writing {} failed: {}", path.string(), errno_text(errno)));
    if (n == 0) throw SystemError(fmt::format("writing {} failed: no progress", path.string()));
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

AtomicFile::AtomicFile(const fs::path& path) : path_(path) {
  if (path_ == "-") {  // standard output
    through_ = true;
    fd_ = ::dup(STDOUT_FILENO);
    if (fd_ < 0) throw SystemError(fmt::format("cannot write to standard output: {}", errno_text(errno)));
    return;
  }
  const fs::path target = follow_links(path_);
  refuse_directory(path_, target);
  if (written_through(target)) {
    through_ = true;
    fd_ = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw SystemError(fmt::format("cannot write {}: {}", path_.string(), errno_text(errno)));
    return;
  }
  path_ = target;
  remove_stale_temporaries(path_);
  fd_ = open_temporary(path_, tmp_);
  slot_ = register_live(tmp_);
  // A replaced file keeps its permissions (a new one has 0666 less the umask, from open()).
  struct stat old {};
  if (::stat(path_.c_str(), &old) == 0 && S_ISREG(old.st_mode)) ::fchmod(fd_, old.st_mode & 07777);
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  if (through_) return;
  ::unlink(tmp_.c_str());
  unregister_live(slot_);
}

void AtomicFile::flush() {
  write_all(fd_, buffer_, path_);
  buffer_.clear();
}

void AtomicFile::append(std::string_view text) {
  if (fd_ < 0) throw SystemError(fmt::format("writing {} failed: the file is already committed", path_.string()));
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
  if (fd_ < 0) throw SystemError(fmt::format("writing {} failed: the file is already committed", path_.string()));
  flush();
  if (through_) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw SystemError(fmt::format("writing {} failed: {}", path_.string(), errno_text(errno)));
    return;
  }
  if (::fsync(fd_) != 0) throw SystemError(fmt::format("writing {} failed: {}", path_.string(), errno_text(errno)));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    unregister_live(slot_);
    throw SystemError(fmt::format("writing {} failed: {}", path_.string(), errno_text(err)));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    unregister_live(slot_);
    throw SystemError(fmt::format("cannot write {}: {}", path_.string(), errno_text(err)));
  }
  unregister_live(slot_);  // after the rename: a signal before it still finds the temporary
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
  if (path == "-") return;
  const fs::path target = follow_links(path);
  refuse_directory(path, target);
  if (written_through(target)) {
    // Not opened: opening and closing a FIFO would end its reader's input (EOF) before the write.
    struct stat st {};
    if (::stat(target.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
      throw SystemError(fmt::format("cannot write {}: it is a socket", path.string()));
    if (::access(target.c_str(), W_OK) != 0)
      throw SystemError(fmt::format("cannot write {}: {}", path.string(), errno_text(errno)));
    return;
  }
  fs::path tmp;
  const int fd = open_temporary(target, tmp);
  ::close(fd);
  ::unlink(tmp.c_str());
}

void unlink_live_temporaries() noexcept {
  for (std::size_t i = 0; i < kMaxLive; ++i)
    if (g_live[i].load()) ::unlink(g_live_paths[i].data());
}

OutputLock::OutputLock(const fs::path& path, std::string_view holder) : lock_path_(path.string() + ".lock") {
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0)
      throw SystemError(fmt::format("cannot create the lock file {}: {}", lock_path_.string(), errno_text(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      // The holder wrote "PID HOLDER\n" (an older ftplan wrote "PID\n").
      long pid = 0;
      std::string holder_of_lock;
      if (err == EWOULDBLOCK) std::tie(pid, holder_of_lock) = read_holder(fd_);
      ::close(fd_);
      fd_ = -1;
      if (err != EWOULDBLOCK)
        throw SystemError(fmt::format("cannot lock {}: {}", lock_path_.string(), errno_text(err)));
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
    if (attempt >= 100) throw SystemError(fmt::format("cannot lock {}: it keeps changing", lock_path_.string()));
  }
  const std::string pid = fmt::format("{} {}\n", ::getpid(), holder);
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int err = errno;
    ::unlink(lock_path_.c_str());
    ::close(fd_);
    throw SystemError(fmt::format("cannot write the lock file {}: {}", lock_path_.string(), errno_text(err)));
  }
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  // Unlink while still holding the lock: a process that opened the old file then sees it is no
  // longer at the path (above) and tries again on a new one.
  ::unlink(lock_path_.c_str());
  ::close(fd_);
}

namespace {

// A directory's lock (lock_directories), or null where no lock file can be created.
std::unique_ptr<OutputLock> lock_directory(const fs::path& dir, std::string_view holder) {
  try {
    return std::make_unique<OutputLock>(dir / "ftplan-directory", holder);
  } catch (const OutputLocked& e) {
    throw OutputLocked(fmt::format("{}: another {} uses this directory, pid {}", dir.string(),
                                   e.holder().empty() ? "process" : "ftplan " + e.holder(),
                                   e.pid() > 0 ? std::to_string(e.pid()) : "unknown"),
                       e.pid(), e.holder());
  } catch (const SystemError&) {
    // No lock file can be made there (read-only, full): nothing else can write scratch files
    // there either, and the writer's own error says so.
    return nullptr;
  }
}
}  // namespace

std::optional<std::pair<long, std::string>> output_lock_holder(const fs::path& path) {
  const fs::path lock = path.string() + ".lock";
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;  // no lock file: nobody holds it
  std::optional<std::pair<long, std::string>> held;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) held = read_holder(fd);
  ::close(fd);
  return held;
}

std::vector<std::unique_ptr<OutputLock>> lock_directories(const std::vector<fs::path>& dirs, std::string_view holder) {
  std::vector<std::unique_ptr<OutputLock>> locks;
  std::vector<std::pair<dev_t, ino_t>> seen;
  for (const auto& d : dirs) {
    struct stat st {};
    if (::stat(d.c_str(), &st) == 0) {
      const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
      if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
      seen.push_back(id);
    }
    if (auto l = lock_directory(d, holder)) locks.push_back(std::move(l));
  }
  return locks;
}

}  // namespace ftplan::io
