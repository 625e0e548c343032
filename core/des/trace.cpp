// Chrome trace-event JSON of a run ("JSON Array/Object Format", the Trace Event Format document
// that chrome://tracing and Perfetto read): "X" complete events on one thread per track, "C"
// counter events for pools, "M" metadata naming processes and threads. Times are microseconds.
#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "des/detail/model.hpp"
#include "des/engine.hpp"

namespace ftplan::des {

namespace {

constexpr int kQueuesPid = 1;
constexpr int kLinksPid = 2;
constexpr int kPoolsPid = 3;
constexpr int kUnqueuedPid = 4;

const char* kind_name(TaskKind k) {
  switch (k) {
    case TaskKind::compute: return "compute";
    case TaskKind::transfer: return "transfer";
    case TaskKind::alloc: return "alloc";
    case TaskKind::free: return "free";
    case TaskKind::marker: return "marker";
  }
  return "task";
}

double us(Time ns) { return static_cast<double>(ns) / 1000.0; }

struct Span {
  Time begin;
  Time end;
  std::uint32_t task;
};

// Greedy interval partitioning: spans sorted by (begin, task) go to the lowest-numbered lane that
// is free by their begin, so overlapping spans (N servers, flows sharing a link) never share a
// thread, which the viewers require of "X" events. Returns each span's lane.
std::vector<int> assign_lanes(std::vector<Span>& spans, int& lane_count) {
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin || (a.begin == b.begin && a.task < b.task); });
  std::vector<int> lanes(spans.size());
  std::set<int> free_lanes;
  using Busy = std::pair<Time, int>;  // (end, lane)
  std::priority_queue<Busy, std::vector<Busy>, std::greater<>> busy;
  lane_count = 0;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    while (!busy.empty() && busy.top().first <= spans[i].begin) {
      free_lanes.insert(busy.top().second);
      busy.pop();
    }
    int lane;
    if (free_lanes.empty()) {
      lane = lane_count++;
    } else {
      lane = *free_lanes.begin();
      free_lanes.erase(free_lanes.begin());
    }
    lanes[i] = lane;
    busy.emplace(spans[i].end, lane);
  }
  return lanes;
}

