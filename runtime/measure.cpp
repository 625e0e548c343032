#include "runtime/measure.hpp"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include "common/error.hpp"
#include "runtime/process.hpp"

namespace ftplan::runtime {

double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  const std::size_t mid = samples.size() / 2;
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid), samples.end());
  const double upper = samples[mid];
  if (samples.size() % 2 == 1) return upper;
  const double lower = *std::max_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

double relative_spread(const std::vector<double>& samples) {
  if (samples.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
  const double m = median(samples);
  return m > 0 ? (*hi - *lo) / m : 0;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

AlignedBuffer::AlignedBuffer(std::size_t bytes, std::size_t alignment) : bytes_(bytes) {
  // Buffers of 2 MiB and more on huge-page boundaries, advised to huge pages: O_DIRECT requests
  // into 4 KiB pages are split where the device takes fewer segments than a request has pages
  // (a virtio disk: 254 per request, a 1 MiB request in 4 KiB pages is 256), so a probe's rate
  // would depend on how its pages fell (docs/validation.md); the executor's host memory is
  // advised alike.
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  if (bytes >= kHugePage) alignment = std::max(alignment, kHugePage);
  const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  if (!p) throw std::bad_alloc();
  if (bytes >= kHugePage) madvise(p, rounded, MADV_HUGEPAGE);  // advice: where THP is off, nothing changes
  data_.reset(static_cast<std::byte*>(p));
}

void AlignedBuffer::Free::operator()(std::byte* p) const { std::free(p); }

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) {
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned c = 0; c < n; ++c) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

ThreadTeam::ThreadTeam(std::vector<int> cpus) : cpus_(std::move(cpus)) {
  FTPLAN_ASSERT(!cpus_.empty(), "ThreadTeam needs at least one CPU");
  start_s_.resize(cpus_.size());
  end_s_.resize(cpus_.size());
  for (int i = 0; i < size(); ++i) threads_.emplace_back([this, i] { loop(i); });
}

ThreadTeam::~ThreadTeam() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadTeam::loop(int index) {
  // Pin to one CPU so first-touch places each thread's slice on its own NUMA node and the
  // scheduler does not move threads mid-measurement. Failure (a restricted container) only
  // costs placement, not correctness.
  pin_to({cpus_[static_cast<std::size_t>(index)]});
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr error;
    const double start = now_s();
    try {
      (*job)(index);
    } catch (...) {
      error = std::current_exception();
    }
    const double end = now_s();
    {
      std::lock_guard lock(mutex_);
      start_s_[static_cast<std::size_t>(index)] = start;
      end_s_[static_cast<std::size_t>(index)] = end;
      if (error && !error_) error_ = error;
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

double ThreadTeam::run(const std::function<void(int)>& fn) {
  std::unique_lock lock(mutex_);
  job_ = &fn;
  pending_ = size();
  error_ = nullptr;
  ++generation_;
  wake_.notify_all();
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
  return *std::max_element(end_s_.begin(), end_s_.end()) - *std::min_element(start_s_.begin(), start_s_.end());
}

Slice slice_of(std::size_t n, int index, int count, std::size_t grain) {
  const std::size_t chunks = (n + grain - 1) / grain;
  const auto c = static_cast<std::size_t>(count), i = static_cast<std::size_t>(index);
  const std::size_t begin = std::min(n, chunks * i / c * grain);
  const std::size_t end = i + 1 == c ? n : std::min(n, chunks * (i + 1) / c * grain);
  return {begin, end};
}

}  // namespace ftplan::runtime
