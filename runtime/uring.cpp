#include "runtime/uring.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <latch>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "common/error.hpp"
#include "io/output_file.hpp"
#include "runtime/measure.hpp"

namespace ftplan::runtime {

namespace fs = std::filesystem;

namespace {

// Paths of live scratch files, kept in plain char arrays so a signal handler may unlink them.
constexpr int kMaxScratch = 64;
constexpr std::size_t kMaxPath = 4096;
std::array<std::array<char, kMaxPath>, kMaxScratch> g_scratch_paths{};
std::array<std::atomic<bool>, kMaxScratch> g_scratch_live{};
std::mutex g_scratch_mutex;

int register_scratch(const fs::path& path) {
  const std::string s = path.string();
  if (s.size() >= kMaxPath) return -1;
  std::lock_guard lock(g_scratch_mutex);
  for (int i = 0; i < kMaxScratch; ++i) {
    if (g_scratch_live[static_cast<std::size_t>(i)].load()) continue;
    std::memcpy(g_scratch_paths[static_cast<std::size_t>(i)].data(), s.c_str(), s.size() + 1);
    g_scratch_live[static_cast<std::size_t>(i)].store(true);
    return i;
  }
  return -1;
}

void unregister_scratch(int slot) {
  if (slot >= 0) g_scratch_live[static_cast<std::size_t>(slot)].store(false);
}

extern "C" void on_fatal_signal(int sig) {
  for (int i = 0; i < kMaxScratch; ++i)
    if (g_scratch_live[static_cast<std::size_t>(i)].load()) unlink(g_scratch_paths[static_cast<std::size_t>(i)].data());
  io::unlink_live_temporaries();  // an output (the profile, a state file) being written
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

std::atomic<std::uint64_t> g_scratch_counter{0};

std::string errno_text(int err) { return std::strerror(err); }

// Fills `n` bytes with pseudo-random data, so drives that compress or deduplicate see real work.
void fill_random(std::byte* p, std::size_t n, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
}

bool is_write(hardware::StorageOp op) {
  return op == hardware::StorageOp::write || op == hardware::StorageOp::randwrite;
}
bool is_random(hardware::StorageOp op) {
  return op == hardware::StorageOp::randread || op == hardware::StorageOp::randwrite;
}

struct Shared {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bytes{0};
  std::mutex mutex;
  std::string error;
};

struct WorkerResult {
  std::uint64_t bytes = 0, ios = 0;
  double start_s = 0, end_s = 0;
};

// One file, one ring, one thread. Keeps `queue_depth` I/Os in flight until told to stop, the
// deadline passes or `max_bytes` have been submitted.
WorkerResult worker(const ScratchFile& file, const IoPattern& pat, double deadline_s, std::uint64_t max_bytes,
                    std::uint64_t seed, Shared& shared, std::latch& ready) {
  WorkerResult out;
  const std::uint32_t bs = pat.block_bytes;
  const unsigned qd = static_cast<unsigned>(std::max(1, pat.queue_depth));
  const std::uint64_t blocks = file.size() / bs;
  io_uring ring{};
  const int rc = blocks == 0 ? -EINVAL : io_uring_queue_init(qd, &ring, 0);
  AlignedBuffer buffers(static_cast<std::size_t>(bs) * qd);
  if (rc == 0) fill_random(buffers.data(), buffers.size(), seed);
  ready.arrive_and_wait();  // all files start together
  if (rc < 0) {
    std::lock_guard lock(shared.mutex);
    if (shared.error.empty())
      shared.error = blocks == 0 ? "scratch file smaller than one block"
                                 : fmt::format("io_uring is unavailable here: {}", errno_text(-rc));
    return out;
  }
  std::mt19937_64 rng(seed);
  std::uint64_t cursor = 0, submitted = 0;
  unsigned inflight = 0;
  const bool write = is_write(pat.op), random = is_random(pat.op);
  std::string error;
  const auto may_submit = [&] {
    return error.empty() && !shared.stop.load(std::memory_order_relaxed) && (max_bytes == 0 || submitted < max_bytes);
  };
  const auto prep = [&](unsigned slot) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (!sqe) return false;
    std::uint64_t block = 0;
    if (random) {
      block = rng() % blocks;
    } else {
      block = cursor;
      cursor = cursor + 1 == blocks ? 0 : cursor + 1;
    }
    void* buf = buffers.data() + static_cast<std::size_t>(slot) * bs;
    const auto offset = static_cast<off_t>(block * bs);
    if (write)
      io_uring_prep_write(sqe, file.fd(), buf, bs, offset);
    else
      io_uring_prep_read(sqe, file.fd(), buf, bs, offset);
    io_uring_sqe_set_data64(sqe, slot);
    submitted += bs;
    ++inflight;
    return true;
  };
  out.start_s = now_s();
  for (unsigned slot = 0; slot < qd && may_submit(); ++slot) prep(slot);
  io_uring_submit(&ring);
  while (inflight > 0) {
    io_uring_cqe* cqe = nullptr;
    const int w = io_uring_wait_cqe(&ring, &cqe);
    if (w < 0) {
      if (w == -EINTR) continue;
      error = fmt::format("io_uring wait failed: {}", errno_text(-w));
      break;
    }
    const bool past_deadline = now_s() >= deadline_s;
    if (past_deadline) shared.stop.store(true, std::memory_order_relaxed);
    std::array<io_uring_cqe*, 64> batch{};
    const unsigned n = io_uring_peek_batch_cqe(&ring, batch.data(), static_cast<unsigned>(batch.size()));
    for (unsigned i = 0; i < n; ++i) {
      const int res = batch[i]->res;
      const auto slot = static_cast<unsigned>(io_uring_cqe_get_data64(batch[i]));
      io_uring_cqe_seen(&ring, batch[i]);
      --inflight;
      if (res < 0) {
        if (error.empty())
          error = fmt::format("{} failed on {}: {}", write ? "write" : "read", file.path().string(), errno_text(-res));
        continue;
      }
      if (static_cast<std::uint32_t>(res) != bs && error.empty())
        error = fmt::format("short {} on {}: {} of {} bytes", write ? "write" : "read", file.path().string(), res, bs);
      out.bytes += static_cast<std::uint64_t>(res);
      ++out.ios;
      shared.bytes.fetch_add(static_cast<std::uint64_t>(res), std::memory_order_relaxed);
      if (may_submit()) prep(slot);
    }
    io_uring_submit(&ring);
  }
  out.end_s = now_s();
  io_uring_queue_exit(&ring);
  if (!error.empty()) {
    shared.stop.store(true);
    std::lock_guard lock(shared.mutex);
    if (shared.error.empty()) shared.error = error;
  }
  return out;
}

IoResult run(const std::vector<ScratchFile*>& files, const IoPattern& pattern, double duration_s,
             std::uint64_t max_bytes, double window_s, const std::function<bool(double)>* on_window) {
  FTPLAN_ASSERT(!files.empty(), "run_io needs at least one file");
  if (pattern.block_bytes == 0 || pattern.block_bytes % 512 != 0)
    throw UsageError("block size must be a positive multiple of 512");
  Shared shared;
  std::vector<WorkerResult> results(files.size());
  std::latch ready(static_cast<std::ptrdiff_t>(files.size()) + 1);
  std::vector<std::thread> threads;
  const double deadline = on_window ? 1e300 : now_s() + duration_s;
  for (std::size_t i = 0; i < files.size(); ++i)
    threads.emplace_back(
        [&, i] { results[i] = worker(*files[i], pattern, deadline, max_bytes, 0x5eed + i, shared, ready); });
  ready.arrive_and_wait();
  if (on_window) {
    // Poll the shared byte counter once per window until told to stop or every worker has ended.
    std::uint64_t last = 0;
    double t = now_s();
    while (!shared.stop.load()) {
      const double next = t + window_s;
      while (now_s() < next && !shared.stop.load())
        std::this_thread::sleep_for(std::chrono::duration<double>(std::min(0.02, window_s / 20)));
      if (shared.stop.load()) break;
      const double now = now_s();
      const std::uint64_t bytes = shared.bytes.load();
      const double rate = static_cast<double>(bytes - last) / (now - t);
      last = bytes;
      t = now;
      if (max_bytes > 0 && bytes >= max_bytes * files.size()) break;
      if (!(*on_window)(rate)) break;
    }
    shared.stop.store(true);
  }
  for (auto& th : threads) th.join();
  if (!shared.error.empty()) throw SystemError(shared.error);
  IoResult out;
  double start = 1e300, end = 0;
  for (const auto& r : results) {
    out.bytes += r.bytes;
    out.ios += r.ios;
    start = std::min(start, r.start_s);
    end = std::max(end, r.end_s);
  }
  out.elapsed_s = end > start ? end - start : 0;
  return out;
}

}  // namespace

ScratchFile::ScratchFile(const fs::path& dir, std::uint64_t bytes) : dir_(dir), bytes_(bytes) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw SystemError(fmt::format("{}: not a directory", dir.string()));
  struct statvfs vfs {};
  if (statvfs(dir.c_str(), &vfs) == 0) {
    const double free_bytes = static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize);
    const double needed = static_cast<double>(bytes) + static_cast<double>(1ull << 30);
    if (free_bytes < needed)
      throw SystemError(fmt::format("{}: {:.1f} GiB free; the benchmark needs {:.1f} GiB (file + 1 GiB margin)",
                                    dir.string(), free_bytes / (1ull << 30), needed / (1ull << 30)));
  }
  path_ = dir / fmt::format("{}{}-{}.tmp", kScratchPrefix, getpid(), g_scratch_counter++);
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
  if (fd_ < 0 && errno == EINVAL) {
    throw SystemError(
        fmt::format("{}: the file system does not support O_DIRECT (tmpfs?); pick a directory on the drive to measure",
                    dir.string()));
  }
  if (fd_ < 0) throw SystemError(fmt::format("cannot create {}: {}", path_.string(), errno_text(errno)));
  slot_ = register_scratch(path_);
  if (fallocate(fd_, 0, 0, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    if (err != EOPNOTSUPP || ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
      close(fd_);
      unlink(path_.c_str());
      unregister_scratch(slot_);
      throw SystemError(fmt::format("cannot reserve {} bytes for {}: {}", bytes, path_.string(), errno_text(err)));
    }
  }
}

