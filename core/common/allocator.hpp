// Keeps the allocator from handing large blocks back to the kernel between simulations.
#pragma once

namespace ftplan {

// A simulation builds and frees a few megabytes of step IR and engine state. glibc serves blocks
// above M_MMAP_THRESHOLD (dynamic, from 128 KiB) with fresh mmaps and trims the heap top above
// M_TRIM_THRESHOLD, so every simulation page-faults its memory in again (a quarter of a sweep's
// time, measured with perf). Raising both keeps freed memory in the process for reuse (mallopt(3)).
// Call once at program start; does nothing on other C libraries.
void keep_freed_memory();

}  // namespace ftplan
