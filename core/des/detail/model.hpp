// The model an Engine holds: everything added, as plain arrays. Shared by the simulation
// (engine.cpp) and the trace writer (trace.cpp); nothing else should include it.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "des/engine.hpp"

namespace ftplan::des {

// What was added. Immutable while run() works, so run() may be called again (each change but
// set_duration drops run_start).
struct Engine::Impl {
  struct Queue {
    std::string name;
    int servers = 1;
  };
  struct Link {
    std::string name;
    double bandwidth_Bps = 0;
    Time latency = 0;
  };
  struct Pool {
    std::string name;
    double capacity_bytes = 0;
    double initial_bytes = 0;
  };
  struct Task {
    TaskKind kind = TaskKind::marker;
    bool marked = false;  // Engine::mark
    std::uint32_t queue = kNone;
    std::uint32_t resource = kNone;  // pool
    std::uint32_t path_begin = 0;    // into `paths`
    std::uint32_t path_size = 0;
    Time time = 0;     // compute: duration; transfer: summed link latency
    double bytes = 0;  // transfer, alloc, free
  };

  std::vector<Queue> queues;
  std::vector<Link> links;
  std::vector<Pool> pools;
  std::vector<Task> tasks;
  std::vector<Label> labels;
  std::vector<std::uint32_t> paths;                           // transfers' links, back to back
  std::vector<std::pair<std::uint32_t, std::uint32_t>> deps;  // (task, before)

  class Simulation;  // one run's state (engine.cpp)

  // What every run starts from, the per-task arrays its constructor derives from the model
  // (engine.cpp RunStart): kept by a run told that another follows (Engine::run's `again`: the
  // SM-sharing probe's, then the step's) while nothing is added, for the next run to copy.
  struct RunStart;
  struct RunStartDeleter {
    void operator()(RunStart* s) const;
  };
  mutable std::unique_ptr<RunStart, RunStartDeleter> run_start;

  // An alloc or a free (engine.cpp): its arguments checked, then added.
  TaskId add_pool_change(TaskKind kind, QueueId q, PoolId pool, double bytes, Label&& label);

  TaskId add(Task t, QueueId q, Label&& label) {
    run_start.reset();
    FTPLAN_ASSERT(q.index == kNone || q.index < queues.size(), "des: no such queue");
    if (tasks.size() >= kNone - 1) throw std::length_error("des: too many tasks");
    const auto id = static_cast<std::uint32_t>(tasks.size());
    t.queue = q.index;
    tasks.push_back(t);
    labels.push_back(std::move(label));
    return TaskId{id};
  }
};

}  // namespace ftplan::des
