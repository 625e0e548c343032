#include "evaluate/pool.hpp"

#include <algorithm>
#include <thread>
#include <vector>

namespace ftplan::evaluate {

std::size_t workers(int threads, std::size_t count) {
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<std::size_t>(threads > 0 ? static_cast<std::size_t>(threads) : cores, 1,
                                 std::max<std::size_t>(1, count));
}

std::size_t for_each(std::size_t count, int threads, const std::function<void(std::size_t)>& task,
                     const std::function<void(std::size_t, std::exception_ptr)>& failed,
                     const std::atomic<bool>* stop) {
  std::atomic<std::size_t> next{0}, ran{0};
  const auto work = [&] {
    while (!(stop && stop->load(std::memory_order_relaxed))) {
      const std::size_t i = next.fetch_add(1);
      if (i >= count) return;
      ++ran;
      try {
        task(i);
      } catch (...) {
        failed(i, std::current_exception());
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    for (std::size_t t = 1; t < workers(threads, count); ++t) pool.emplace_back(work);
    work();
  }  // joins
  return ran.load();
}

}  // namespace ftplan::evaluate
