#include "rates.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.hpp"
#include "cpu_device.hpp"
#include "executor.hpp"
#include "runtime/kernels.hpp"
#include "runtime/measure.hpp"
#include "runtime/process.hpp"
#include "runtime/uring.hpp"
#include "sim/interpolate.hpp"

namespace ftplan::exec {

namespace {

// Best of `rounds` timings of `f`, each repeated until it takes at least 20 ms; seconds per call.
double time_per_call(const std::function<void()>& f, int rounds) {
  double best = 1e300;
  for (int round = 0; round < std::max(1, rounds); ++round) {
    int calls = 0;
    const double t0 = runtime::now_s();
    double t = 0;
    do {
      f();
      ++calls;
      t = runtime::now_s() - t0;
    } while (t < 0.02);
    best = std::min(best, t / calls);
  }
  return best;
}

// Median of `calls` single calls of `f`, each after `flush` (which is not timed): a GEMM in a step
// finds its operands evicted by the memory-bound kernels between GEMMs, and a GEMM of few rows
// is bound by reading its weights from memory; timed back to back it finds them in cache and
// runs up to twice as fast (measured here at hidden 1024 x 64 tokens).
double time_cold(const std::function<void()>& f, const std::function<void()>& flush, int calls) {
  std::vector<double> t;
  for (int round = 0; round < std::max(1, calls); ++round) {
    flush();
    const double t0 = runtime::now_s();
    f();
    t.push_back(runtime::now_s() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

// The storage directories as the executor's NVMe streams use them (Options' defaults): one
// address space striped round-robin over a file per directory, moved by one ring with
// io_queue_depth requests of io_block_bytes in flight (storage::striped_requests). Timing them any
// other way measures another thing: one thread and ring per directory at depth 8 each (calibrate's
// run_io) came out 2.2 GB/s over two directories of one virtual disk where the executor's single
// ring moved 5.5 GB/s (docs/validation.md).
struct NvmeProbe::Impl {
  Options io;
  std::vector<std::unique_ptr<runtime::ScratchFile>> files;
  std::vector<const runtime::ScratchFile*> ptrs;
  std::uint64_t total = 0;
  std::unique_ptr<runtime::AlignedBuffer> buffer;
  std::unique_ptr<runtime::DirectIo> ring;
};

NvmeProbe::NvmeProbe(const std::vector<std::filesystem::path>& dirs) : impl_(std::make_unique<Impl>()) {
  FTPLAN_ASSERT(!dirs.empty(), "an NVMe probe without directories");
  Impl& x = *impl_;
  // 64 MiB per directory, as session 8's probe: sized like the step's NVMe tier (up to 512 MiB
  // per directory) the probe read 1.6-2.5 GB/s, steady over five probes, where the run read the
  // same directories at 4.3-6.3 GB/s (hidden 1024, docs/validation.md); 64 MiB passes read
  // 2.2-3.6 GB/s against the run's 5.9-6.1: closer, still slow. Why is not measured (a host
  // cache holding the last step's writes, a burst allowance: docs/validation.md, open).
  constexpr std::uint64_t per_dir = std::uint64_t{64} << 20;
  x.total = per_dir * dirs.size();
  for (const auto& dir : dirs) {
    x.files.push_back(std::make_unique<runtime::ScratchFile>(dir, per_dir + x.io.stripe_bytes));
    x.ptrs.push_back(x.files.back().get());
  }
  x.buffer = std::make_unique<runtime::AlignedBuffer>(static_cast<std::size_t>(x.total));
  std::memset(x.buffer->data(), 1, x.buffer->size());
  x.ring = std::make_unique<runtime::DirectIo>(x.io.io_queue_depth);
  pass_Bps(true);  // untimed: the extents written once, as the run's are after its first step
}

NvmeProbe::~NvmeProbe() = default;

std::uint64_t NvmeProbe::bytes() const { return impl_->total; }

double NvmeProbe::pass_Bps(bool write) {
  Impl& x = *impl_;
  const auto requests =
      runtime::striped_requests(x.ptrs, x.io.stripe_bytes, 0, x.buffer->data(), x.total, write, x.io.io_block_bytes);
  const double t0 = runtime::now_s();
  x.ring->run(requests);
  return static_cast<double>(x.total) / (runtime::now_s() - t0);
}

namespace {

constexpr std::size_t kProbeBytes = std::size_t{32} << 20;  // each host probe's buffers

// f on a thread pinned to `where` (the cores an executor worker runs on), else here.
void run_on(const std::vector<int>& where, const std::function<void()>& f) {
  if (where.empty()) return f();
  std::exception_ptr error;
  std::thread t([&] {
    runtime::pin_to(where);
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
}

using Layout = sim::Efficiency::Layout;

// The device call that runs the product C[m x n] over k in `layout` (the simulator's naming,
// hardware::CpuDeviceGemmSample): nn the forward C = A B, nt a backward's dA[m x k] = dC B^T (the
// op's m x n x k as m, k over n), tn its dB[k x n] = A^T dC (k, n over m).
GemmCall product_call(std::int64_t m, std::int64_t n, std::int64_t k, Layout layout) {
  switch (layout) {
    case Layout::nt: return GemmCall{m, k, n, true, false, 1, true};
    case Layout::tn: return GemmCall{k, n, m, true, true, 1, false};
    case Layout::nn: break;
  }
  return GemmCall{m, n, k, false, false, 1, true};
}

constexpr std::pair<const char*, Layout> kLayouts[] = {{"nn", Layout::nn}, {"nt", Layout::nt}, {"tn", Layout::tn}};

Layout layout_of(const std::string& name) {
  for (const auto& [n, layout] : kLayouts)
    if (name == n) return layout;
  FTPLAN_ASSERT(false, "a GEMM layout the profile reader let through: " + name);
  return Layout::nn;
}

// The flush before a cold call: 64 MiB streamed through the device's memory, past any last-level
// cache (or L2).
void flush(Device& dev) { dev.memory_bound(0, 2.0 * (std::size_t{64} << 20)); }

// The step's GEMMs as products (product_call), each with the number of the step's calls that run it.
using Shapes = std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, Layout>, int>;
Shapes step_gemms(const schedule::StepIR& ir) {
  Shapes shapes;
  for (const auto& op : ir.ops) {
    if (op.kind != schedule::OpKind::gemm || op.m <= 0 || op.n <= 0 || op.k <= 0) continue;
    if (op.pass != schedule::Pass::backward) {
      ++shapes[{op.m, op.n, op.k, Layout::nn}];
    } else {
      ++shapes[{op.m, op.k, op.n, Layout::nt}];
      if (op.weight_grad) ++shapes[{op.k, op.n, op.m, Layout::tn}];
    }
  }
  return shapes;
}

const schedule::Op* first_attention(const schedule::StepIR& ir) {
  for (const auto& op : ir.ops)
    if (op.kind == schedule::OpKind::attention && op.flops > 0) return &op;
  return nullptr;
}

// A memory-bound kernel's bytes (read + written) per second, one `rounds`-round timing.
double memory_rate(Device& dev, int rounds) {
  return 2.0 * kProbeBytes / time_per_call([&] { dev.memory_bound(0, 2.0 * kProbeBytes); }, rounds);
}

// The device's kernels: GEMMs, attention and memory-bound kernels, on the compute worker's core.
void probe_kernels(const schedule::StepIR& ir, Device& dev, const ProbeEffort& effort, DeviceRates& r) {
  // GEMMs at every shape and layout the simulator will ask for (sim::compute_seconds), each timed
  // as the device runs it for the op (product_call). Timing dA as a plain product of its shape
  // overstated it by 5-8% on the CPU device (Eigen packs a transposed operand otherwise).
  const Shapes shapes = step_gemms(ir);
  // One untimed call of each shape first: the CPU device grows (and fills) its operand buffers
  // on the first call that needs more room, and a cuBLASLt matmul picks its algorithm on its
  // first call. Timed, that first call made a probe of one cold call per shape (kStepProbe) 1.5-2x
  // slow at hidden 1024 (every probe's simulated step +40% to +250% over the measured one, where
  // the median of five calls drops it).
  for (const auto& [shape, calls] : shapes) {
    const auto& [m, n, k, layout] = shape;
    dev.gemm(0, product_call(m, n, k, layout));
  }
  double step_flops = 0, step_s = 0;
  for (const auto& [shape, calls] : shapes) {
    const auto& [m, n, k, layout] = shape;
    const GemmCall call = product_call(m, n, k, layout);
    const double t = time_cold([&, call] { dev.gemm(0, call); }, [&] { flush(dev); }, effort.cold_calls);
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    step_flops += calls * flops;
    step_s += calls * t;
    r.gemm.push_back({m, n, k, flops / t, layout});
  }
  if (step_s > 0) r.gemm_step_flops_per_s = step_flops / step_s;
  if (const schedule::Op* attention = first_attention(ir)) {
    const AttentionCall a = attention_call(*attention);
    dev.attention(0, a.m, a.n, a.k, 1);  // untimed, as the GEMMs above
    const double t = time_cold([&] { dev.attention(0, a.m, a.n, a.k, 1); }, [&] { flush(dev); }, effort.cold_calls);
    r.attention_flops_per_s = 4.0 * static_cast<double>(a.m) * static_cast<double>(a.n) * static_cast<double>(a.k) / t;
  }
  r.memory_Bps = memory_rate(dev, effort.timed_rounds);
}

// Host copies, DRAM traffic and AdamW, on the other workers' cores (cores.others; `any` all).
void probe_host(Device& dev, const ProbeEffort& effort, const std::vector<int>& any, DeviceRates& r) {
  constexpr std::size_t kBytes = kProbeBytes;
  const int rounds = effort.timed_rounds;
  std::vector<std::byte> a(kBytes, std::byte{1}), b(kBytes), c(kBytes, std::byte{2}), d(kBytes);
  if (dev.host_addressable()) {
    r.copy_Bps = kBytes / time_per_call([&] { std::memcpy(b.data(), a.data(), kBytes); }, rounds);
  } else {
    // Host to device from a page-locked buffer, as the executor's pinned host tier copies.
    std::byte* on_device = dev.allocate(kBytes);
    if (!on_device) throw SystemError("the device has no room for the copy benchmark's 32 MiB");
    const bool pinned = dev.pin_host(a.data(), kBytes);
    r.copy_Bps = kBytes / time_per_call([&] { dev.copy_to_device(on_device, a.data(), kBytes); }, rounds);
    if (pinned) dev.unpin_host(a.data());
    dev.release(on_device);
  }
  // DRAM traffic, as the simulator's DRAM link counts it (bytes read + written: a copy's bytes,
  // AdamW's 28 per parameter): two memcpys at once each read and write kBytes (glibc copies
  // blocks this large with non-temporal stores: no write-allocate reads). The second may run on
  // any allowed core, as before the probes were pinned: the link is the memory's, not a core's.
  r.dram_Bps = 4.0 * kBytes /
               time_per_call(
                   [&] {
                     std::thread other([&] {
                       if (!any.empty()) runtime::pin_to(any);
                       std::memcpy(d.data(), c.data(), kBytes);
                     });
                     std::memcpy(b.data(), a.data(), kBytes);
                     other.join();
                   },
                   rounds);
  {
    // 8M parameters, 224 MB of state: past any last-level cache, as the step's are.
    constexpr std::size_t kParams = std::size_t{8} << 20;
    std::vector<float> p(kParams, 0.1f), g(kParams, 0.01f), m(kParams, 0.0f), v(kParams, 0.0f);
    int step = 0;
    r.adam_params_per_s =
        kParams /
        time_per_call(
            [&] { runtime::adamw_step(p.data(), g.data(), m.data(), v.data(), kParams, runtime::AdamW{}, ++step); },
            rounds);
  }
}

// The storage directories' striped O_DIRECT reads and writes (NvmeProbe), median of the passes.
// `passes` write passes over the probe's files, then as many read passes (which find the extents
// the writes left): their rates, in B/s.
void nvme_passes(NvmeProbe& io, int passes, std::vector<double>& write, std::vector<double>& read) {
  for (int pass = 0; pass < std::max(1, passes); ++pass) write.push_back(io.pass_Bps(true));
  for (int pass = 0; pass < std::max(1, passes); ++pass) read.push_back(io.pass_Bps(false));
}

void probe_nvme(const std::vector<std::filesystem::path>& dirs, NvmeProbe* nvme, const ProbeEffort& effort,
                DeviceRates& r) {
  std::unique_ptr<NvmeProbe> own;
  if (!nvme) own = std::make_unique<NvmeProbe>(dirs);
  std::vector<double> w, rd;
  nvme_passes(nvme ? *nvme : *own, effort.io_passes, w, rd);
  r.nvme_write_Bps = runtime::median(w);
  r.nvme_read_Bps = runtime::median(rd);
}

}  // namespace

DeviceRates measure_rates(const schedule::StepIR& ir, const std::vector<std::filesystem::path>& dirs, Device* device,
                          const ProbeEffort& effort, NvmeProbe* nvme) {
  DeviceRates r;
  CpuDevice cpu(std::uint64_t{1} << 20, 1);
  Device& dev = device ? *device : cpu;
  // Each part on the cores where the executor's workers run it (core_plan): the device's kernels
  // on the compute worker's core, copies, DRAM, AdamW and I/O on the other workers' cores. On this
  // loaded 2-core VM a probe the kernel could move between cores ran its GEMMs faster
  // than the compute worker pinned to one core saw them (1.1-1.5x, docs/validation.md).
  const CorePlan cores = core_plan(dev, true);
  run_on(cores.compute, [&] { probe_kernels(ir, dev, effort, r); });
  std::vector<int> any = cores.compute;
  any.insert(any.end(), cores.others.begin(), cores.others.end());
  run_on(cores.others, [&] {
    probe_host(dev, effort, any, r);
    if (!dirs.empty()) probe_nvme(dirs, nvme, effort, r);
  });
  return r;
}

namespace {

// Every scalar rate of DeviceRates with its JSON key, in one place for median_rates and rate_spreads.
constexpr std::pair<const char*, double DeviceRates::*> kScalarRates[] = {
    {"gemm_step_flops_per_s", &DeviceRates::gemm_step_flops_per_s},
    {"attention_flops_per_s", &DeviceRates::attention_flops_per_s},
    {"memory_Bps", &DeviceRates::memory_Bps},
    {"copy_Bps", &DeviceRates::copy_Bps},
    {"dram_Bps", &DeviceRates::dram_Bps},
    {"adam_params_per_s", &DeviceRates::adam_params_per_s},
    {"nvme_read_Bps", &DeviceRates::nvme_read_Bps},
    {"nvme_write_Bps", &DeviceRates::nvme_write_Bps},
};

}  // namespace

DeviceRates median_rates(const std::vector<DeviceRates>& samples) {
  FTPLAN_ASSERT(!samples.empty(), "median_rates of no samples");
  DeviceRates r = samples.front();
  for (const auto& [name, field] : kScalarRates) {
    std::vector<double> x;
    for (const auto& s : samples) x.push_back(s.*field);
    r.*field = runtime::median(x);
  }
  for (std::size_t i = 0; i < r.gemm.size(); ++i) {
    std::vector<double> x;
    for (const auto& s : samples) {
      FTPLAN_ASSERT(s.gemm.size() == r.gemm.size() && s.gemm[i].m == r.gemm[i].m && s.gemm[i].n == r.gemm[i].n &&
                        s.gemm[i].k == r.gemm[i].k && s.gemm[i].layout == r.gemm[i].layout,
                    "rate samples of different steps");
      x.push_back(s.gemm[i].flops_per_s);
    }
    r.gemm[i].flops_per_s = runtime::median(x);
  }
  return r;
}

std::vector<RateSpread> rate_spreads(const std::vector<DeviceRates>& samples) {
  std::vector<RateSpread> out;
  for (const auto& [name, field] : kScalarRates) {
    std::vector<double> x;
    for (const auto& s : samples)
      if (s.*field > 0) x.push_back(s.*field);
    if (x.empty()) continue;
    const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
    out.push_back({name, *lo, runtime::median(x), *hi});
  }
  return out;
}

DeviceGrid device_grid(bool quick) {
  DeviceGrid g;
  // The CPU device's fp32 Eigen GEMM rate on one core is nearly flat past 128 rows (within ~15%
  // from 128 x 256 x 256 to 2048 x 4096 x 4096 here, each layout alike) and falls below it:
  // points 4x apart in each dimension, closer in m (the tokens of a micro-batch) where it falls.
  // Down to 4 rows: below its smallest m the interpolation holds the nearest point's rate, and a
  // GEMM of few rows is bound by reading its weights, its rate ~ m (8 rows ran at 0.3x the
  // 16-row rate's prediction: docs/validation.md, issue 40).
  if (quick) {
    g.m = {4, 16, 128, 1024};
    g.nk = {128, 1024, 4096};
    g.cold_calls = 3;
    g.max_flops = 1.0 * (std::int64_t{1} << 33);
    g.attention_seq = {32, 256, 2048};
    g.attention_head_dim = {64, 128};
  } else {
    g.m = {4, 16, 64, 256, 1024, 4096};
    g.nk = {64, 256, 1024, 4096};
    g.cold_calls = 5;
    g.max_flops = 1.0 * (std::int64_t{1} << 35);
    g.attention_seq = {16, 64, 256, 1024, 4096};
    g.attention_head_dim = {32, 64, 128};
  }
  return g;
}

namespace {

// One cold call of `f` after a flush: `work` over its seconds.
double cold_rate(Device& dev, const std::function<void()>& f, double work) {
  flush(dev);
  const double t0 = runtime::now_s();
  f();
  return work / (runtime::now_s() - t0);
}

hardware::CpuDeviceRate scalar_rate(const char* name, std::vector<double> samples) {
  return {name, runtime::median(samples), std::move(samples)};
}

}  // namespace

namespace {

using Say = std::function<void(const std::string&)>;

// The grid's GEMMs and attention and the memory-bound kernel, on the calling thread (the compute
// worker's core).
void measure_kernels(CpuDevice& dev, const DeviceGrid& grid, const Say& say, hardware::CpuDeviceSection& out) {
  // Each kernel of the grid with its work, timed in rounds: one cold call of every kernel per
  // round, so that each kernel's samples span the whole measurement and their median is the
  // machine's typical state, not that of the second its calls happened to run in (this VM's
  // GEMM rate moved 10-15% between minutes: docs/validation.md, issue 40).
  struct Kernel {
    std::function<void()> run;
    double work;
    std::vector<double> samples;
  };
  std::vector<Kernel> kernels;
  std::vector<hardware::CpuDeviceGemmSample> gemm;  // the shapes, in the kernels' order
  for (const auto m : grid.m)
    for (const auto n : grid.nk)
      for (const auto k : grid.nk) {
        const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
        if (grid.max_flops > 0 && flops > grid.max_flops) continue;
        for (const auto& [name, layout] : kLayouts) {
          // The grid's few rows are the tokens of a micro-batch: the rows of a forward product
          // and of an input gradient, but the inner dimension of a weight gradient
          // (dB[k x n] = A^T dC sums over the tokens). Measured as rows, a weight gradient of 8
          // tokens was read off points of K >= 128 and ran at half their rate (its output,
          // written whole, bounds it): ZeRO-Offload at hidden 2048, docs/validation.md.
          const auto [pm, pn, pk] = layout == Layout::tn ? std::tuple{n, k, m} : std::tuple{m, n, k};
          const GemmCall call = product_call(pm, pn, pk, layout);
          kernels.push_back({[&dev, call] { dev.gemm(0, call); }, flops, {}});
          gemm.push_back({name, pm, pn, pk, 0, {}});
        }
      }
  for (const auto seq : grid.attention_seq)
    for (const auto hd : grid.attention_head_dim)
      kernels.push_back({[&dev, seq, hd] { dev.attention(0, seq, seq, hd, 1); },
                         4.0 * static_cast<double>(seq) * static_cast<double>(seq) * static_cast<double>(hd),
                         {}});
  say(fmt::format("CPU device kernels: {} GEMMs ({} shapes x 3 layouts) and {} attention, {} rounds", gemm.size(),
                  gemm.size() / 3, kernels.size() - gemm.size(), std::max(1, grid.cold_calls)));
  // Untimed first: the device grows its operand buffers on the first call of a larger shape.
  for (auto& x : kernels) x.run();
  for (int round = 0; round < std::max(1, grid.cold_calls); ++round)
    for (auto& x : kernels) x.samples.push_back(cold_rate(dev, x.run, x.work));
  std::size_t i = 0;
  for (auto& g : gemm) {
    auto& x = kernels[i++];
    g.flops_per_s = runtime::median(x.samples);
    g.samples = std::move(x.samples);
  }
  out.gemm = std::move(gemm);
  for (const auto seq : grid.attention_seq)
    for (const auto hd : grid.attention_head_dim) {
      auto& x = kernels[i++];
      out.attention.push_back({seq, seq, hd, runtime::median(x.samples), std::move(x.samples)});
    }
  std::vector<double> memory;
  for (int round = 0; round < grid.cold_calls; ++round) memory.push_back(memory_rate(dev, 1));
  out.rates.push_back(scalar_rate("memory_Bps", std::move(memory)));
}

// Copies, DRAM and AdamW, and the storage directories, on the calling thread (the other workers'
// cores; `any` all of them).
void measure_host(CpuDevice& dev, const DeviceGrid& grid, const std::vector<std::filesystem::path>& dirs,
                  const std::vector<int>& any, const Say& say, hardware::CpuDeviceSection& out) {
  say("CPU device copies, DRAM and AdamW");
  std::vector<double> copy, dram, adam;
  for (int i = 0; i < grid.cold_calls; ++i) {
    DeviceRates r;
    probe_host(dev, ProbeEffort{1, 1, 1}, any, r);
    copy.push_back(r.copy_Bps);
    dram.push_back(r.dram_Bps);
    adam.push_back(r.adam_params_per_s);
  }
  out.rates.push_back(scalar_rate("copy_Bps", std::move(copy)));
  out.rates.push_back(scalar_rate("dram_Bps", std::move(dram)));
  out.rates.push_back(scalar_rate("adam_params_per_s", std::move(adam)));
  // The storage directories each alone and, when several, striped over all of them: a run
  // names its own (validate --storage-dir), and rates_from_profile takes the matching row.
  std::vector<std::vector<std::filesystem::path>> sets;
  for (const auto& d : dirs) sets.push_back({d});
  if (dirs.size() > 1) sets.push_back(dirs);
  const Options io;
  for (const auto& set : sets) {
    std::vector<std::string> paths;
    for (const auto& d : set) paths.push_back(d.string());
    say(fmt::format("CPU device storage: {} as the executor stripes them", fmt::join(paths, ", ")));
    // A directory that takes no O_DIRECT (tmpfs) or is full costs its row, not the profile:
    // validate then names the rates it lacks.
    try {
      NvmeProbe probe(set);
      hardware::CpuDeviceStorageSample s;
      s.paths = paths;
      s.block_bytes = static_cast<double>(io.io_block_bytes);
      s.stripe_bytes = static_cast<double>(io.stripe_bytes);
      s.queue_depth = io.io_queue_depth;
      nvme_passes(probe, grid.cold_calls, s.write_samples, s.read_samples);
      s.write_Bps = runtime::median(s.write_samples);
      s.read_Bps = runtime::median(s.read_samples);
      out.storage.push_back(std::move(s));
    } catch (const std::exception& e) {
      say(fmt::format("CPU device storage over {}: not measured: {}", fmt::join(paths, ", "), e.what()));
    }
  }
}

}  // namespace

hardware::CpuDeviceSection measure_cpu_device(const DeviceGrid& grid, const std::vector<std::filesystem::path>& dirs,
                                              const std::function<void(const std::string&)>& progress) {
  const Say say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  hardware::CpuDeviceSection out;
  CpuDevice dev(std::uint64_t{1} << 20, 1);
  out.device = "the executor's CPU device: Eigen fp32 GEMMs on one pinned core (exec/cpu_device.hpp)";
  // Where validate's workers run each part (measure_rates says why it matters).
  const CorePlan cores = core_plan(dev, true);
  run_on(cores.compute, [&] { measure_kernels(dev, grid, say, out); });
  std::vector<int> any = cores.compute;
  any.insert(any.end(), cores.others.begin(), cores.others.end());
  run_on(cores.others, [&] { measure_host(dev, grid, dirs, any, say, out); });
  return out;
}

namespace {

// Paths compared as the file system resolves them where it can (a run may name a directory
// otherwise than calibrate did).
std::string canonical(const std::string& path) {
  std::error_code ec;
  const auto c = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : c.string();
}

}  // namespace

DeviceRates rates_from_profile(const hardware::CpuDeviceSection& profile, const schedule::StepIR& ir,
                               const std::vector<std::filesystem::path>& storage_dirs, std::string& problem) {
  DeviceRates r;
  std::vector<std::string> missing;
  for (const auto& g : profile.gemm) r.gemm.push_back({g.m, g.n, g.k, g.flops_per_s, layout_of(g.layout)});
  if (r.gemm.empty() && !step_gemms(ir).empty()) missing.push_back("GEMM rates");
  if (const schedule::Op* op = first_attention(ir)) {
    // The device's call for the op (its keys shortened for a causal mask, as the executor runs
    // it), at the measured points nearest in log distance (sim/interpolate.hpp).
    const AttentionCall a = attention_call(*op);
    r.attention_flops_per_s = sim::interpolate(
        profile.attention,
        [&](const hardware::CpuDeviceAttentionSample& s) {
          const double dq = sim::log_gap(static_cast<double>(a.m), static_cast<double>(s.queries));
          const double dk = sim::log_gap(static_cast<double>(a.n), static_cast<double>(s.keys));
          const double dh = sim::log_gap(static_cast<double>(a.k), static_cast<double>(s.head_dim));
          return std::sqrt(dq * dq + dk * dk + dh * dh);
        },
        [](const hardware::CpuDeviceAttentionSample& s) { return s.flops_per_s; }, 0.0);
    if (r.attention_flops_per_s <= 0) missing.push_back("attention rates");
  }
  for (const auto& [name, field] : kScalarRates) {
    // The shape-free rates (the rest come from the points above and the storage rows below).
    if (field == &DeviceRates::gemm_step_flops_per_s || field == &DeviceRates::attention_flops_per_s ||
        field == &DeviceRates::nvme_read_Bps || field == &DeviceRates::nvme_write_Bps)
      continue;
    for (const auto& x : profile.rates)
      if (x.name == name) r.*field = x.value;
    if (r.*field <= 0) missing.push_back(name);
  }
  if (!storage_dirs.empty()) {
    std::vector<std::string> want;
    for (const auto& d : storage_dirs) want.push_back(canonical(d.string()));
    const hardware::CpuDeviceStorageSample* same = nullptr;
    const hardware::CpuDeviceStorageSample* as_many = nullptr;
    for (const auto& s : profile.storage) {
      std::vector<std::string> have;
      for (const auto& p : s.paths) have.push_back(canonical(p));
      if (have == want) same = &s;
      if (!as_many && have.size() == want.size()) as_many = &s;
    }
    if (const auto* s = same ? same : as_many) {
      r.nvme_read_Bps = s->read_Bps;
      r.nvme_write_Bps = s->write_Bps;
    } else {
      missing.push_back(fmt::format("NVMe rates over {} storage director{} (calibrate --storage-dir with them)",
                                    storage_dirs.size(), storage_dirs.size() == 1 ? "y" : "ies"));
    }
  }
  if (!missing.empty()) problem = fmt::format("the profile's cpu_device section lacks {}", fmt::join(missing, ", "));
  return r;
}

}  // namespace ftplan::exec
