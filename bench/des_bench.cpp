// Events per second of the discrete-event engine on one core, next to a plain std::priority_queue
// event loop that runs the same DAG with the same issue-order queues but no shared links (each
// transfer takes a fixed latency + bytes / slowest-link time). Goal (DES issue): at least
// 2 million events per second on 10^6 tasks with ~10^3 concurrent flows. Prints its figures; not
// a test. Build with scripts/build.sh (Release, -O2), then:
//
//   build/bench/des_bench [tasks [workload [queues]]]      (defaults: 1000000, all three, 4096)
//
// Every workload: `queues` single-server queues, each task on a random one; half the tasks
// depend on a random task among the 65536 added before them (so creation order is a valid
// schedule and ~1000 queues are busy at once); compute tasks of 1-20 us.
//   compute   compute tasks only: the cost of the event loop itself;
//   local     10% transfers of 1-4 MB over 1-3 links inside one of 32 nodes (a GPU's PCIe link,
//             its switch uplink, host DRAM or NIC; 384 links): flows share links within a node,
//             ~900 at once with 4096 queues;
//   global    10% transfers of 1-4 MB over 1-3 links drawn from 300 links of 10-50 GB/s at
//             random: one contended sharing component of ~400 flows (more with more queues).
// Times are CPU time of this thread, best of 3: the machine may be shared, and run() repeats.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/allocator.hpp"
#include "des/engine.hpp"

using namespace ftplan::des;

