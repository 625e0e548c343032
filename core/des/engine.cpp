#include "des/engine.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "common/error.hpp"
#include "des/detail/event_queue.hpp"
#include "des/detail/fair_share.hpp"
#include "des/detail/memory.hpp"
#include "des/detail/model.hpp"

namespace ftplan::des {

namespace {

constexpr std::uint32_t kTaskDone = 0;   // a task ends now (compute, instantaneous tasks, empty transfers)
constexpr std::uint32_t kFlowStart = 1;  // a transfer's latency has elapsed: its data starts to move

enum : std::uint8_t { kBlocked, kReady, kStarted, kDone };

// Nanoseconds to move `bytes` at `rate_Bps`, to the nearest nanosecond. Rounding to nearest (not
// up) lets flows that finish together, up to float rounding, end in the same nanosecond.
Time transfer_ns(double bytes, double rate_Bps, Time now) {
  if (bytes <= 0) return 0;
  const double ns = bytes / rate_Bps * 1e9;
  const Time room = kNever - now;
  if (!(ns < static_cast<double>(room))) return room;  // also catches a NaN
  return std::min(static_cast<Time>(ns + 0.5), room);  // ns >= 0: to nearest, without a libm call
}

// A hint to start loading what the next event will touch (GCC and Clang; a no-op elsewhere).
template <class T>
inline void prefetch(const T* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p);
#else
  (void)p;
#endif
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// One run: all mutable state lives here, none in the Engine, none global.

// What a run starts from: the event loop's per-task state, each queue's order as a list through
// its tasks, the successors in compressed rows, and the tasks' empty records. Derived from the
// model alone: a run derives it, or copies or takes the one an earlier run kept (Impl::run_start).
struct Engine::Impl::RunStart {
  // What the event loop touches of a task, packed into half a cache line: a run is bound by
  // cache misses on tasks scattered over the id range, not by arithmetic. The rest (path, bytes,
  // pool) stays in the model and is read only by the tasks that need it.
  struct Hot {
    Time time = 0;  // compute: duration; transfer: summed latency; others: 0 (they end as they start)
    std::uint32_t queue = kNone;
    std::uint32_t pending = 0;     // dependencies not yet finished
    std::uint32_t succ_begin = 0;  // successors: succ[succ_begin, succ_begin + succ_count)
    std::uint32_t succ_count = 0;
    // The task added to the same queue after it (kNone: the last): the queue's next head, read
    // from the task that starts, which is in cache, instead of from the queue's order array, a
    // cache miss per start with thousands of queues.
    std::uint32_t queue_next = kNone;
    std::uint8_t kind = 0;  // TaskKind, in a byte
    std::uint8_t state = kBlocked;
    bool marked = false;  // Engine::mark
    // A transfer with data to move (a path, bytes > 0): its flow starts after `time`. Others
    // end `time` after they start, known without reading the model's task (a cache miss).
    bool flow = false;
  };
  static_assert(sizeof(Hot) == 32);
  std::vector<Hot> hot;
  std::vector<std::uint32_t> succ;

  struct QueueRun {
    std::uint32_t head = kNone;  // the first task not yet started, in issue order (kNone: none left)
    std::uint32_t tail = kNone;  // the last task added (while the lists are built)
    int servers = 1;
    int busy = 0;  // servers in use
  };
  std::vector<QueueRun> queues;

  std::vector<TaskRecord> records;
  std::vector<std::uint32_t> pool_changes;  // allocations and frees per pool: its series' length, less one