ScratchFile::~ScratchFile() {
  if (fd_ >= 0) close(fd_);
  unlink(path_.c_str());
  unregister_scratch(slot_);
}

void remove_scratch_files_on_signal() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_fatal_signal);
}

int remove_stale_scratch_files(const fs::path& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = kScratchPrefix;
    if (!name.starts_with(prefix) || !name.ends_with(".tmp")) continue;
    const std::size_t dash = name.find('-', prefix.size());
    if (dash == std::string::npos || dash == prefix.size()) continue;
    const std::string digits = name.substr(prefix.size(), dash - prefix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 9)
      continue;
    const auto pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (unlink(entry.path().c_str()) == 0) ++removed;
  }
  return removed;
}

IoResult run_io(const std::vector<ScratchFile*>& files, const IoPattern& pattern, double duration_s,
                std::uint64_t max_bytes) {
  return run(files, pattern, duration_s, max_bytes, 0, nullptr);
}

IoResult run_io_windows(const std::vector<ScratchFile*>& files, const IoPattern& pattern, double window_s,
                        std::uint64_t max_bytes, const std::function<bool(double)>& on_window) {
  return run(files, pattern, 0, max_bytes, window_s, &on_window);
}

std::vector<IoRequest> striped_requests(const std::vector<const ScratchFile*>& files, std::uint64_t stripe_bytes,
                                        std::uint64_t offset, std::byte* buffer, std::uint64_t bytes, bool write,
                                        std::uint32_t block_bytes) {
  std::vector<IoRequest> out;
  std::uint64_t done = 0;
  while (done < bytes) {
    const std::uint64_t at = offset + done;
    const std::uint64_t s = at / stripe_bytes, within = at % stripe_bytes;
    const std::uint64_t n = std::min({bytes - done, stripe_bytes - within, static_cast<std::uint64_t>(block_bytes)});
    const ScratchFile& f = *files[s % files.size()];
    out.push_back(
        {f.fd(), buffer + done, static_cast<std::uint32_t>(n), (s / files.size()) * stripe_bytes + within, write});
    done += n;
  }
  return out;
}

