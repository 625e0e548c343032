// The executor's host and NVMe tiers: page-locked host memory in one reservation, and one NVMe
// address space striped over a scratch file per storage directory; and a worker's scratch
// buffers. O_DIRECT wants buffers, offsets and sizes aligned to kAlign. (Split from executor.cpp;
// internal to exec/.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "arena.hpp"
#include "runtime/uring.hpp"

namespace ftplan::exec {

constexpr std::uint64_t kAlign = 4096;  // O_DIRECT: buffers, offsets and sizes
inline std::uint64_t round_up(std::uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
inline std::uint64_t round_down(std::uint64_t x) { return x / kAlign * kAlign; }

// Host memory of the host tier: one reservation (pages come on first touch, so a tensor the step never
// touches costs nothing), page-locked when pinned and allowed.
class HostTier {
 public:
  HostTier(std::uint64_t bytes, bool pinned);
  ~HostTier();
  HostTier(const HostTier&) = delete;
  HostTier& operator=(const HostTier&) = delete;
  std::byte* allocate(std::uint64_t bytes) {
    const std::int64_t at = arena_.allocate(bytes);
    return at < 0 ? nullptr : base_ + at;
  }
  void release(std::byte* p) { arena_.release(p - base_); }
  double peak_bytes() const { return arena_.peak_bytes(); }
  bool locked() const { return locked_; }
  std::byte* base() const { return base_; }
  std::uint64_t bytes() const { return bytes_; }
  const std::string& note() const { return note_; }

 private:
  Arena arena_;
  std::uint64_t bytes_;
  std::byte* base_ = nullptr;
  bool locked_ = false;
  std::string note_;
};

// The NVMe tier: one address space striped round-robin over a scratch file per directory.
class NvmeTier {
 public:
  NvmeTier(std::uint64_t bytes, const std::vector<std::filesystem::path>& dirs, std::uint32_t stripe)
      : arena_(bytes), stripe_(std::max<std::uint32_t>(kAlign, stripe / kAlign * kAlign)) {
    const std::uint64_t stripes = (arena_.capacity_bytes() + stripe_ - 1) / stripe_;
    const std::uint64_t per_file = ((stripes + dirs.size() - 1) / dirs.size() + 1) * stripe_;
    for (const auto& d : dirs) files_.push_back(std::make_unique<runtime::ScratchFile>(d, per_file));
  }
  std::int64_t allocate(std::uint64_t bytes) { return arena_.allocate(bytes); }
  void release(std::int64_t offset) { arena_.release(offset); }
  double peak_bytes() const { return arena_.peak_bytes(); }
  // The requests moving [offset, offset + bytes) of the address space to or from `buffer`, in
  // pieces of at most `block` that do not cross a stripe (runtime::striped_requests).
  std::vector<runtime::IoRequest> requests(std::uint64_t offset, std::byte* buffer, std::uint64_t bytes, bool write,
                                           std::uint32_t block) const {
    std::vector<const runtime::ScratchFile*> files;
    for (const auto& f : files_) files.push_back(f.get());
    return runtime::striped_requests(files, stripe_, offset, buffer, bytes, write, block);
  }

 private:
  Arena arena_;
  std::uint64_t stripe_;
  std::vector<std::unique_ptr<runtime::ScratchFile>> files_;
};

// A stream worker's buffers for the sides of a copy the IR does not name, grown as needed.
struct Scratch {
  std::vector<std::byte, std::allocator<std::byte>> raw;
  std::byte* get(std::uint64_t bytes) {
    const std::uint64_t need = round_up(bytes) + kAlign;
    if (raw.size() < need) raw.assign(need, std::byte{0});
    const auto addr = reinterpret_cast<std::uintptr_t>(raw.data());
    return raw.data() + (round_up(addr) - addr);
  }
};

}  // namespace ftplan::exec
