// Large per-run arrays (a run of 10^6 tasks allocates ~80 MB) and the page faults of touching
// them for the first time. Where transparent huge pages are in "madvise" mode (as on the
// machine the benchmark was measured on), each 4 KiB page faults separately; on that 2-core VM
// that is ~13 us a page, 0.3 s of a 0.6 s run. Advising 2 MiB pages before the first touch makes
// it ~0.03 s (and spares TLB misses), as graph codes such as KaMinPar do for their big arrays.
// A hint only: elsewhere, or if the kernel says no, nothing changes.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ftplan::des::detail {

// Advises huge pages for the 2 MiB-aligned part of [data, data + bytes) (none if it is smaller).
inline void advise_huge_pages([[maybe_unused]] const void* data, [[maybe_unused]] std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{1} << 21;
  const auto begin = (reinterpret_cast<std::uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#endif
}

// reserve() then advise, so the elements are constructed on huge pages.
template <class Vector>
void reserve_huge(Vector& v, std::size_t n) {
  v.reserve(n);
  advise_huge_pages(v.data(), n * sizeof(typename Vector::value_type));
}

}  // namespace ftplan::des::detail