struct DirectIo::Ring {
  io_uring ring{};
};

DirectIo::DirectIo(int queue_depth)
    : ring_(std::make_unique<Ring>()), depth_(static_cast<unsigned>(std::max(1, queue_depth))) {
  const int rc = io_uring_queue_init(depth_, &ring_->ring, 0);
  if (rc < 0) throw SystemError(fmt::format("io_uring is unavailable here: {}", errno_text(-rc)));
}

DirectIo::~DirectIo() { io_uring_queue_exit(&ring_->ring); }

void DirectIo::run(const std::vector<IoRequest>& requests) {
  io_uring& ring = ring_->ring;
  std::size_t next = 0;
  unsigned inflight = 0;
  std::string error;
  const auto submit_more = [&] {
    while (next < requests.size() && inflight < depth_ && error.empty()) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) break;
      const IoRequest& r = requests[next];
      if (r.write)
        io_uring_prep_write(sqe, r.fd, r.buffer, r.bytes, static_cast<off_t>(r.offset));
      else
        io_uring_prep_read(sqe, r.fd, r.buffer, r.bytes, static_cast<off_t>(r.offset));
      io_uring_sqe_set_data64(sqe, next);
      ++next;
      ++inflight;
    }
    io_uring_submit(&ring);
  };
  submit_more();
  while (inflight > 0) {
    io_uring_cqe* cqe = nullptr;
    const int w = io_uring_wait_cqe(&ring, &cqe);
    if (w < 0) {
      if (w == -EINTR) continue;
      throw SystemError(fmt::format("io_uring wait failed: {}", errno_text(-w)));
    }
    const int res = cqe->res;
    const IoRequest& r = requests[io_uring_cqe_get_data64(cqe)];
    io_uring_cqe_seen(&ring, cqe);
    --inflight;
    if (res < 0 && error.empty())
      error = fmt::format("{} failed: {}", r.write ? "write" : "read", errno_text(-res));
    else if (res >= 0 && static_cast<std::uint32_t>(res) != r.bytes && error.empty())
      error = fmt::format("short {}: {} of {} bytes", r.write ? "write" : "read", res, r.bytes);
    submit_more();
  }
  if (!error.empty()) throw SystemError(error);
}

}  // namespace ftplan::runtime
