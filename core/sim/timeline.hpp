// What one rank's components did over one simulated step: the only part of a simulation that the
// power and cost model reads (cost/ includes this, not the step IR or the simulator).
#pragma once

#include <vector>

namespace ftplan::sim {

// What a component of a rank is doing, for the power model.
enum class Activity { gemm, attention, memory_bound, communication, copy, cpu_compute, nvme_read, nvme_write, idle };

// One busy interval of one rank's component within a step (seconds from the step's start).
struct Interval {
  double start_s = 0, end_s = 0;
  Activity activity = Activity::idle;
  enum class Component { gpu, cpu, nvme, nic } component = Component::gpu;
};

// One rank's step. When the steady-state shortcut simulated only some of the step's identical
// micro-batches, the step is given by two simulated steps, of k1 and of k2 < k1 micro-batches
// (`intervals`/`step_s` and `fewer_intervals`/`fewer_step_s`), and `repeats` = (n - k1) / (k1 - k2)
// for the step's n micro-batches: every additive figure f of the whole step (time, energy, busy
// time) is f(k1) + repeats x (f(k1) - f(k2)), exact wherever the further micro-batches repeat the
// same work. repeats = 0: `intervals` cover the whole step.
struct Timeline {
  std::vector<Interval> intervals;
  double step_s = 0;
  std::vector<Interval> fewer_intervals;
  double fewer_step_s = 0;
  double repeats = 0;

  // The whole step's duration.
  double whole_step_s() const { return step_s + repeats * (step_s - fewer_step_s); }
};

// f(k1) + repeats x (f(k1) - f(k2)): the steady-state extrapolation of an additive figure.
inline double extrapolate(double at_k1, double at_k2, double repeats) { return at_k1 + repeats * (at_k1 - at_k2); }

}  // namespace ftplan::sim
