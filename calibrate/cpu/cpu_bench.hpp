// CPU and DRAM measurements: STREAM copy/triad bandwidth on a team of pinned threads, an AdamW
// step over fp32 state, and memcpy into page-locked (pinned) host buffers.
#pragma once

#include <cstddef>
#include <vector>

#include "hardware/profile.hpp"
#include "runtime/measure.hpp"

namespace ftplan::calibrate::cpu {

// STREAM copy and triad over three fp64 arrays of `array_bytes` each, first touched by the thread
// that later reads them (so on a NUMA machine each node serves its own threads). One untimed pass
// warms up; then `repeats` timed passes. Returns a copy row and a triad row.
std::vector<hardware::DramSample> measure_dram(runtime::ThreadTeam& team, std::size_t array_bytes, int repeats);

// AdamW steps over `params` fp32 parameters (p, g, m, v: 16 bytes each parameter), each thread its
// own slice. `triad_Bps` is the triad bandwidth at the same thread count: the row's triad_fraction is
// params/s over (triad_Bps / 28 B).
hardware::OptimizerSample measure_adamw(runtime::ThreadTeam& team, std::size_t params, int repeats, double triad_Bps);

// memcpy of each size from an ordinary (pageable) buffer into a page-locked one (mlock), split over
// the team, and the same into a pageable one for contrast. Rows: direction h2h, pinned true/false.
// When the system refuses to lock memory (RLIMIT_MEMLOCK), only the pageable rows come back.
std::vector<hardware::CopySample> measure_host_copy(runtime::ThreadTeam& team, const std::vector<std::size_t>& sizes,
                                                    int repeats);

// AdamW bytes of DRAM traffic per parameter (see kernels.hpp).
inline constexpr double kAdamWBytesPerParam = 28;

}  // namespace ftplan::calibrate::cpu