  explicit RunStart(const Impl& m);
};

void Engine::Impl::RunStartDeleter::operator()(RunStart* s) const { delete s; }

Engine::Impl::RunStart::RunStart(const Impl& m) {
  const std::size_t n = m.tasks.size();
  detail::reserve_huge(records, n);
  records.resize(n);  // every time kNever
  detail::reserve_huge(hot, n);
  queues.resize(m.queues.size());
  for (std::size_t q = 0; q < m.queues.size(); ++q) queues[q].servers = m.queues[q].servers;
  pool_changes.assign(m.pools.size(), 0);
  for (std::uint32_t t = 0; t < n; ++t) {
    const auto& d = m.tasks[t];
    if (d.kind == TaskKind::alloc || d.kind == TaskKind::free) ++pool_changes[d.resource];
    Hot& h = hot.emplace_back();
    h.flow = d.kind == TaskKind::transfer && d.path_size > 0 && d.bytes > 0;
    h.time = d.kind == TaskKind::compute || d.kind == TaskKind::transfer ? d.time : 0;
    h.queue = d.queue;
    h.kind = static_cast<std::uint8_t>(d.kind);
    h.marked = d.marked;
    // Each queue's order as a list through its tasks. Ids ascend in each queue's issue order, and
    // the link is written into the queue's previous task, added recently and still in cache.
    if (d.queue == kNone) continue;
    QueueRun& q = queues[d.queue];
    (q.head == kNone ? q.head : hot[q.tail].queue_next) = t;
    q.tail = t;
  }
  // Successors in compressed rows: count, prefix-sum, then place (counting down).
  for (const auto& [task, before] : m.deps) {
    ++hot[before].succ_count;
    ++hot[task].pending;
  }
  std::uint32_t offset = 0;
  for (Hot& h : hot) {
    offset += h.succ_count;
    h.succ_begin = offset;  // one past the row's end until the rows are filled
  }
  detail::reserve_huge(succ, m.deps.size());
  succ.resize(m.deps.size());
  for (auto it = m.deps.rbegin(); it != m.deps.rend(); ++it) succ[--hot[it->second].succ_begin] = it->first;
}

class Engine::Impl::Simulation {
 public:
  using Model = Engine::Impl;
  Simulation(const Model& m, bool again);
  Result run();

 private:
  void make_ready(std::uint32_t t);
  void dispatch(std::uint32_t q);
  void start(std::uint32_t t);
  void schedule(std::uint32_t t, Time at, std::uint32_t type);
  void task_done(std::uint32_t t);
  void finish(std::uint32_t t);
  void start_flow(std::uint32_t t);
  void flow_done(std::uint32_t slot);
  void resolve_rates();
  void change_pool(std::uint32_t p, double delta_bytes, std::uint32_t t);

  const Model& m_;
  Result r_;
  Time now_ = 0;
  std::uint64_t seq_ = 0;
  std::size_t finished_ = 0;

  using Hot = RunStart::Hot;
  using QueueRun = RunStart::QueueRun;
  std::vector<Hot> hot_;
  std::vector<std::uint32_t> succ_;  // RunStart::succ
  std::vector<QueueRun> queues_;

  std::vector<double> live_bytes_;

  // Flows whose data is moving, by FairShare slot.
  struct Flow {
    std::uint32_t task = 0;
    double remaining_bytes = 0;  // at `updated`
    double rate_Bps = 0;
    Time updated = 0;
  };
  detail::FairShare share_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> link_active_;
  std::vector<Time> link_since_;
  std::vector<detail::FairShare::Index> changed_;

