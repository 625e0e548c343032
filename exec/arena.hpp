// A capacity-capped address range handed out first-fit, the way a device allocator or an offload
// engine's pinned pool carves one reservation: the executor's device memory (HBM on a CPU device),
// its host tier and the address space of its NVMe files all use it. Tracks the live bytes the IR
// asked for and their high-water mark (the figure compared with the simulator's pool peak).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

namespace ftplan::exec {

class Arena {
 public:
  // Blocks are `alignment` aligned and rounded up to it (O_DIRECT needs 4096 on every drive).
  // `limit_bytes` (0: the capacity) caps the live bytes asked for, as the simulator's pool does
  // (its allocated view); an address range larger than the limit keeps fragmentation, which
  // the simulator does not model, from failing an allocation that fits.
  explicit Arena(std::uint64_t capacity_bytes, std::uint64_t alignment = 4096, std::uint64_t limit_bytes = 0);
  // Offset of a block of `bytes`, or -1 when it would pass the limit or no free range of the
  // rounded size is left.
  std::int64_t allocate(std::uint64_t bytes);
  void release(std::int64_t offset);
  std::uint64_t capacity_bytes() const { return capacity_; }
  std::uint64_t limit_bytes() const { return limit_; }
  double live_bytes() const;
  double peak_bytes() const;
  // Bytes a block of `bytes` occupies.
  std::uint64_t rounded(std::uint64_t bytes) const { return (bytes + alignment_ - 1) / alignment_ * alignment_; }

 private:
  std::uint64_t capacity_, alignment_, limit_;
  std::map<std::uint64_t, std::uint64_t> free_;                            // offset -> size
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> used_;  // offset -> (size, asked bytes)
  double live_ = 0, peak_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace ftplan::exec