class Writer {
 public:
  void add(const nlohmann::json& event) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    out_ += event.dump();
  }
  void process(int pid, const std::string& name) {
    add({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}});
    add({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
  }
  void thread(int pid, int tid, const std::string& name) {
    add({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
    add({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
  }
  std::string finish() { return "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[" + out_ + "\n]}\n"; }

 private:
  std::string out_;
  bool first_ = true;
};

std::string lane_name(const std::string& base, int lane) {
  return lane == 0 ? base : base + " [" + std::to_string(lane) + "]";
}

// `spans` on lanes of their own (assign_lanes), threads `tid`, `tid` + 1, ... of `pid` named after
// `name` (at least `min_lanes` of them, so an idle track still shows); `event(span, its tid)`
// makes each span's event. Returns the threads used.
template <class Event>
int add_lanes(Writer& w, int pid, int tid, const std::string& name, std::vector<Span>& spans, int min_lanes,
              Event&& event) {
  int lanes = 0;
  const std::vector<int> lane = assign_lanes(spans, lanes);
  for (int l = 0; l < std::max(lanes, min_lanes); ++l) w.thread(pid, tid + l, lane_name(name, l));
  for (std::size_t i = 0; i < spans.size(); ++i) w.add(event(spans[i], tid + lane[i]));
  return std::max(lanes, min_lanes);
}

// Task `t` as a complete ("X") event on (pid, tid) from `begin` to its end.
template <class Model>
nlohmann::json task_event(const Model& m, const std::vector<TaskRecord>& records, std::uint32_t t, int pid, int tid,
                          Time begin, bool critical) {
  const Label& label = m.labels[t];
  const TaskRecord& rec = records[t];
  const auto& d = m.tasks[t];
  nlohmann::json args = {{"task", t}, {"tag", label.tag}, {"kind", kind_name(d.kind)}, {"ready_us", us(rec.ready)}};
  if (d.bytes != 0) args["bytes"] = d.bytes;
  if (critical) args["critical"] = true;  // on the run's critical path (critical_path)
  return nlohmann::json{{"name", label.name.empty() ? kind_name(d.kind) : label.name},
                        {"cat", label.category && *label.category ? label.category : kind_name(d.kind)},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", tid},
                        {"ts", us(begin)},
                        {"dur", us(rec.end - begin)},
                        {"args", std::move(args)}};
}

// Pools: a counter track of live bytes each, and an instant event per out-of-memory.
template <class Model>
void add_pools(Writer& w, const Model& m, const Result& result) {
  w.process(kPoolsPid, "pools");
  for (std::size_t p = 0; p < m.pools.size() && p < result.pool_series.size(); ++p)
    for (const PoolSample& s : result.pool_series[p])
      w.add({{"name", m.pools[p].name},
             {"ph", "C"},
             {"pid", kPoolsPid},
             {"ts", us(s.time)},
             {"args", {{"live_bytes", s.live_bytes}}}});
  for (const OutOfMemory& o : result.out_of_memory)
    w.add({{"name", "out of memory: " + m.pools[o.pool.index].name},
           {"ph", "i"},
           {"s", "g"},
           {"pid", kPoolsPid},
           {"tid", 0},
           {"ts", us(o.time)},
           {"args",
            {{"live_bytes", o.live_bytes},
             {"capacity_bytes", o.capacity_bytes},
             {"task", o.task.index == kNone ? -1 : static_cast<std::int64_t>(o.task.index)}}}});
}

// Links: each flow on every link of its path, while its data moves (after the latency); the
// tasks on no queue that take time in `unqueued`.
// (A template: Engine::Impl is private to the engine and its friends, which call this.)
template <class Model>
std::vector<std::vector<Span>> link_spans(const Model& m, const std::vector<TaskRecord>& records,
                                          std::vector<Span>* unqueued) {
  std::vector<std::vector<Span>> on_link(m.links.size());
  for (std::uint32_t t = 0; t < m.tasks.size(); ++t) {
    const auto& d = m.tasks[t];
    const TaskRecord& rec = records[t];
    if (rec.end == kNever) continue;
    if (unqueued && d.queue == kNone && rec.end > rec.start) unqueued->push_back({rec.start, rec.end, t});
    if (d.kind != TaskKind::transfer || d.path_size == 0 || d.bytes <= 0) continue;
    for (std::uint32_t i = 0; i < d.path_size; ++i) {
      const std::uint32_t l = m.paths[d.path_begin + i];
      bool repeat = false;  // a path crossing a link twice shows once on it
      for (std::uint32_t j = 0; j < i; ++j) repeat = repeat || m.paths[d.path_begin + j] == l;
      if (!repeat) on_link[l].push_back({rec.start + d.time, rec.end, t});
    }
  }
  return on_link;
}

// Each queue's tasks in the order they were added (ids ascend in it).
template <class Model>
std::vector<std::vector<std::uint32_t>> queue_orders(const Model& m) {
  std::vector<std::vector<std::uint32_t>> order(m.queues.size());
  for (std::uint32_t t = 0; t < m.tasks.size(); ++t)
    if (m.tasks[t].queue != kNone) order[m.tasks[t].queue].push_back(t);
  return order;
}

// Whether each task is on the critical path (critical_path's rule; a template like those above).
template <class Model>
std::vector<bool> on_critical_path(const Model& m, const std::vector<TaskRecord>& records) {
  const auto n = static_cast<std::uint32_t>(m.tasks.size());
  std::vector<bool> on(n, false);
  std::uint32_t last = kNone;
  for (std::uint32_t t = 0; t < n; ++t)
    if (records[t].end != kNever && (last == kNone || records[t].end >= records[last].end)) last = t;
  if (last == kNone) return on;
  // Each task's dependencies in compressed rows, and its place in its queue's order.
  std::vector<std::uint32_t> dep_begin(n + 1, 0), deps(m.deps.size());
  for (const auto& [task, before] : m.deps) ++dep_begin[task + 1];
  for (std::uint32_t t = 0; t < n; ++t) dep_begin[t + 1] += dep_begin[t];
  std::vector<std::uint32_t> fill(dep_begin.begin(), dep_begin.end() - 1);
  for (const auto& [task, before] : m.deps) deps[fill[task]++] = before;
  const auto order = queue_orders(m);
  std::vector<std::uint32_t> place(n, kNone);
  for (const auto& o : order)
    for (std::uint32_t i = 0; i < o.size(); ++i) place[o[i]] = i;
  // Back from the last task; each step goes to a task that ended (or started) no later than this
  // one started and was added before it or is a dependency, so the walk ends.
  for (std::uint32_t t = last; t != kNone;) {
    on[t] = true;
    const TaskRecord& rec = records[t];
    std::uint32_t next = kNone;
    const std::uint32_t q = m.tasks[t].queue;
    if (q != kNone && rec.start > rec.ready && place[t] > 0) {
      const auto& o = order[q];
      next = o[place[t] - 1];
      // The one ahead that freed a server now (with N servers, not always the one just ahead).
      for (std::uint32_t i = place[t], seen = 0; i-- > 0 && seen < 64; ++seen)
        if (records[o[i]].end == rec.start) {
          next = o[i];
          break;
        }
    } else if (rec.ready > 0) {
      for (std::uint32_t i = dep_begin[t]; i < dep_begin[t + 1]; ++i)
        if (records[deps[i]].end == rec.ready && (next == kNone || deps[i] > next)) next = deps[i];
    }
    if (next != kNone && on[next]) break;  // cannot happen in a finished DAG; never loop
    t = next;
  }
  return on;
}

}  // namespace

std::vector<TaskId> critical_path(const Engine& engine, const Result& result) {
  const Engine::Impl& m = *engine.impl_;
  FTPLAN_ASSERT(result.tasks.size() == m.tasks.size(), "des: the result is not from this engine");
  const std::vector<bool> on = on_critical_path(m, result.tasks);
  std::vector<TaskId> path;
  for (std::uint32_t t = 0; t < on.size(); ++t)
    if (on[t]) path.push_back(TaskId{t});
  // First to last: by end, then start (a zero-time task before the one that starts as it ends).
  std::stable_sort(path.begin(), path.end(), [&](TaskId a, TaskId b) {
    const TaskRecord &x = result.tasks[a.index], &y = result.tasks[b.index];
    return x.end != y.end ? x.end < y.end : x.start < y.start;
  });
  return path;
}

TraceTracks trace_tracks(const Engine& engine, const Result& result) {
  const Engine::Impl& m = *engine.impl_;
  FTPLAN_ASSERT(result.tasks.size() == m.tasks.size(), "des: the result is not from this engine");
  const auto& records = result.tasks;
  const std::vector<bool> critical = on_critical_path(m, records);
  const auto span = [&](std::uint32_t t, Time begin, Time end) {
    const Label& label = m.labels[t];
    return TraceSpan{label.name.empty() ? kind_name(m.tasks[t].kind) : label.name,
                     label.category && *label.category ? label.category : kind_name(m.tasks[t].kind),
                     begin,
                     end,
                     m.tasks[t].bytes,
                     -1,
                     critical[t]};
  };
  TraceTracks out;
  const auto order = queue_orders(m);
  for (std::size_t q = 0; q < m.queues.size(); ++q) {
    TraceTrack track{m.queues[q].name, {}};
    for (const std::uint32_t t : order[q])
      if (records[t].end != kNever) track.spans.push_back(span(t, records[t].start, records[t].end));
    if (!track.spans.empty()) out.queues.push_back(std::move(track));
  }
  const std::vector<std::vector<Span>> on_link = link_spans(m, records, nullptr);
  for (std::size_t l = 0; l < m.links.size(); ++l) {
    if (on_link[l].empty()) continue;
    TraceTrack track{m.links[l].name, {}};
    for (const Span& s : on_link[l]) track.spans.push_back(span(s.task, s.begin, s.end));
    out.links.push_back(std::move(track));
  }
  return out;
}

std::string chrome_trace(const Engine& engine, const Result& result) {
  const Engine::Impl& m = *engine.impl_;
  FTPLAN_ASSERT(result.tasks.size() == m.tasks.size(), "des: the result is not from this engine");
  Writer w;
  const auto& records = result.tasks;
  const std::vector<bool> critical = on_critical_path(m, records);

  // Queues: one thread per server lane.
  w.process(kQueuesPid, "queues");
  int tid = 0;
  const auto order = queue_orders(m);
  for (std::size_t q = 0; q < m.queues.size(); ++q) {
    std::vector<Span> spans;
    for (const std::uint32_t t : order[q])
      if (records[t].end != kNever) spans.push_back({records[t].start, records[t].end, t});
    tid += add_lanes(w, kQueuesPid, tid, m.queues[q].name, spans, 1, [&](const Span& s, int lane_tid) {
      return task_event(m, records, s.task, kQueuesPid, lane_tid, s.begin, critical[s.task]);
    });
  }

  std::vector<Span> unqueued;
  std::vector<std::vector<Span>> on_link = link_spans(m, records, &unqueued);
  w.process(kLinksPid, "links");
  tid = 0;
  for (std::size_t l = 0; l < m.links.size(); ++l)
    tid += add_lanes(w, kLinksPid, tid, m.links[l].name, on_link[l], 1, [&](const Span& s, int lane_tid) {
      nlohmann::json e = task_event(m, records, s.task, kLinksPid, lane_tid, s.begin, critical[s.task]);
      if (s.end > s.begin)
        e["args"]["mean_Bps"] = m.tasks[s.task].bytes / (static_cast<double>(s.end - s.begin) * 1e-9);
      return e;
    });

  // Tasks on no queue that take time (compute, transfers): lanes of their own.
  if (!unqueued.empty()) {
    w.process(kUnqueuedPid, "no queue");
    add_lanes(w, kUnqueuedPid, 0, "no queue", unqueued, 0, [&](const Span& s, int lane_tid) {
      return task_event(m, records, s.task, kUnqueuedPid, lane_tid, s.begin, critical[s.task]);
    });
  }
  add_pools(w, m, result);
  return w.finish();
}

std::string chrome_trace(const std::vector<TraceTrack>& queues, const std::vector<TraceTrack>& links) {
  Writer w;
  const auto section = [&](int pid, const char* process, const std::vector<TraceTrack>& tracks) {
    w.process(pid, process);
    int tid = 0;
    for (const TraceTrack& track : tracks) {
      std::vector<Span> spans;
      for (std::size_t i = 0; i < track.spans.size(); ++i)
        spans.push_back({track.spans[i].begin, track.spans[i].end, static_cast<std::uint32_t>(i)});
      tid += add_lanes(w, pid, tid, track.name, spans, 1, [&](const Span& span, int lane_tid) {
        const TraceSpan& s = track.spans[span.task];
        nlohmann::json args = nlohmann::json::object();
        if (s.bytes != 0) args["bytes"] = s.bytes;
        if (s.cpu >= 0) args["cpu_us"] = static_cast<double>(s.cpu) * 1e-3;
        if (s.bytes != 0 && s.end > s.begin) args["mean_Bps"] = s.bytes / (static_cast<double>(s.end - s.begin) * 1e-9);
        return nlohmann::json{{"name", s.name},
                              {"cat", s.category},
                              {"ph", "X"},
                              {"pid", pid},
                              {"tid", lane_tid},
                              {"ts", us(s.begin)},
                              {"dur", us(s.end - s.begin)},
                              {"args", std::move(args)}};
      });
    }
  };
  section(kQueuesPid, "queues", queues);
  section(kLinksPid, "links", links);
  return w.finish();
}

}  // namespace ftplan::des
