// ftplan's discrete-event engine: generic, knows nothing about LLMs or training.
//
// Resources
//   * queues   - serve their tasks one at a time (or `servers` at a time) strictly in the order
//                the tasks were added to that queue, like a CUDA stream or a worker pool;
//   * links    - shared bandwidth: every active flow crossing a link gets a max-min fair share of
//                it over all links on its path (progressive filling, recomputed whenever a flow
//                starts or ends, as SimGrid's LMM does); each link adds its latency once per flow;
//   * pools    - memory with a capacity: allocations add live bytes, frees remove them; the pool
//                keeps its live-bytes time series and high-water mark; exceeding the capacity is
//                recorded as an out-of-memory event (time, pool, live bytes) and the run goes on.
// A bounded set of buffers (swap buffers, a prefetch ring) is dependencies: the task that fills
// a buffer waits for the task that freed it (the step IR states them so: docs/step-ir.md).
// Tasks form a DAG. A task starts when every dependency has finished and, if it is on a queue,
// when it is at the head of that queue's order with a free server. Ties break by insertion order.
// Time is integer nanoseconds, so identical inputs give identical results. No global state: many
// engines can run at once on different threads.
//
// The exact rules (docs/des.md has them with examples):
//   * ready: a task is ready when its last dependency ends (at 0 if it has none).
//   * queue: a task on a queue starts at the first instant when (1) it is ready, (2) every task
//     added to the queue before it has started, and (3) fewer than `servers` of the queue's tasks
//     are running. So tasks start in issue order, at most `servers` at a time; a ready task waits
//     behind an earlier one that is not ready (a CUDA stream, not a greedy scheduler). A task
//     holds its server from start to end; zero-time tasks (alloc, free, marker,
//     zero-duration compute) take one for no time, so on a 1-server stream they still wait for
//     the running task. A task on no queue starts as soon as it is ready.
//   * transfer: starts like any task, then waits the sum of its links' latencies (using no
//     bandwidth), then its bytes move at the max-min fair rate, re-solved whenever a flow starts
//     or ends; it ends when the last byte arrives (rounded to the nearest nanosecond). On a queue
//     it holds the server throughout. An empty path or zero bytes ends after the latency alone.
//   * alloc / free change the pool's live bytes at their start; allocations past the capacity are
//     recorded in Result::out_of_memory and the run goes on.
//   * events at one instant run in the order they were scheduled; link rates are re-solved once
//     per instant, after its last event.
//   * a task that can never start (dependency cycle, a queue whose head
//     waits on a task behind it) leaves Result::completed false, and its record's unreached
//     times at kNever; the run stops when nothing else can happen.
// Bad arguments (unknown ids, bandwidth <= 0, negative durations or bytes) are a caller's bug:
// FTPLAN_ASSERT (std::logic_error) when the task or resource is added.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ftplan::des {

using Time = std::int64_t;  // nanoseconds
inline constexpr Time kNever = std::numeric_limits<Time>::max();

struct QueueId {
  std::uint32_t index = 0;
};
struct LinkId {
  std::uint32_t index = 0;
};
struct PoolId {
  std::uint32_t index = 0;
};
struct TaskId {
  std::uint32_t index = 0;
};

inline constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
inline constexpr QueueId kNoQueue{kNone};

enum class TaskKind { compute, transfer, alloc, free, marker };

// What a task is, for the recorder and the trace (free-form; the engine never interprets it).
struct Label {
  std::string name;           // e.g. "fwd L3 mlp"
  const char* category = "";  // e.g. "compute", "h2d", "allreduce"; a string with static lifetime
  std::int32_t tag = 0;       // caller's own id (e.g. an op index in a step IR)
};

// When a task ran (kNever: not reached). What the task is (kind, queue, bytes) is the engine's:
// Engine::kind, queue, bytes.
struct TaskRecord {
  Time ready = kNever;  // dependencies done
  Time start = kNever;  // began (queue head, server free)
  Time end = kNever;
};

struct OutOfMemory {
  Time time = 0;
  PoolId pool;
  double live_bytes = 0;  // after the allocation that overflowed
  double capacity_bytes = 0;
  TaskId task;  // the allocation (kNone: the pool's initial bytes exceed its capacity)
};

struct PoolSample {
  Time time = 0;
  double live_bytes = 0;
};

// A run's counters at the moment a marked task started (Engine::mark): what Result counts so far,
// i.e. the busy time of the tasks finished by then, the bytes of the flows finished by then and
// each link's busy stretches ended by then. Two snapshots one period apart in a periodic run
// differ by exactly one period's busy times and bytes.
struct Snapshot {
  TaskId task;
  Time time = 0;
  std::vector<Time> queue_busy;
  std::vector<double> link_bytes;
  std::vector<Time> link_busy;
};

struct Result {
  Time makespan = 0;                                 // end of the last task
  std::vector<TaskRecord> tasks;                     // indexed by TaskId
  std::vector<Time> queue_busy;                      // per queue: total time a server was busy (sum over servers)
  std::vector<double> link_bytes;                    // per link: bytes carried
  std::vector<Time> link_busy;                       // per link: time with at least one active flow
  std::vector<double> pool_peak_bytes;               // per pool: high-water mark
  std::vector<std::vector<PoolSample>> pool_series;  // per pool: (0, initial), then live bytes after each change
  std::vector<OutOfMemory> out_of_memory;
  std::vector<Snapshot> snapshots;  // one per start of a marked task, in time order
  std::uint64_t events = 0;         // events processed (for benchmarks)
  bool completed = true;            // false if some task could never start (a cycle or starvation)
};

struct TraceTracks;  // below: a run as tracks

