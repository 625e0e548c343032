// What the calibration's benchmarks and the executor both measure with: summary statistics over
// repeats, a monotonic stopwatch, page-aligned buffers, the CPUs this process may use and a team of
// threads pinned one per CPU.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace ftplan::runtime {

// Median of `samples` (mean of the middle two for an even count); 0 for none.
double median(std::vector<double> samples);
// Relative spread of `samples`: (max - min) / median; 0 for fewer than two samples.
double relative_spread(const std::vector<double>& samples);

// Seconds on the monotonic clock since some fixed point.
double now_s();

// A buffer aligned to `alignment` bytes (4096 by default: the page, and O_DIRECT's requirement).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t bytes, std::size_t alignment = 4096);
  std::byte* data() const { return data_.get(); }
  std::size_t size() const { return bytes_; }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(data_.get());
  }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t bytes_ = 0;
};

// The CPUs this process may run on (sched_getaffinity), ascending.
std::vector<int> allowed_cpus();

// Threads pinned one per given CPU, kept alive between runs so a timed run starts no thread.
class ThreadTeam {
 public:
  explicit ThreadTeam(std::vector<int> cpus);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return static_cast<int>(cpus_.size()); }
  // Runs fn(thread_index) on every thread at once and waits for all. Returns the span from the
  // first thread's start to the last thread's end, in seconds. An exception in fn is rethrown here.
  double run(const std::function<void(int)>& fn);

 private:
  void loop(int index);

  std::vector<int> cpus_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<double> start_s_, end_s_;
  std::exception_ptr error_;
};

// The part [begin, end) of `n` items that thread `index` of `count` works on (equal contiguous
// slices, multiples of `grain` items except the last).
struct Slice {
  std::size_t begin = 0, end = 0;
};
Slice slice_of(std::size_t n, int index, int count, std::size_t grain = 16);

}  // namespace ftplan::runtime
