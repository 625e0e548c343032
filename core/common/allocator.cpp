#include "common/allocator.hpp"

#include <cstdlib>  // defines __GLIBC__ on glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ftplan {

void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // blocks up to 32 MiB (glibc's maximum) from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // keep up to 1 GiB of free heap top
#endif
}

}  // namespace ftplan