  // Three event sources, merged by (time, seq): the heap of future events, the FIFO of events
  // at the current instant (cheaper than the heap, and in seq order by construction), and the
  // indexed heap of flow completions, which move whenever rates change.
  detail::EventHeap heap_;
  // The FIFO: events [now_head_, now_tail_) of a buffer that only grows (no push_back's call per event).
  std::vector<detail::Event> now_events_;
  std::size_t now_head_ = 0, now_tail_ = 0;
  detail::IndexedHeap flow_end_;
};

Engine::Impl::Simulation::Simulation(const Model& m, bool again) : m_(m) {
  // A run that another follows copies the kept start (deriving it first if none is kept); one
  // that none follows takes it (or derives its own).
  if (!m.run_start && again) m.run_start.reset(new RunStart(m));
  RunStart start = again ? RunStart(*m.run_start) : m.run_start ? std::move(*m.run_start) : RunStart(m);
  if (!again) m.run_start.reset();
  r_.tasks = std::move(start.records);
  hot_ = std::move(start.hot);
  succ_ = std::move(start.succ);
  queues_ = std::move(start.queues);
  r_.pool_series.resize(start.pool_changes.size());  // each at its full length: the initial level, a sample a change
  for (std::size_t p = 0; p < start.pool_changes.size(); ++p) r_.pool_series[p].reserve(start.pool_changes[p] + 1);
  r_.queue_busy.assign(m.queues.size(), 0);
  r_.link_bytes.assign(m.links.size(), 0);
  r_.link_busy.assign(m.links.size(), 0);
  r_.pool_peak_bytes.resize(m.pools.size());
  live_bytes_.resize(m.pools.size());
  for (const auto& l : m.links) share_.add_link(l.bandwidth_Bps);
  link_active_.assign(m.links.size(), 0);
  link_since_.assign(m.links.size(), 0);
}

Result Engine::Impl::Simulation::run() {
  for (std::uint32_t p = 0; p < m_.pools.size(); ++p) {
    const auto& pool = m_.pools[p];
    live_bytes_[p] = pool.initial_bytes;
    r_.pool_peak_bytes[p] = pool.initial_bytes;
    r_.pool_series[p].push_back({0, pool.initial_bytes});
    if (pool.initial_bytes > pool.capacity_bytes)
      r_.out_of_memory.push_back({0, PoolId{p}, pool.initial_bytes, pool.capacity_bytes, TaskId{kNone}});
  }
  for (std::uint32_t t = 0; t < hot_.size(); ++t)
    if (hot_[t].pending == 0) make_ready(t);

  for (;;) {
    // The earliest of the three sources, by (time, seq).
    int source = -1;
    Time time = kNever;
    std::uint64_t seq = 0;
    if (now_head_ < now_tail_) {
      source = 0;
      time = now_events_[now_head_].time;
      seq = now_events_[now_head_].seq;
    }
    if (!heap_.empty() && (source < 0 || detail::earlier(heap_.top().time, heap_.top().seq, time, seq))) {
      source = 1;
      time = heap_.top().time;
      seq = heap_.top().seq;
    }
    if (!flow_end_.empty() && (source < 0 || detail::earlier(flow_end_.top_time(), flow_end_.top_seq(), time, seq))) {
      source = 2;
      time = flow_end_.top_time();
      seq = flow_end_.top_seq();
    }
    // Flows started or ended during this instant: share the links again before time moves on.
    if (share_.dirty() && (source < 0 || time > now_)) {
      resolve_rates();
      continue;
    }
    if (source < 0) break;
    ++r_.events;
    now_ = time;
    if (source == 0) {
      const detail::Event e = now_events_[now_head_++];
      if (now_head_ == now_tail_) now_head_ = now_tail_ = 0;
      task_done(e.id);
    } else if (source == 1) {
      const detail::Event e = heap_.pop();
      // The next event's task is likely next: fetch what it reads while this one is handled.
      if (!heap_.empty()) {
        const std::uint32_t next = heap_.top().id;
        if (heap_.top().type == kTaskDone) {
          prefetch(&hot_[next]);
          prefetch(&r_.tasks[next]);
        } else {
          prefetch(&m_.tasks[next]);
        }
      }
      if (e.type == kFlowStart)
        start_flow(e.id);
      else
        task_done(e.id);
    } else {
      const std::uint32_t slot = flow_end_.top_slot();
      flow_end_.erase(slot);
      flow_done(slot);
    }
  }

  r_.completed = finished_ == hot_.size();
  for (const TaskRecord& rec : r_.tasks)
    if (rec.end != kNever) r_.makespan = std::max(r_.makespan, rec.end);
  return std::move(r_);
}

void Engine::Impl::Simulation::make_ready(std::uint32_t t) {
  Hot& h = hot_[t];
  h.state = kReady;
  r_.tasks[t].ready = now_;
  if (h.queue == kNone) {
    start(t);
    return;
  }
  if (queues_[h.queue].head == t) dispatch(h.queue);
}

// Starts tasks from the head of queue `q`'s order while servers are free and the head is ready.
void Engine::Impl::Simulation::dispatch(std::uint32_t q) {
  QueueRun& qr = queues_[q];
  while (qr.head != kNone && qr.busy < qr.servers) {
    if (hot_[qr.head].state != kReady) return;
    start(qr.head);
  }
}

void Engine::Impl::Simulation::start(std::uint32_t t) {
  Hot& h = hot_[t];
  h.state = kStarted;
  r_.tasks[t].start = now_;
  if (h.marked) r_.snapshots.push_back({TaskId{t}, now_, r_.queue_busy, r_.link_bytes, r_.link_busy});
  // Its successors are read when it ends.
  if (h.succ_count > 0) prefetch(succ_.data() + h.succ_begin);
  if (h.queue != kNone) {
    QueueRun& q = queues_[h.queue];
    ++q.busy;
    q.head = h.queue_next;
    // The queue's next task is read when this one ends (is it ready?): a cache miss on a task
    // far away in the id range unless fetched now.
    if (q.head != kNone) prefetch(&hot_[q.head]);
  }
  // Alloc, free and marker (time 0) take effect when their end, now, is handled.
  if (!h.flow)
    schedule(t, now_ + h.time, kTaskDone);
  else if (h.time > 0)
    schedule(t, now_ + h.time, kFlowStart);
  else
    start_flow(t);
}

void Engine::Impl::Simulation::schedule(std::uint32_t t, Time at, std::uint32_t type) {
  const detail::Event e{at, seq_++, t, type};
  if (at == now_) {
    if (now_tail_ == now_events_.size()) now_events_.resize(2 * now_tail_ + 64);
    now_events_[now_tail_++] = e;
  } else
    heap_.push(e);
}

void Engine::Impl::Simulation::task_done(std::uint32_t t) {
  switch (static_cast<TaskKind>(hot_[t].kind)) {
    case TaskKind::alloc: change_pool(m_.tasks[t].resource, m_.tasks[t].bytes, t); break;
    case TaskKind::free: change_pool(m_.tasks[t].resource, -m_.tasks[t].bytes, t); break;
    default: break;
  }
  finish(t);
}

void Engine::Impl::Simulation::finish(std::uint32_t t) {
  TaskRecord& rec = r_.tasks[t];
  rec.end = now_;
  Hot& h = hot_[t];
  h.state = kDone;
  ++finished_;
  if (h.queue != kNone) {
    --queues_[h.queue].busy;
    r_.queue_busy[h.queue] += now_ - rec.start;
    dispatch(h.queue);
  }
  const std::uint32_t* succ = succ_.data() + h.succ_begin;
  for (std::uint32_t i = 0, n = h.succ_count; i < n; ++i)
    if (--hot_[succ[i]].pending == 0) make_ready(succ[i]);
}

void Engine::Impl::Simulation::start_flow(std::uint32_t t) {
  const auto& d = m_.tasks[t];
  const std::uint32_t* path = m_.paths.data() + d.path_begin;
  const auto slot = share_.add_flow(path, d.path_size);
  if (slot >= flows_.size()) flows_.resize(slot + 1);
  flows_[slot] = {t, d.bytes, 0, now_};
  for (std::uint32_t i = 0; i < d.path_size; ++i)
    if (link_active_[path[i]]++ == 0) link_since_[path[i]] = now_;
}

void Engine::Impl::Simulation::flow_done(std::uint32_t slot) {
  const std::uint32_t t = flows_[slot].task;
  const auto& d = m_.tasks[t];
  share_.remove_flow(slot);
  const std::uint32_t* path = m_.paths.data() + d.path_begin;
  for (std::uint32_t i = 0; i < d.path_size; ++i) {
    r_.link_bytes[path[i]] += d.bytes;
    if (--link_active_[path[i]] == 0) r_.link_busy[path[i]] += now_ - link_since_[path[i]];
  }
  finish(t);
}

// Re-solves the shared links where flows came or went, and moves the completion of every flow
// whose rate changed: bytes moved so far at the old rate, the rest at the new one.
void Engine::Impl::Simulation::resolve_rates() {
  changed_.clear();
  share_.solve(changed_);
  for (const auto slot : changed_) {
    Flow& f = flows_[slot];
    f.remaining_bytes -= f.rate_Bps * static_cast<double>(now_ - f.updated) * 1e-9;
    f.updated = now_;
    f.rate_Bps = share_.rate(slot);
    flow_end_.set(slot, now_ + transfer_ns(f.remaining_bytes, f.rate_Bps, now_), seq_++);
  }
}

void Engine::Impl::Simulation::change_pool(std::uint32_t p, double delta_bytes, std::uint32_t t) {
  double& live = live_bytes_[p];
  live += delta_bytes;
  r_.pool_series[p].push_back({now_, live});
  r_.pool_peak_bytes[p] = std::max(r_.pool_peak_bytes[p], live);
  const double capacity = m_.pools[p].capacity_bytes;
  if (delta_bytes > 0 && live > capacity) r_.out_of_memory.push_back({now_, PoolId{p}, live, capacity, TaskId{t}});
}

// ---------------------------------------------------------------------------------------------
// Engine: building the model.

namespace {

void require(bool ok, const char* what) { FTPLAN_ASSERT(ok, std::string("des: ") + what); }

}  // namespace

Engine::Engine() : impl_(std::make_unique<Impl>()) {}
Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

QueueId Engine::add_queue(std::string name, int servers) {
  require(servers >= 1, "a queue needs at least one server");
  impl_->run_start.reset();
  impl_->queues.push_back({std::move(name), servers});
  return QueueId{static_cast<std::uint32_t>(impl_->queues.size() - 1)};
}

LinkId Engine::add_link(std::string name, double bandwidth_Bps, Time latency) {
  require(bandwidth_Bps > 0 && std::isfinite(bandwidth_Bps), "link bandwidth must be finite and > 0");
  require(latency >= 0, "link latency must be >= 0");
  impl_->run_start.reset();
  impl_->links.push_back({std::move(name), bandwidth_Bps, latency});
  return LinkId{static_cast<std::uint32_t>(impl_->links.size() - 1)};
}

PoolId Engine::add_pool(std::string name, double capacity_bytes, double initial_bytes) {
  require(capacity_bytes >= 0 && initial_bytes >= 0, "pool capacity and initial bytes must be >= 0");
  impl_->run_start.reset();  // the kept start sizes each pool's series
  impl_->pools.push_back({std::move(name), capacity_bytes, initial_bytes});
  return PoolId{static_cast<std::uint32_t>(impl_->pools.size() - 1)};
}

TaskId Engine::compute(QueueId queue, Time duration, Label label) {
  require(duration >= 0, "compute duration must be >= 0");
  Impl::Task t;
  t.kind = TaskKind::compute;
  t.time = duration;
  return impl_->add(t, queue, std::move(label));
}

void Engine::set_duration(TaskId task, Time duration) {
  require(task.index < impl_->tasks.size() && impl_->tasks[task.index].kind == TaskKind::compute,
          "set_duration takes a compute task");
  require(duration >= 0, "compute duration must be >= 0");
  impl_->tasks[task.index].time = duration;
  if (impl_->run_start) impl_->run_start->hot[task.index].time = duration;
}

TaskId Engine::transfer(QueueId queue, std::span<const LinkId> path, double bytes, Label label) {
  require(bytes >= 0 && std::isfinite(bytes), "transfer bytes must be finite and >= 0");
  Impl::Task t;
  t.kind = TaskKind::transfer;
  t.bytes = bytes;
  t.path_begin = static_cast<std::uint32_t>(impl_->paths.size());
  t.path_size = static_cast<std::uint32_t>(path.size());
  for (const LinkId l : path) {
    require(l.index < impl_->links.size(), "no such link");
    t.time += impl_->links[l.index].latency;
  }
  const TaskId id = impl_->add(t, queue, std::move(label));
  for (const LinkId l : path) impl_->paths.push_back(l.index);
  return id;
}

TaskId Engine::Impl::add_pool_change(TaskKind kind, QueueId queue, PoolId pool, double bytes, Label&& label) {
  require(pool.index < pools.size(), "no such pool");
  require(bytes >= 0 && std::isfinite(bytes),
          kind == TaskKind::alloc ? "alloc bytes must be finite and >= 0" : "free bytes must be finite and >= 0");
  Task t;
  t.kind = kind;
  t.resource = pool.index;
  t.bytes = bytes;
  return add(t, queue, std::move(label));
}

TaskId Engine::alloc(QueueId queue, PoolId pool, double bytes, Label label) {
  return impl_->add_pool_change(TaskKind::alloc, queue, pool, bytes, std::move(label));
}

TaskId Engine::free(QueueId queue, PoolId pool, double bytes, Label label) {
  return impl_->add_pool_change(TaskKind::free, queue, pool, bytes, std::move(label));
}

TaskId Engine::marker(QueueId queue, Label label) { return impl_->add(Impl::Task{}, queue, std::move(label)); }

void Engine::mark(TaskId task) {
  require(task.index < impl_->tasks.size(), "no such task");
  impl_->tasks[task.index].marked = true;
  impl_->run_start.reset();
}

void Engine::depends(TaskId task, TaskId before) {
  require(task.index < impl_->tasks.size() && before.index < impl_->tasks.size(), "no such task");
  impl_->run_start.reset();
  impl_->deps.emplace_back(task.index, before.index);
}

void Engine::reserve(std::size_t tasks, std::size_t dependencies) {
  impl_->tasks.reserve(tasks);
  impl_->labels.reserve(tasks);
  impl_->deps.reserve(dependencies);
}

std::size_t Engine::task_count() const { return impl_->tasks.size(); }
const Label& Engine::label(TaskId task) const { return impl_->labels.at(task.index); }
TaskKind Engine::kind(TaskId task) const { return impl_->tasks.at(task.index).kind; }
QueueId Engine::queue(TaskId task) const { return QueueId{impl_->tasks.at(task.index).queue}; }
double Engine::bytes(TaskId task) const { return impl_->tasks.at(task.index).bytes; }
const std::string& Engine::queue_name(QueueId q) const { return impl_->queues.at(q.index).name; }
Time Engine::alone_ns(std::span<const LinkId> path, double bytes, Time* latency) const {
  Time lat = 0;
  double slowest = 0;
  for (const LinkId l : path) {
    const Impl::Link& link = impl_->links.at(l.index);
    lat += link.latency;
    if (slowest == 0 || link.bandwidth_Bps < slowest) slowest = link.bandwidth_Bps;
  }
  if (latency) *latency = lat;
  // As run() moves it: an empty path or no bytes takes the latency alone; else, alone on every
  // link, the flow gets the smallest bandwidth on its path (FairShare::solve_alone).
  if (path.empty() || bytes <= 0) return lat;
  return lat + transfer_ns(bytes, slowest, lat);
}

const std::string& Engine::link_name(LinkId l) const { return impl_->links.at(l.index).name; }
const std::string& Engine::pool_name(PoolId p) const { return impl_->pools.at(p.index).name; }
double Engine::pool_capacity(PoolId p) const { return impl_->pools.at(p.index).capacity_bytes; }
std::size_t Engine::queue_count() const { return impl_->queues.size(); }
std::size_t Engine::link_count() const { return impl_->links.size(); }
std::size_t Engine::pool_count() const { return impl_->pools.size(); }

Result Engine::run(bool again) { return Impl::Simulation(*impl_, again).run(); }

}  // namespace ftplan::des
