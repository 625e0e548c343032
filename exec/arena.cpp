#include "arena.hpp"

#include <algorithm>

namespace ftplan::exec {

Arena::Arena(std::uint64_t capacity_bytes, std::uint64_t alignment, std::uint64_t limit_bytes)
    : capacity_(capacity_bytes / std::max<std::uint64_t>(1, alignment) * std::max<std::uint64_t>(1, alignment)),
      alignment_(std::max<std::uint64_t>(1, alignment)),
      limit_(limit_bytes > 0 ? limit_bytes : capacity_) {
  if (capacity_ > 0) free_[0] = capacity_;
}

std::int64_t Arena::allocate(std::uint64_t bytes) {
  const std::uint64_t size = std::max(alignment_, rounded(bytes));
  std::lock_guard lock(mutex_);
  if (live_ + static_cast<double>(bytes) > static_cast<double>(limit_)) return -1;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const std::uint64_t offset = it->first, left = it->second - size;
    free_.erase(it);
    if (left > 0) free_[offset + size] = left;
    used_[offset] = {size, bytes};
    live_ += static_cast<double>(bytes);
    peak_ = std::max(peak_, live_);
    return static_cast<std::int64_t>(offset);
  }
  return -1;
}

void Arena::release(std::int64_t offset) {
  std::lock_guard lock(mutex_);
  const auto it = used_.find(static_cast<std::uint64_t>(offset));
  if (it == used_.end()) return;
  std::uint64_t start = it->first, size = it->second.first;
  live_ -= static_cast<double>(it->second.second);
  used_.erase(it);
  // Coalesce with the free neighbours.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

double Arena::live_bytes() const {
  std::lock_guard lock(mutex_);
  return live_;
}

double Arena::peak_bytes() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

}  // namespace ftplan::exec
