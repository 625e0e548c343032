// What one rank's components did over one simulated step: the only part of a simulation that the
// power and cost model reads (cost/ includes this, not the step IR or the simulator).
#pragma once

#include <cstdint>
#include <vector>

namespace ftplan::sim {

// What a component of a rank is doing, for the power model.
enum class Activity { gemm, attention, memory_bound, communication, copy, cpu_compute, nvme_read, nvme_write, idle };

// One busy interval of one rank's component within a step (seconds from the step's start).
struct Interval {
  double start_s = 0, end_s = 0;
  Activity activity = Activity::idle;
  enum class Component { gpu, cpu, nvme, nic } component = Component::gpu;
  // What it ran on (the simulator: its stream). One lane's intervals usually follow one another
  // in time, which lets the power model merge lanes instead of sorting every interval; it checks
  // and sorts where they do not.
  std::uint8_t lane = 0;
};

// The lane of a rank's compute stream (schedule::Stream::compute). The GPU is "not computing"
// while it is idle: one definition for simulate's split and compare's idle GPU-hours (issue 41).
inline constexpr std::uint8_t kComputeLane = 0;

// One rank's step. When the simulator took a shortcut (the steady-state shortcut over identical
// micro-batches, the shortened pipeline over identical stages; sim/simulate.hpp), the step is
// given by a simulated step `intervals`/`step_s` and partial ones that differ from it by some
// repeated work: every additive figure f of the whole step (time, energy, busy time) is
// f(main) + sum of weight x (f(main) - f(partial)), exact wherever the further micro-batches
// (or stages) repeat the same work. No partials: `intervals` cover the whole step.
struct Timeline {
  struct Partial {
    std::vector<Interval> intervals;
    double step_s = 0;
    double weight = 0;
  };
  std::vector<Interval> intervals;
  double step_s = 0;
  std::vector<Partial> partials;

  // The whole step's duration.
  double whole_step_s() const {
    double s = step_s;
    for (const auto& q : partials) s += q.weight * (step_s - q.step_s);
    return s;
  }
};

// f(k1) + repeats x (f(k1) - f(k2)): the steady-state extrapolation of an additive figure.
inline double extrapolate(double at_k1, double at_k2, double repeats) { return at_k1 + repeats * (at_k1 - at_k2); }

}  // namespace ftplan::sim
