#include "tiers.hpp"
#include "common/error.hpp"
#include "runtime/measure.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace ftplan::exec {

HostTier::HostTier(std::uint64_t bytes, bool pinned)
    : arena_(bytes), bytes_(std::max<std::uint64_t>(kAlign, arena_.capacity_bytes())) {
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw SystemError(fmt::format("cannot reserve {} bytes of host memory", bytes_));
  base_ = static_cast<std::byte*>(p);
  // O_DIRECT requests land here: in 4 KiB pages a 1 MiB request is 256 segments, past a virtio
  // disk's 254 (queue/max_segments), and the block layer splits it unless the pages happen to
  // be contiguous (docs/validation.md: 1.1-1.8 GB/s against 3.2-5.0 in huge pages). Huge pages
  // make every buffer alike, the probes' as the run's (runtime::AlignedBuffer does the same).
  madvise(base_, bytes_, MADV_HUGEPAGE);  // advice: where THP is off, nothing changes
  // Pinned: locked as each page is first touched (mlock2 MLOCK_ONFAULT, Linux 4.4), so that the
  // tier holds in memory what its arena has used, not the whole reservation: the reservation is
  // the sum of every tensor the IR puts on the host, which at hidden 2048 was 12.3 GiB mlock'd
  // for a 6.1 GiB peak (the process's RSS 16.8 GiB against the simulated 6.9). Pages stay locked
  // once touched: from the second step on the tier is as warm as a framework's pinned pool.
  if (!pinned) {
    note_ = "pageable (the plan does not pin host buffers)";
  } else if (mlock2(base_, bytes_, MLOCK_ONFAULT) == 0) {
    locked_ = true;
    note_ = fmt::format("pinned (up to {:.1f} MiB, locked as first touched)", static_cast<double>(bytes_) / (1 << 20));
  } else if (mlock(base_, bytes_) == 0) {
    locked_ = true;
    note_ = fmt::format("pinned (mlock'd {:.1f} MiB)", static_cast<double>(bytes_) / (1 << 20));
  } else {
    note_ = fmt::format("pageable: the plan pins host buffers but mlock of {:.1f} MiB failed ({}; see ulimit -l)",
                        static_cast<double>(bytes_) / (1 << 20), std::strerror(errno));
  }
}
HostTier::~HostTier() {
  if (locked_) munlock(base_, bytes_);
  munmap(base_, bytes_);
}

}  // namespace ftplan::exec