namespace {

struct Workload {
  std::string name;
  int queues = 0;
  std::vector<double> bandwidth_Bps;
  std::vector<Time> latency;
  // Per task:
  std::vector<std::uint32_t> queue;
  std::vector<Time> duration;  // compute
  std::vector<double> bytes;   // transfer (> 0), else 0
  std::vector<std::vector<std::uint32_t>> path;
  std::vector<std::uint32_t> before;  // one dependency, or kNone
};

enum class Paths { none, local, global };

constexpr std::size_t kReach = 65536;  // a dependency goes back at most this many tasks
constexpr double kBytesExtra = 3e6;    // transfers: 1 MB + up to this
constexpr int kRepeats = 3;

Workload make_workload(const std::string& name, Paths paths, std::size_t n_tasks, int queues) {
  Workload w;
  w.name = name;
  w.queues = queues;
  std::mt19937_64 rng(12345);
  auto pick = [&](std::uint64_t n) { return rng() % n; };
  const int nodes = 32, gpus_per_node = 8;
  // local: per node 8 GPU PCIe links (32 GB/s), 2 switch uplinks (64 GB/s), DRAM (200 GB/s),
  // NIC (50 GB/s); global: 300 links of 10-50 GB/s. Latencies 1-5 us on half of them.
  if (paths == Paths::local) {
    for (int n = 0; n < nodes; ++n) {
      for (int g = 0; g < gpus_per_node; ++g) w.bandwidth_Bps.push_back(32e9);
      w.bandwidth_Bps.push_back(64e9);
      w.bandwidth_Bps.push_back(64e9);
      w.bandwidth_Bps.push_back(200e9);
      w.bandwidth_Bps.push_back(50e9);
    }
  } else if (paths == Paths::global) {
    for (int l = 0; l < 300; ++l) w.bandwidth_Bps.push_back(1e9 * static_cast<double>(10 + pick(41)));
  }
  for (std::size_t l = 0; l < w.bandwidth_Bps.size(); ++l)
    w.latency.push_back(pick(2) ? static_cast<Time>(1000 + pick(4000)) : 0);

  w.queue.resize(n_tasks);
  w.duration.resize(n_tasks);
  w.bytes.resize(n_tasks);
  w.path.resize(n_tasks);
  w.before.resize(n_tasks);
  for (std::size_t t = 0; t < n_tasks; ++t) {
    const auto q = static_cast<std::uint32_t>(pick(static_cast<std::uint64_t>(w.queues)));
    w.queue[t] = q;
    w.before[t] = t > 0 && pick(2) ? static_cast<std::uint32_t>(t - 1 - pick(std::min<std::size_t>(t, kReach))) : kNone;
    if (paths == Paths::none || pick(10) != 0) {
      w.duration[t] = static_cast<Time>(1000 + pick(19'000));
      continue;
    }
    w.bytes[t] = 1e6 + static_cast<double>(pick(static_cast<std::uint64_t>(kBytesExtra)));
    if (paths == Paths::global) {
      const auto len = 1 + pick(3);
      for (std::uint64_t i = 0; i < len; ++i) w.path[t].push_back(static_cast<std::uint32_t>(pick(300)));
    } else {
      // The queue's GPU (of 256): node = GPU / 8; the node's links start at node * 12.
      const std::uint32_t base = (q % 256) / 8 * 12, gpu = q % 8, uplink = base + 8 + gpu / 4;
      switch (pick(4)) {
        case 0: w.path[t] = {base + gpu}; break;                      // device to device
        case 1: w.path[t] = {base + gpu, uplink}; break;              // to the peer switch
        case 2: w.path[t] = {base + gpu, uplink, base + 10}; break;   // to host DRAM
        default: w.path[t] = {base + gpu, uplink, base + 11}; break;  // to the NIC
      }
    }
  }
  return w;
}

Engine build_engine(const Workload& w) {
  Engine e;
  std::vector<QueueId> queues;
  for (int q = 0; q < w.queues; ++q) queues.push_back(e.add_queue("q" + std::to_string(q)));
  std::vector<LinkId> links;
  for (std::size_t l = 0; l < w.bandwidth_Bps.size(); ++l)
    links.push_back(e.add_link("l" + std::to_string(l), w.bandwidth_Bps[l], w.latency[l]));
  for (std::size_t t = 0; t < w.queue.size(); ++t) {
    TaskId id;
    if (w.bytes[t] > 0) {
      std::vector<LinkId> p;
      for (auto l : w.path[t]) p.push_back(links[l]);
      id = e.transfer(queues[w.queue[t]], p, w.bytes[t]);
    } else {
      id = e.compute(queues[w.queue[t]], w.duration[t]);
    }
    if (w.before[t] != kNone) e.depends(id, TaskId{w.before[t]});
  }
  return e;
}

// The baseline: std::priority_queue of (time, seq, task), dependency counts, issue-order queues.
struct PlainResult {
  std::uint64_t events = 0;
  Time makespan = 0;
};

PlainResult plain_loop(const Workload& w) {
  const std::size_t n = w.queue.size();
  std::vector<Time> length(n);
  for (std::size_t t = 0; t < n; ++t) {
    length[t] = w.duration[t];
    if (w.bytes[t] > 0) {
      double slowest = 1e300;
      for (auto l : w.path[t]) {
        slowest = std::min(slowest, w.bandwidth_Bps[l]);
        length[t] += w.latency[l];
      }
      length[t] += static_cast<Time>(w.bytes[t] / slowest * 1e9);
    }
  }
  std::vector<std::uint32_t> succ_begin(n + 1, 0), succ, pending(n, 0);
  for (std::size_t t = 0; t < n; ++t)
    if (w.before[t] != kNone) {
      ++succ_begin[w.before[t] + 1];
      ++pending[t];
    }
  for (std::size_t i = 0; i < n; ++i) succ_begin[i + 1] += succ_begin[i];
  succ.resize(succ_begin[n]);
  std::vector<std::uint32_t> fill(succ_begin.begin(), succ_begin.end() - 1);
  for (std::size_t t = 0; t < n; ++t)
    if (w.before[t] != kNone) succ[fill[w.before[t]]++] = static_cast<std::uint32_t>(t);
  std::vector<std::vector<std::uint32_t>> order(static_cast<std::size_t>(w.queues));
  for (std::size_t t = 0; t < n; ++t) order[w.queue[t]].push_back(static_cast<std::uint32_t>(t));
  std::vector<std::uint32_t> next(order.size(), 0);
  std::vector<char> busy(order.size(), 0), ready(n, 0);

  struct Ev {
    Time time;
    std::uint64_t seq;
    std::uint32_t task;
    bool operator>(const Ev& o) const { return time > o.time || (time == o.time && seq > o.seq); }
  };
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> heap;
  std::uint64_t seq = 0;
  Time now = 0;
  auto dispatch = [&](std::uint32_t q) {
    if (busy[q] || next[q] == order[q].size()) return;
    const std::uint32_t t = order[q][next[q]];
    if (!ready[t]) return;
    busy[q] = 1;
    ++next[q];
    heap.push({now + length[t], seq++, t});
  };
  for (std::size_t t = 0; t < n; ++t) ready[t] = pending[t] == 0;
  for (std::uint32_t q = 0; q < order.size(); ++q) dispatch(q);
  PlainResult r;
  while (!heap.empty()) {
    const Ev e = heap.top();
    heap.pop();
    now = e.time;
    ++r.events;
    busy[w.queue[e.task]] = 0;
    dispatch(w.queue[e.task]);
    for (std::uint32_t i = succ_begin[e.task]; i < succ_begin[e.task + 1]; ++i)
      if (--pending[succ[i]] == 0) {
        ready[succ[i]] = 1;
        dispatch(w.queue[succ[i]]);
      }
  }
  r.makespan = now;
  return r;
}

// CPU time of this thread: the machine may be shared, and the goal is per core.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n_tasks = argc > 1 ? std::stoul(argv[1]) : 1'000'000;
  const std::string only = argc > 2 ? argv[2] : "all";
  const int queues = argc > 3 ? std::stoi(argv[3]) : 4096;
  ftplan::keep_freed_memory();  // as the CLI and the other benches run
  fmt::print("{} tasks, {} queues; one core; events/s = events processed / CPU time of run(), best of {}\n", n_tasks,
             queues, kRepeats);
  fmt::print("{:<8} {:>9} {:>8} {:>10} {:>10} {:>13} {:>9} {:>13} {:>7}\n", "workload", "events", "flows", "mean flows",
             "mean busy", "engine ev/s", "build s", "plain ev/s", "ratio");
  for (const auto& [name, paths] :
       {std::pair{"compute", Paths::none}, std::pair{"local", Paths::local}, std::pair{"global", Paths::global}}) {
    if (only != "all" && only != name) continue;
    const Workload w = make_workload(name, paths, n_tasks, queues);
    double t0 = cpu_seconds();
    Engine e = build_engine(w);
    const double build_s = cpu_seconds() - t0;
    // Best of kRepeats for both loops: the machine may be shared, and run() is repeatable.
    Result r;
    double run_s = 1e300, plain_s = 1e300;
    PlainResult p;
    for (int i = 0; i < kRepeats; ++i) {
      t0 = cpu_seconds();
      r = e.run();
      run_s = std::min(run_s, cpu_seconds() - t0);
      t0 = cpu_seconds();
      p = plain_loop(w);
      plain_s = std::min(plain_s, cpu_seconds() - t0);
    }
    // Mean number of flows with data moving: their summed active time over the makespan.
    std::size_t flows = 0;
    double flow_ns = 0;
    for (std::size_t t = 0; t < n_tasks; ++t)
      if (w.bytes[t] > 0) {
        ++flows;
        Time lat = 0;
        for (auto l : w.path[t]) lat += w.latency[l];
        flow_ns += static_cast<double>(r.tasks[t].end - r.tasks[t].start - lat);
      }
    const double mean_flows = r.makespan > 0 ? flow_ns / static_cast<double>(r.makespan) : 0;
    double busy_ns = 0;
    for (Time b : r.queue_busy) busy_ns += static_cast<double>(b);
    const double mean_busy = r.makespan > 0 ? busy_ns / static_cast<double>(r.makespan) : 0;
    const double engine_eps = static_cast<double>(r.events) / run_s;
    const double plain_eps = static_cast<double>(p.events) / plain_s;
    fmt::print("{:<8} {:>9} {:>8} {:>10.0f} {:>10.0f} {:>13.0f} {:>9.2f} {:>13.0f} {:>7.2f}{}\n", name, r.events, flows,
               mean_flows, mean_busy, engine_eps, build_s, plain_eps, engine_eps / plain_eps,
               r.completed ? "" : "  INCOMPLETE");
  }
  fmt::print(
      "ratio = engine events/s / plain loop events/s\n"
      "goal (DES issue): >= 2,000,000 events/s on 10^6 tasks with ~10^3 concurrent flows over shared links: the\n"
      "'local' workload; 'compute' is the event loop alone, 'global' a harder stress (one sharing component)\n");
  return 0;
}
