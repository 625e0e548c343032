// What the executor reads of and sets on its own process (Linux): the cores it may run on and
// pinning to them, a thread's CPU time, the peak resident set, the block-I/O counters. (Split
// from executor.cpp; validate's probes and rates pin the same way.)
#pragma once

#include <cstdint>
#include <vector>

#include "device.hpp"

namespace ftplan::exec {

// The cores this process may run on (sched_getaffinity), in order.
std::vector<int> allowed_cores();
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

// Where Options::pin_compute puts the workers on `device`: the compute worker on the first core
// the calling thread may use, every other worker on the rest. Both empty (no pinning) when the
// device does not compute on the host's cores, `pin_compute` is off or fewer than two cores are
// allowed. validate's rate probes run where the workers run (a thread pinned to one core of a
// loaded machine gets another share of it than one the kernel may move: docs/validation.md).
struct CorePlan {
  std::vector<int> compute, others;
};
CorePlan core_plan(const Device& device, bool pin_compute);
// Binds the calling thread to `cores`; false when the kernel refuses.
bool pin_to(const std::vector<int>& cores);

}  // namespace ftplan::exec
