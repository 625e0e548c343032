// What a run reads of and sets on its own process (Linux): pinning a thread to cores, a thread's
// CPU time, the peak resident set, the block-I/O counters. The executor and validate's probes use
// them; the cores this process may use are runtime/measure.hpp's allowed_cpus.
#pragma once

#include <cstdint>
#include <vector>

namespace ftplan::runtime {

// The calling thread's CPU time, ns (POSIX CLOCK_THREAD_CPUTIME_ID).
std::int64_t thread_cpu_ns();
// The process's peak resident set (VmHWM, bytes); -1 unreadable. reset_peak_rss() starts it
// again from the present RSS (clear_refs 5, Linux 4.0+); false where refused.
double peak_rss_bytes();
bool reset_peak_rss();
// The process's block-I/O counters (/proc/self/io read_bytes, write_bytes: what the process
// caused to be read from or sent to the storage layer, O_DIRECT included; proc(5)), counted by the
// kernel apart from anything the executor or the simulator computes.
struct BlockIo {
  bool ok = false;
  double read = 0, write = 0;
};
BlockIo block_io();

// Binds the calling thread to `cores`; false when the kernel refuses.
bool pin_to(const std::vector<int>& cores);

}  // namespace ftplan::runtime