class Engine {
 public:
  Engine();
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  // ---- resources
  QueueId add_queue(std::string name, int servers = 1);
  // bandwidth_Bps > 0; latency >= 0.
  LinkId add_link(std::string name, double bandwidth_Bps, Time latency = 0);
  PoolId add_pool(std::string name, double capacity_bytes, double initial_bytes = 0);

  // ---- tasks (each optionally on a queue; `label` is for records and traces)
  // Occupies a server of `queue` for `duration`.
  TaskId compute(QueueId queue, Time duration, Label label = {});
  // Moves `bytes` over `path` (links in order) at the max-min fair rate; if `queue` is given the
  // task also holds a server of that queue until the flow ends (a copy engine, a NIC queue).
  // An empty path or zero bytes takes only the latency (zero).
  TaskId transfer(QueueId queue, std::span<const LinkId> path, double bytes, Label label = {});
  TaskId transfer(QueueId queue, std::initializer_list<LinkId> path, double bytes, Label label = {}) {
    return transfer(queue, std::span<const LinkId>(path.begin(), path.size()), bytes, std::move(label));
  }
  // What run() gives a transfer of `bytes` over `path` that no other flow shares a link with:
  // its duration (the links' latencies, then the bytes at the slowest link's bandwidth, to the
  // nearest nanosecond); the latency part alone in `latency`. For lowering that stands in for
  // such a transfer and checks afterwards that it was alone.
  Time alone_ns(std::span<const LinkId> path, double bytes, Time* latency = nullptr) const;
  // Instantaneous changes of a pool's live bytes, ordered by their queue if given.
  TaskId alloc(QueueId queue, PoolId pool, double bytes, Label label = {});
  TaskId free(QueueId queue, PoolId pool, double bytes, Label label = {});
  // Does nothing but order others (zero duration); useful as a join point.
  TaskId marker(QueueId queue = kNoQueue, Label label = {});

  // A compute task's new duration, for running the same model again with other durations.
  void set_duration(TaskId task, Time duration);

  // Snapshots the run's counters each time `task` starts (Result::snapshots).
  void mark(TaskId task);

  // `task` starts only after `before` has finished (like a CUDA event wait across streams).
  void depends(TaskId task, TaskId before);

  // Room for `tasks` tasks and `dependencies` dependencies (saves regrowing the arrays).
  void reserve(std::size_t tasks, std::size_t dependencies);
  std::size_t task_count() const;
  const Label& label(TaskId task) const;
  TaskKind kind(TaskId task) const;
  QueueId queue(TaskId task) const;  // kNoQueue: on none
  double bytes(TaskId task) const;   // transfer, alloc, free; 0 for the others
  const std::string& queue_name(QueueId q) const;
  const std::string& link_name(LinkId l) const;
  const std::string& pool_name(PoolId p) const;
  double pool_capacity(PoolId p) const;  // bytes
  std::size_t queue_count() const;
  std::size_t link_count() const;
  std::size_t pool_count() const;

  // Runs everything added so far. Call once (calling again runs the same model again and gives
  // the same result; the engine itself is not changed by a run). `again`: the model will run
  // again unchanged but for set_duration (the SM-sharing probe, then the step), so this run keeps
  // what it derives from the model (each task's successors, its queue's order) for the next one:
  // a run with `again` copies it, one without takes it; a change other than set_duration drops it.
  Result run(bool again = false);

 private:
  friend std::string chrome_trace(const Engine& engine, const Result& result);
  friend TraceTracks trace_tracks(const Engine& engine, const Result& result);
  friend std::vector<TaskId> critical_path(const Engine& engine, const Result& result);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Chrome trace-event JSON (viewable in Perfetto / chrome://tracing): one track per queue, flows
// on link tracks with their bytes, a counter track per pool with live bytes.
std::string chrome_trace(const Engine& engine, const Result& result);

// A measured run in the same format (the executor's timeline, exec/): one track per queue and per
// link, each span on a lane of its track where spans overlap, `bytes` in its args when nonzero.
struct TraceSpan {
  std::string name;
  std::string category;
  Time begin = 0, end = 0;
  double bytes = 0;
  // CPU time the span's thread spent in it, ns (a measured run's CLOCK_THREAD_CPUTIME_ID); < 0
  // when not measured. On a loaded machine, the span's cost without the waits for a core.
  Time cpu = -1;
  bool critical = false;  // on the run's critical path (critical_path)
};
struct TraceTrack {
  std::string name;
  std::vector<TraceSpan> spans;
};
std::string chrome_trace(const std::vector<TraceTrack>& queues, const std::vector<TraceTrack>& links);

// A run's queues and links as tracks, what chrome_trace(engine, result) draws: each finished task
// on its queue (start to end), each flow on every link of its path while its data moves (after
// the latency), named by its label (or its kind) with its label's category and its bytes. In the
// order the queues and links were added; those with no span are left out. The spans of the tasks
// on the critical path are marked `critical`.
struct TraceTracks {
  std::vector<TraceTrack> queues, links;
};
TraceTracks trace_tracks(const Engine& engine, const Result& result);

// The run's critical path: the chain of tasks that decided when it ended, first to last. It starts
// from the task that ended last (the makespan; of several, the one added last) and goes back
// through what each task waited for last: when it started as soon as it was ready, the dependency
// that ended last (of several ending then, the one added last); when it waited on its queue, the
// task ahead of it there that freed the server at its start (or, the queue's order binding, the
// one just ahead of it). It ends at a task that started at 0 with nothing to wait for. Shortening
// a task off the path cannot end the run sooner; shortening one on it may (the critical path
// method of project scheduling, as profilers' critical-path views draw it). A transfer slowed by
// the flows sharing its links is on the path as itself; the flows that slowed it are not.
std::vector<TaskId> critical_path(const Engine& engine, const Result& result);

}  // namespace ftplan::des
