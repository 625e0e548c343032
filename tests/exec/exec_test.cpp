// The tiered-offload executor (exec/): it runs the simulator's step IR for real on the CPU device.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "exec/cpu_device.hpp"
#include "exec/cuda_device.hpp"
#include "exec/decoder.hpp"
#include "exec/executor.hpp"
#include "exec/validate.hpp"
#include "inventory/inventory.hpp"
#include "io/catalog_io.hpp"
#include "io/model_io.hpp"
#include "io/scenario_io.hpp"
#include "runtime/uring.hpp"

namespace fs = std::filesystem;
using namespace ftplan;

namespace {

const model::Zoo& zoo() {
  static const model::Zoo z = io::load_zoo(FTPLAN_ZOO_DIR);
  return z;
}
const hardware::Catalog& catalog() {
  static const hardware::Catalog c = io::load_catalog(FTPLAN_ZOO_DIR);
  return c;
}

// This process's own scratch directory under the build tree (O_DIRECT needs a real file system,
// not the tmpfs /tmp may be); removed when the test ends.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& name)
      : path(fs::path(FTPLAN_TEST_SCRATCH) / (name + "-" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  bool empty() const { return fs::is_empty(path); }
};

// The validation matrix scenario (scenarios/validate-local.yaml) with its model made smaller still.
plan::Scenario matrix_scaled(int layers, int hidden, int vocab, int seq_len) {
  plan::Scenario s = io::load_scenario(fs::path(FTPLAN_SOURCE_DIR) / "scenarios/validate-local.yaml", zoo(), catalog());
  exec::Scale scale;
  scale.layers = layers;
  scale.hidden = hidden;
  scale.vocab = vocab;
  scale.seq_len = seq_len;
  s.model = exec::scaled(s.model, scale);
  for (auto& p : s.plans) p.job.seq_len = scale.seq_len;
  return s;
}

// 2 layers, hidden 128, vocab 512, sequence 128 (a step takes tens of milliseconds).
plan::Scenario tiny() { return matrix_scaled(2, 128, 512, 128); }

const plan::Plan& plan_named(const plan::Scenario& s, const std::string& name) {
  for (const auto& p : s.plans)
    if (p.name == name) return p;
  FAIL("no plan " << name);
  return s.plans.front();
}

// `name` run by the executor on a CPU device of 2 GiB with options `o`.
exec::Measured run_with(const plan::Scenario& s, const std::string& name, const exec::Options& o) {
  const plan::Plan p = exec::on_this_machine(plan_named(s, name), exec::DeviceRates{}, 1e15, 1);
  const auto ir = schedule::build_step(s.model, p, inventory::build_inventory(s.model, p, 0));
  exec::CpuDevice device(std::uint64_t{2} << 30, 2 * schedule::kStreams);
  return exec::run(ir, p, device, o);
}

// `steps` steps of `name` run by the executor (with `state`, keeping its on-flash state there).
exec::Measured run_plan(const plan::Scenario& s, const std::string& name, int steps, const fs::path& dir,
                        const fs::path& state = {}, std::function<void(int)> on_state = {}) {
  exec::Options o;
  o.steps = steps;
  o.storage_dirs = {dir};
  o.state_file = state;
  o.on_state_written = std::move(on_state);
  return run_with(s, name, o);
}

// The master weights after `steps` steps of `name` run by the executor.
std::vector<float> master_after(const plan::Scenario& s, const std::string& name, int steps, const fs::path& dir) {
  const exec::Measured m = run_plan(s, name, steps, dir);
  REQUIRE_MESSAGE(m.ok, m.problem);
  return m.master;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Scratch files (the NVMe tier's) in `dir` created by process `pid`.
int scratch_files_of(const fs::path& dir, pid_t pid) {
  int n = 0;
  const std::string prefix = std::string(runtime::kScratchPrefix) + std::to_string(pid) + "-";
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().starts_with(prefix);
  return n;
}

// Runs `steps` steps of `name` in a child process keeping its state in `state`; once the state
// after step `at` is on flash, the child goes on into the next step and the parent sends it
// `signal` 20 ms later. The child never finishes: after step `at` + 1 it waits to be killed.
// Returns the child's pid once it is dead of `signal`.
pid_t kill_midway(const plan::Scenario& s, const std::string& name, int steps, const fs::path& dir,
                  const fs::path& state, int at, int signal) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(fds[0]);
    runtime::remove_scratch_files_on_signal();
    const exec::Measured m = run_plan(s, name, steps, dir, state, [&](int done) {
      if (done == at) {
        const char c = 1;
        (void)!write(fds[1], &c, 1);
      } else if (done > at) {
        for (;;) pause();
      }
    });
    std::fprintf(stderr, "child: %s\n", m.ok ? "finished before it was killed" : m.problem.c_str());
    _exit(1);
  }
  close(fds[1]);
  char c = 0;
  const bool reached = read(fds[0], &c, 1) == 1;  // EOF: the child ended before step `at`
  close(fds[0]);
  if (reached) {
    usleep(20000);
    kill(child, signal);
  }
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(reached);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == signal);
  return child;
}

// The training matrix's model: 4 layers, hidden 64, vocab 128, sequence 32 (2 micro-batches of 2
// sequences a step), and the options that train it. Four layers: with two, equal gradient shares
// happen to hold only what exists when each is copied (Builder::gradient_state).
plan::Scenario training_scenario() { return matrix_scaled(4, 64, 128, 32); }

exec::Measured train(const plan::Scenario& s, const std::string& name, int steps, const fs::path& dir,
                     double learning_rate = 3e-3) {
  exec::Options o;
  o.steps = steps;
  o.storage_dirs = {dir};
  std::string why;
  exec::Training t = exec::training_of(s.model, plan_named(s, name), why);
  REQUIRE_MESSAGE(why.empty(), why);
  t.learning_rate = learning_rate;
  o.train = t;
  return run_with(s, name, o);
}

double mean(const std::vector<double>& v, std::size_t from, std::size_t to) {
  double sum = 0;
  for (std::size_t i = from; i < to; ++i) sum += v[i];
  return sum / static_cast<double>(to - from);
}

}  // namespace

TEST_CASE(
    "a run killed with SIGKILL resumes from its on-flash state: the uninterrupted run's parameters, bit for bit") {
  /* Each run keeps its training state (master weights, Adam moments, step, delayed update's
   * gradients) in a state file written after every step. A child process runs 6 steps and is
   * killed with SIGKILL during step 4 (or just after it); a second run given the same state file
   * resumes after the last step on flash and must end with the parameters of 6 uninterrupted
   * steps. State on the device (no offload), in host DRAM with delayed update, and on NVMe
   * (ZeRO-Infinity: the killed run leaves its NVMe files behind, the next run removes them). */
  const plan::Scenario s = tiny();
  constexpr int kSteps = 6;
  for (const std::string name : {"no offload", "ZeRO-Offload delayed update", "ZeRO-Infinity"}) {
    CAPTURE(name);
    ScratchDir dir("exec-resume"), state_dir("exec-resume-state");
    const fs::path state = state_dir.path / "state";
    const std::vector<float> reference = master_after(s, name, kSteps, dir.path);
    const pid_t killed = kill_midway(s, name, kSteps, dir.path, state, 3, SIGKILL);
    const int saved = exec::state_steps(state);
    CHECK(saved >= 3);
    CHECK(saved < kSteps);
    if (name == "ZeRO-Infinity") CHECK(scratch_files_of(dir.path, killed) > 0);  // SIGKILL cannot be caught
    const exec::Measured resumed = run_plan(s, name, kSteps, dir.path, state);
    REQUIRE_MESSAGE(resumed.ok, resumed.problem);
    CHECK(resumed.first_step == saved);
    CHECK(resumed.step_s.size() == static_cast<std::size_t>(kSteps - saved));
    CHECK(bitwise_equal(resumed.master, reference));
    CHECK(exec::state_steps(state) == kSteps);
    CHECK(dir.empty());
    // A finished state: the same run again starts over (it once refused, "nothing to resume", and
    // printed no result) and ends where the first did; a state of another plan is refused, not used.
    const exec::Measured again = run_plan(s, name, kSteps, dir.path, state);
    REQUIRE_MESSAGE(again.ok, again.problem);
    CHECK(again.first_step == 0);
    CHECK(again.step_s.size() == static_cast<std::size_t>(kSteps));
    CHECK(bitwise_equal(again.master, reference));
    const exec::Measured other = run_plan(s, name == "no offload" ? "ZeRO-Offload" : "no offload", 2, dir.path, state);
    CHECK_FALSE(other.ok);
    CHECK(other.problem.find("another step") != std::string::npos);
  }
}

TEST_CASE("a run stopped by SIGTERM or SIGINT removes its scratch files; a torn state file is refused") {
  const plan::Scenario s = tiny();
  ScratchDir dir("exec-signal"), state_dir("exec-signal-state");
  const fs::path state = state_dir.path / "state";
  for (const int sig : {SIGTERM, SIGINT}) {
    CAPTURE(sig);
    fs::remove(state);
    const pid_t child = kill_midway(s, "ZeRO-Infinity", 6, dir.path, state, 1, sig);
    CHECK(scratch_files_of(dir.path, child) == 0);
  }
  CHECK(dir.empty());
  // A state file cut short (not one write_file_atomically leaves, but a copy gone wrong): an error
  // naming the file.
  REQUIRE(exec::state_steps(state) >= 1);
  fs::resize_file(state, fs::file_size(state) - 4);
  CHECK(exec::state_steps(state) == -1);
  const exec::Measured m = run_plan(s, "ZeRO-Infinity", 6, dir.path, state);
  CHECK_FALSE(m.ok);
  CHECK(m.problem.find(state.string()) != std::string::npos);
}

TEST_CASE("offloaded runs end with the in-memory run's parameters, bit for bit") {
  /* Three steps of the same step sequence, the optimizer state and gradients kept on the device
   * (no offload), in host DRAM (ZeRO-Offload: CPU AdamW), on NVMe (ZeRO-Infinity: parameters and
   * optimizer state swapped through host buffers in chunks), and with activations offloaded to
   * DRAM and NVMe. Gradients are the weight-gradient GEMMs' outputs rounded to bf16, so every
   * placement feeds AdamW the same values: the fp32 master weights must be identical. Also
   * ZeRO-Infinity's optimizer state in sub-groups of 100,000 parameters (7 swaps of 1.6 MB of
   * swap buffer), each read, stepped and written in turn (DeepSpeed's default) and with both swap
   * pipelines, whose chunks take the swap buffers' 3 slots in turn. */
  plan::Scenario s = tiny();
  for (const bool pipelined : {false, true}) {
    plan::Plan p = plan_named(s, "ZeRO-Infinity");
    p.name = pipelined ? "ZeRO-Infinity, pipelined sub-groups" : "ZeRO-Infinity, sub-groups";
    p.offload.chunk_bytes = 1.6e6;
    p.offload.pipeline_read = p.offload.pipeline_write = pipelined;
    p.offload.optimizer_buffer_count = pipelined ? 12 : 4;  // 4 a sub-group in flight
    s.plans.push_back(p);
  }
  ScratchDir dir("exec-equal");
  const std::vector<float> reference = master_after(s, "no offload", 3, dir.path);
  REQUIRE(reference.size() > 100000);
  // The update did something: the weights moved from their first values.
  const std::vector<float> one_step = master_after(s, "no offload", 1, dir.path);
  CHECK_FALSE(bitwise_equal(reference, one_step));
  for (const std::string name :
       {"ZeRO-Offload", "ZeRO-Infinity", "ZeRO-Infinity prefetch 2", "ZeRO-Infinity, sub-groups",
        "ZeRO-Infinity, pipelined sub-groups", "activations to DRAM", "activations to NVMe"}) {
    CAPTURE(name);
    CHECK(bitwise_equal(master_after(s, name, 3, dir.path), reference));
  }
  // The sub-groups went through the IR's swap buffers, not buffers of the executor's own.
  const exec::Measured pipelined = run_plan(s, "ZeRO-Infinity, pipelined sub-groups", 1, dir.path);
  for (const auto& note : pipelined.notes) CHECK(note.find("swap buffers hold") == std::string::npos);
  // ZeRO-Offload's delayed update applies each step's gradients one step late: not the same.
  CHECK_FALSE(bitwise_equal(master_after(s, "ZeRO-Offload delayed update", 3, dir.path), reference));
  // Nothing of the NVMe tier is left behind.
  CHECK(dir.empty());
}

TEST_CASE("offloaded training equals in-memory training: the same losses and parameters, bit for bit") {
  /* Issue 40's "train for real": the compute ops run the decoder (exec/decoder.hpp) on the 16-bit
   * parameters the step put where they read them, the gradients go through the plan's shares and
   * tiers to AdamW, and the updated 16-bit parameters come back where the next step reads them.
   * 20 steps of 2 micro-batches on the synthetic corpus: the loss falls, and ZeRO-Offload (fp32
   * gradients copied to host DRAM layer by layer, CPU AdamW, the updated parameters copied back),
   * ZeRO-Infinity (every layer's, the embedding's and the head's parameters read from flash as
   * the step fetches them, the optimizer state swapped in sub-groups, the updated parameters
   * written back to flash, pages patched where sub-groups split them), ZeRO-3 with parameters and
   * optimizer in host DRAM, activations offloaded to DRAM or NVMe, and activation checkpointing
   * (recompute) give the in-memory run's losses, fp32 master weights and bf16 parameters bit for
   * bit. */
  plan::Scenario s = training_scenario();
  for (const std::string base : {"no offload", "ZeRO-Offload", "ZeRO-Infinity"}) {
    plan::Plan p = plan_named(s, base);
    p.name = base + ", recompute";
    p.job.checkpointing = plan::Checkpointing::full;
    s.plans.push_back(p);
  }
  {
    // Sub-groups of 10,000 parameters: chunk boundaries inside flash pages (read, patched, written).
    plan::Plan p = plan_named(s, "ZeRO-Infinity");
    p.name = "ZeRO-Infinity, pipelined sub-groups";
    p.offload.chunk_bytes = 1.6e5;
    p.offload.pipeline_read = p.offload.pipeline_write = true;
    p.offload.optimizer_buffer_count = 12;  // 4 a sub-group in flight
    s.plans.push_back(p);
    // ZeRO-3 with the parameters and optimizer in host DRAM (offload_param and offload_optimizer: cpu).
    p = plan_named(s, "ZeRO-Infinity");
    p.name = "ZeRO-3, parameters in DRAM";
    p.offload.params = p.offload.optimizer = p.offload.optimizer_step = plan::Tier::cpu;
    s.plans.push_back(p);
  }
  ScratchDir dir("exec-train");
  const exec::Measured reference = train(s, "no offload", 20, dir.path);
  REQUIRE_MESSAGE(reference.ok, reference.problem);
  REQUIRE(reference.losses.size() == 20);
  REQUIRE(reference.weights16.size() == reference.master.size());
  MESSAGE("losses: first ", reference.losses.front(), ", step 10 ", reference.losses[9], ", last ",
          reference.losses.back());
  CHECK(reference.losses.front() == doctest::Approx(std::log(128.0)).epsilon(0.1));  // a uniform guess first
  CHECK(mean(reference.losses, 15, 20) < 0.9 * mean(reference.losses, 0, 5));
  for (const std::string name :
       {"ZeRO-Offload", "ZeRO-Infinity", "ZeRO-Infinity prefetch 2", "ZeRO-Infinity, pipelined sub-groups",
        "ZeRO-3, parameters in DRAM", "activations to DRAM", "activations to NVMe", "no offload, recompute",
        "ZeRO-Offload, recompute", "ZeRO-Infinity, recompute"}) {
    CAPTURE(name);
    const exec::Measured m = train(s, name, 20, dir.path);
    REQUIRE_MESSAGE(m.ok, m.problem);
    CHECK(m.losses == reference.losses);
    CHECK(bitwise_equal(m.master, reference.master));
    CHECK(m.weights16 == reference.weights16);
  }
  // Stopped after step 12 and resumed from its on-flash state (master weights, moments, step):
  // the 16-bit parameters come back from the master weights and the corpus from the step, so the
  // last 8 losses and the parameters are the uninterrupted run's.
  {
    const fs::path state = dir.path / "train.state";
    exec::Options o;
    o.storage_dirs = {dir.path};
    o.state_file = state;
    std::string why;
    o.train = exec::training_of(s.model, plan_named(s, "ZeRO-Infinity"), why);
    o.train->learning_rate = 3e-3;
    o.steps = 12;
    REQUIRE(run_with(s, "ZeRO-Infinity", o).ok);
    o.steps = 20;
    const exec::Measured resumed = run_with(s, "ZeRO-Infinity", o);
    REQUIRE_MESSAGE(resumed.ok, resumed.problem);
    CHECK(resumed.first_step == 12);
    CHECK(resumed.losses == std::vector<double>(reference.losses.begin() + 12, reference.losses.end()));
    CHECK(bitwise_equal(resumed.master, reference.master));
    CHECK(resumed.weights16 == reference.weights16);
    fs::remove(state);
  }
  // `validate --train`: the same training through the verb, its losses reported.
  exec::ValidateOptions vo;
  vo.steps = 3;
  vo.storage_dirs = {dir.path};
  vo.train = true;
  vo.learning_rate = 3e-3;
  vo.probe_between_steps = false;
  const exec::Validation v = exec::validate(s.model, plan_named(s, "ZeRO-Offload"), vo);
  REQUIRE_MESSAGE(v.ok, v.problem);
  CHECK(v.measured.losses == std::vector<double>(reference.losses.begin(), reference.losses.begin() + 3));
  // What the binding does not train, it says.
  const exec::Measured delayed = train(s, "ZeRO-Offload delayed update", 1, dir.path);
  CHECK_FALSE(delayed.ok);
  CHECK(delayed.problem.find("delayed update") != std::string::npos);
  CHECK(dir.empty());
}

TEST_CASE("LoRA trains through the tiers too: adapters on all seven projections, the base frozen") {
  /* PEFT's LoRA (rank 4, alpha 8) on q, k, v, o, gate, up and down: the compute reads the frozen
   * bf16 base where the step keeps it and the adapters on the device; only the adapters' gradients
   * go through the shares to AdamW. ZeRO-Offload, activations to NVMe and recompute give the
   * in-memory run's losses, adapters and master weights bit for bit; ZeRO-Infinity, whose step
   * keeps the adapters on flash and fetches them nowhere, is refused with that said. */
  plan::Scenario s = training_scenario();
  for (auto& p : s.plans) {
    p.job.method = plan::Method::lora;
    p.job.lora.rank = 4;
    p.job.lora.alpha = 8;
    p.job.lora.targets = {"q", "k", "v", "o", "gate", "up", "down"};
  }
  {
    plan::Plan p = plan_named(s, "ZeRO-Offload");
    p.name = "ZeRO-Offload, recompute";
    p.job.checkpointing = plan::Checkpointing::full;
    s.plans.push_back(p);
  }
  ScratchDir dir("exec-train-lora");
  const exec::Measured reference = train(s, "no offload", 20, dir.path, 1e-2);
  REQUIRE_MESSAGE(reference.ok, reference.problem);
  REQUIRE(reference.losses.size() == 20);
  MESSAGE("LoRA losses: first ", reference.losses.front(), ", last ", reference.losses.back());
  CHECK(mean(reference.losses, 15, 20) < 0.95 * mean(reference.losses, 0, 5));
  const std::string why_not = "fetches them nowhere";
  for (const std::string name : {"ZeRO-Offload", "activations to NVMe", "ZeRO-Offload, recompute"}) {
    CAPTURE(name);
    const exec::Measured m = train(s, name, 20, dir.path, 1e-2);
    REQUIRE_MESSAGE(m.ok, m.problem);
    CHECK(m.losses == reference.losses);
    CHECK(bitwise_equal(m.master, reference.master));
    CHECK(m.weights16 == reference.weights16);
  }
  const exec::Measured infinity = train(s, "ZeRO-Infinity", 1, dir.path);
  CHECK_FALSE(infinity.ok);
  CHECK(infinity.problem.find(why_not) != std::string::npos);
  CHECK(dir.empty());
}

TEST_CASE("a seconds-long validate of a tiny model on the CPU device") {
  /* ZeRO-Infinity on one storage directory: every byte the IR copies is counted on the link the
   * simulator puts it on, so the byte counts agree exactly; the device's high-water mark is the
   * simulated pool's (the same allocations in the same order on the compute stream); the step time
   * agrees within a loose factor (this machine is shared and small: timing is not what this test
   * is about, see docs/validation.md). */
  const plan::Scenario s = tiny();
  ScratchDir dir("exec-validate");
  exec::ValidateOptions o;
  o.steps = 2;
  o.storage_dirs = {dir.path};
  const exec::Validation v = exec::validate(s.model, plan_named(s, "ZeRO-Infinity"), o);
  REQUIRE_MESSAGE(v.ok, v.problem);
  int compared = 0;
  for (const auto& l : v.links) {
    CAPTURE(l.name);
    CHECK(l.measured_bytes == l.simulated_bytes);
    if (l.name.starts_with("nvme") || l.name == sim::to_string(sim::HostLink::pcie_h2d) ||
        l.name == sim::to_string(sim::HostLink::pcie_d2h))
      compared += l.measured_bytes > 0;
  }
  CHECK(compared == 4);  // pcie h2d, pcie d2h, nvme read, nvme write all carried bytes
  // CPU AdamW's bytes (28 per parameter) on the host cores and host DRAM, on both sides.
  for (const std::string name : {"host cpu (share)", "host dram (share)"})
    CHECK(std::any_of(v.links.begin(), v.links.end(), [&](const exec::LinkRow& l) {
      return l.name == name && l.measured_bytes > 0 && l.measured_bytes == l.simulated_bytes;
    }));
  CHECK(v.measured_device_peak_bytes == doctest::Approx(v.simulated_device_peak_bytes).epsilon(0.02));
  CHECK(v.measured_nvme_peak_bytes == doctest::Approx(v.simulated_nvme_peak_bytes).epsilon(0.02));
  // The host tier holds what the IR allocates there, the optimizer's swap buffers included.
  CHECK(v.measured_host_peak_bytes == doctest::Approx(v.simulated_host_peak_bytes).epsilon(0.001));
  // Within 10x either way: what catches a unit or a missing op (1000x, 2x a stream's work shows in
  // the matrix, not here). The rates are probed between steps, so load that comes and goes
  // between a probe and the step it times moves the ratio: 4x was exceeded at load 6 (0.403 s
  // measured against 0.0996 s simulated, this test run beside a CI run and two builds).
  CHECK(v.measured_step_time_s > v.simulated_step_time_s / 10);
  CHECK(v.measured_step_time_s < v.simulated_step_time_s * 10);
  // Each stream's CPU time: its one worker thread's, inside its ops, so never more than the ops'
  // wall time (1 us per op of clock reading slack); the compute stream's GEMMs take CPU.
  REQUIRE(!v.streams.empty());
  for (const auto& st : v.streams) {
    CAPTURE(st.name);
    CHECK(st.measured_cpu_s <= st.measured_busy_s + 1e-3);
    if (st.name == "compute") CHECK(st.measured_cpu_s > 0);
  }
  // The rates: probed before the first step and after each, the median of the two probes that
  // bracket the timed step 2 simulated, and the step simulated at each of them.
  REQUIRE(v.rate_samples.size() == 3);
  CHECK(v.first_sample_used == 1);
  CHECK(v.sample_simulated_step_s.size() == 2);
  CHECK(v.rates.nvme_read_Bps ==
        doctest::Approx((v.rate_samples[1].nvme_read_Bps + v.rate_samples[2].nvme_read_Bps) / 2));
  CHECK(v.rates.gemm_step_flops_per_s > 0);
  CHECK(v.drift.drifted == (v.drift.drift_pct > 10));
  CHECK(dir.empty());
}

TEST_CASE("rate samples: the simulation takes each rate's median, and a run whose rates moved is flagged") {
  /* Three probes of one GEMM shape at 10, 30 and 20 GFLOP/s and NVMe reads at 1, 3, 2 GB/s: the
   * middle figure is each median; min and max are reported beside it, spread (3 - 1) / 2 = 100%.
   * A rate no probe measured (NVMe writes here: 0) is not reported.                           */
  std::vector<exec::DeviceRates> samples(3);
  const double gemm[] = {10e9, 30e9, 20e9}, read[] = {1e9, 3e9, 2e9};
  for (int i = 0; i < 3; ++i) {
    samples[i].gemm.push_back({64, 1024, 1024, gemm[i], sim::Efficiency::Layout::nn});
    samples[i].nvme_read_Bps = read[i];
    samples[i].dram_Bps = 8e9;
  }
  const exec::DeviceRates m = exec::median_rates(samples);
  CHECK(m.gemm.at(0).flops_per_s == doctest::Approx(20e9));
  CHECK(m.nvme_read_Bps == doctest::Approx(2e9));
  CHECK(m.dram_Bps == doctest::Approx(8e9));
  const auto spreads = exec::rate_spreads(samples);
  const auto nvme =
      std::find_if(spreads.begin(), spreads.end(), [](const auto& r) { return r.name == "nvme_read_Bps"; });
  REQUIRE(nvme != spreads.end());
  CHECK(nvme->min == doctest::Approx(1e9));
  CHECK(nvme->median == doctest::Approx(2e9));
  CHECK(nvme->max == doctest::Approx(3e9));
  CHECK(nvme->spread_pct() == doctest::Approx(100));
  CHECK(std::none_of(spreads.begin(), spreads.end(), [](const auto& r) { return r.name == "nvme_write_Bps"; }));
  /* Drift: the step simulated at the samples takes 1.00, 1.05 and 1.20 s; (1.20 - 1.00) / 1.05 =
   * 19.0% > 10%: drifted. The timed steps 1.08, 1.10, 1.13 s: median 1.10 s, against which the
   * error spans -9.1% to +9.1%; they spread (1.13 - 1.08) / 1.10 = 4.5%.
   * 1.00, 1.02, 1.05 s: 4.9%, not drifted. One sample: 0%.                                    */
  const exec::Drift d = exec::judge_drift({1.00, 1.05, 1.20}, {1.13, 1.08, 1.10}, 10);
  CHECK(d.drift_pct == doctest::Approx(19.048).epsilon(1e-3));
  CHECK(d.drifted);
  CHECK(d.min_error_pct == doctest::Approx(-9.091).epsilon(1e-3));
  CHECK(d.max_error_pct == doctest::Approx(9.091).epsilon(1e-3));
  CHECK(d.measured_spread_pct == doctest::Approx(4.545).epsilon(1e-3));
  const exec::Drift calm = exec::judge_drift({1.00, 1.02, 1.05}, {1.02}, 10);
  CHECK(calm.drift_pct == doctest::Approx(4.902).epsilon(1e-3));
  CHECK_FALSE(calm.drifted);
  CHECK(calm.measured_spread_pct == 0);
  CHECK(exec::judge_drift({1.0}, {1.0}, 10).drift_pct == 0);
}

TEST_CASE("the executor calls after_step between steps, outside their timing") {
  /* after_step sleeps after each of 2 steps of a tiny model: it is called twice, with 1 and 2
   * steps done, and no step's wall time holds the sleep. The sleep is 3x the slowest step of the
   * same run without it (at least 0.6 s), so a step is told from step + sleep on any machine:
   * tens of ms in a release build, over a second under ASan on a loaded CI core.               */
  exec::Options o;
  o.steps = 2;
  const exec::Measured plain = run_with(tiny(), "no offload", o);
  REQUIRE_MESSAGE(plain.ok, plain.problem);
  REQUIRE(plain.step_s.size() == 2);
  const double sleep_s = std::max(0.6, 3 * *std::max_element(plain.step_s.begin(), plain.step_s.end()));
  std::vector<int> calls;
  o.after_step = [&](int done, const exec::TierRates*) {
    calls.push_back(done);
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
  };
  const exec::Measured m = run_with(tiny(), "no offload", o);
  REQUIRE_MESSAGE(m.ok, m.problem);
  CHECK(calls == std::vector<int>{1, 2});
  REQUIRE(m.step_s.size() == 2);
  for (const double t : m.step_s) CHECK(t < sleep_s);
}

TEST_CASE("probe_tier times the NVMe tier's own files between steps and leaves the training state as it was") {
  /* ZeRO-Infinity keeps parameters and optimizer state on NVMe: after each of 3 steps the
   * executor reads its tier's extents and writes the same bytes back, timing both, and hands the
   * rates to after_step. The parameters after 3 steps are those of the run without the probe,
   * bit for bit. */
  const plan::Scenario s = tiny();
  ScratchDir dir("exec-tier-probe");
  exec::Options o;
  o.steps = 3;
  o.storage_dirs = {dir.path};
  o.probe_tier = true;
  std::vector<exec::TierRates> seen;
  o.after_step = [&](int, const exec::TierRates* tier) {
    REQUIRE(tier);
    seen.push_back(*tier);
  };
  const exec::Measured probed = run_with(s, "ZeRO-Infinity", o);
  REQUIRE_MESSAGE(probed.ok, probed.problem);
  REQUIRE(seen.size() == 3);
  for (const auto& t : seen) {
    CHECK(t.bytes > 0);
    CHECK(t.bytes <= probed.nvme_peak_bytes);
    CHECK(t.read_Bps > 0);
    CHECK(t.write_Bps > 0);
  }
  CHECK(bitwise_equal(probed.master, master_after(s, "ZeRO-Infinity", 3, dir.path)));
  // Without an NVMe tier there is nothing to time.
  bool called = false;
  o.after_step = [&](int, const exec::TierRates* tier) {
    called = true;
    CHECK(tier == nullptr);
  };
  CHECK(run_with(s, "no offload", o).ok);
  CHECK(called);
}

TEST_CASE("on the CPU device the compute stream's worker has a core to itself") {
  /* Options::pin_compute: with two or more cores, the compute worker runs on the first allowed
   * core and every other worker (copies, CPU AdamW) on the rest, as a GPU's SMs are apart from
   * its copy engines: no op of another stream ends on the compute core, and the compute ops all
   * end on one core. */
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  if (CPU_COUNT(&set) < 2) {
    MESSAGE("one core: nothing to pin");
    return;
  }
  const plan::Scenario s = tiny();
  ScratchDir dir("exec-pin");
  const plan::Plan p = exec::on_this_machine(plan_named(s, "ZeRO-Offload"), exec::DeviceRates{}, 1e15, 1);
  const auto ir = schedule::build_step(s.model, p, inventory::build_inventory(s.model, p, 0));
  exec::CpuDevice device(std::uint64_t{2} << 30, 2 * schedule::kStreams);
  exec::Options o;
  o.steps = 2;
  const exec::Measured m = exec::run(ir, p, device, o);
  REQUIRE_MESSAGE(m.ok, m.problem);
  std::set<int> compute, others;
  for (const auto& r : m.ops) {
    if (r.op < 0 || r.core < 0) continue;
    (ir.ops[static_cast<std::size_t>(r.op)].stream == schedule::Stream::compute ? compute : others).insert(r.core);
  }
  REQUIRE(!others.empty());  // copies and CPU AdamW ran
  CHECK(compute.size() == 1);
  for (const int c : compute) CHECK(others.count(c) == 0);
  CHECK(std::any_of(m.notes.begin(), m.notes.end(),
                    [](const std::string& n) { return n.find("ran alone on core") != std::string::npos; }));
}

TEST_CASE("the NVMe tier's requests stripe its address space round-robin over the directories' files") {
  /* Two files, stripe 1 MiB, pieces of at most 1 MiB. [1.5, 3.5) MiB of the address space:
   * stripe 1 (file 1, at 0) from 0.5 MiB: 0.5 MiB at file 1's 0.5 MiB; stripe 2 (file 0, its
   * second stripe): 1 MiB at file 0's 1 MiB; stripe 3 (file 1, its second): 0.5 MiB at 1 MiB.
   * validate times the directories with these requests (the executor's own). */
  ScratchDir dir("exec-stripes");
  fs::create_directories(dir.path / "a");
  fs::create_directories(dir.path / "b");
  runtime::ScratchFile f0(dir.path / "a", 4 << 20), f1(dir.path / "b", 4 << 20);
  constexpr std::uint64_t kMiB = 1 << 20;
  std::vector<std::byte> buffer(2 * kMiB);
  const auto r = runtime::striped_requests({&f0, &f1}, kMiB, 3 * kMiB / 2, buffer.data(), 2 * kMiB, true, 1 << 20);
  REQUIRE(r.size() == 3);
  CHECK(r[0].fd == f1.fd());
  CHECK(r[0].offset == kMiB / 2);
  CHECK(r[0].bytes == kMiB / 2);
  CHECK(r[0].buffer == buffer.data());
  CHECK(r[1].fd == f0.fd());
  CHECK(r[1].offset == kMiB);
  CHECK(r[1].bytes == kMiB);
  CHECK(r[1].buffer == buffer.data() + kMiB / 2);
  CHECK(r[2].fd == f1.fd());
  CHECK(r[2].offset == kMiB);
  CHECK(r[2].bytes == kMiB / 2);
  CHECK(r[2].write);
  // Pieces no larger than the block: 256 KiB blocks split the 1 MiB stripe in four.
  CHECK(runtime::striped_requests({&f0, &f1}, kMiB, 0, buffer.data(), kMiB, false, 256 << 10).size() == 4);
}

TEST_CASE("the executor runs every example scenario's IR: every op once, on its stream, in issue order") {
  /* The executor's workers take the IR's ops stream by stream in issue order and start each when
   * its deps are done; the simulator lowers the same IR. For every plan of every example
   * scenario (one micro-batch, stage 0), the workers' lists hold each op exactly once, on its own
   * stream, in issue order, and the symbolic run of the workers takes every op (no wait forever). */
  int plans = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(FTPLAN_SOURCE_DIR) / "scenarios")) {
    if (entry.path().extension() != ".yaml" || entry.path().filename().string().starts_with("sweep")) continue;
    const plan::Scenario s = io::load_scenario(entry.path(), zoo(), catalog());
    for (const auto& p : s.plans) {
      CAPTURE(entry.path().filename().string());
      CAPTURE(p.name);
      const auto ir = schedule::build_step(s.model, p, inventory::build_inventory(s.model, p, 0), 1, true);
      const auto order = exec::stream_order(ir);
      std::vector<int> seen(ir.ops.size(), 0);
      for (std::size_t st = 0; st < order.size(); ++st)
        for (std::size_t j = 0; j < order[st].size(); ++j) {
          const std::size_t i = order[st][j];
          ++seen[i];
          CHECK(static_cast<std::size_t>(ir.ops[i].stream) == st);
          if (j > 0) CHECK(order[st][j - 1] < i);
        }
      CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(ir.ops.size()));
      const std::string why = exec::schedulable(ir);
      CHECK_MESSAGE(why.empty(), why);
      ++plans;
    }
  }
  CHECK(plans >= 10);
}

TEST_CASE("a step whose deps wait on a later op of their own stream is reported, not run") {
  /* Two ops on the compute stream, the first waiting on the second: in-order workers would wait
   * forever. */
  schedule::StepIR ir;
  ir.ops.resize(2);
  ir.ops[0].deps = {1};
  CHECK(exec::schedulable(ir).find("waits forever") != std::string::npos);
}

TEST_CASE("an op that may touch a tensor before its allocation, or after its free, is a race") {
  /* A tensor allocated on the compute stream and read by a copy on the h2d stream: without a
   * dep from the copy to the allocation the two streams may run them in either order, though
   * the copy comes later in issue order (what schedule::dry_run checks). With the dep: no race;
   * then a free on the compute stream that does not wait for the copy is one. */
  schedule::StepIR ir;
  ir.tensors.resize(1);
  ir.tensors[0].name = "x";
  ir.ops.resize(3);
  ir.ops[0].kind = schedule::OpKind::alloc;
  ir.ops[0].tensor = 0;
  ir.ops[1].kind = schedule::OpKind::copy;
  ir.ops[1].stream = schedule::Stream::h2d;
  ir.ops[1].reads = {0};
  ir.ops[2].kind = schedule::OpKind::free;
  ir.ops[2].tensor = 0;
  ir.ops[2].deps = {1};
  CHECK(exec::schedulable(ir).find("before op 0") != std::string::npos);
  ir.ops[1].deps = {0};
  CHECK(exec::schedulable(ir) == "");
  ir.ops[2].deps.clear();
  CHECK(exec::schedulable(ir).find("frees x while op 1") != std::string::npos);
}

TEST_CASE("--scale keeps the head dimension and the ratios, and rejects what it cannot read") {
  const exec::Scale s = exec::parse_scale("layers=2,hidden=256");
  const model::ModelSpec* m8b = zoo().find("llama-3.1-8b");  // hidden 4096, 32 heads of 128, 8 kv heads, ffn 14336
  REQUIRE(m8b);
  const model::ModelSpec& m = *m8b;
  const model::ModelSpec t = exec::scaled(m, s);
  CHECK(t.layers == 2);
  CHECK(t.hidden == 256);
  CHECK(t.head_dim == 128);
  CHECK(t.heads == 2);
  CHECK(t.kv_heads == 1);  // heads : kv heads stays 4 : 1 where it can, at least one
  CHECK(t.ffn == 896);     // 14336 x 256 / 4096
  CHECK_THROWS_AS(exec::parse_scale("layers=two"), ftplan::UsageError);
  CHECK_THROWS_AS(exec::parse_scale("depth=2"), ftplan::UsageError);
  CHECK_THROWS_AS(exec::parse_scale("hidden=0"), ftplan::UsageError);
}

TEST_CASE("cluster: {node: local} is this machine from its calibration profile") {
  /* validate adds the node "local" to the catalog from a calibration profile: the host's cores,
   * threads and DRAM are the profile's, its drives one per storage directory, its GPU the CPU
   * device. A plan on it keeps that host when validate puts it on this machine (a catalog node's
   * host DRAM becomes this machine's instead). Without the node (any other verb) the reader says
   * what 'local' is, at the line of the key. */
  hardware::CalibrationProfile profile;
  profile.machine.hostname = "test-box";
  profile.machine.cpu.model = "Test CPU";
  profile.machine.cpu.sockets = 1;
  profile.machine.cpu.cores = 6;
  profile.machine.cpu.threads = 12;
  profile.machine.cpu.dram_bytes = 24.0 * (1ull << 30);
  hardware::DramSample triad;
  triad.bandwidth_Bps = 40e9;
  profile.cpu.dram.push_back(triad);
  const hardware::Catalog local = exec::with_local_node(catalog(), profile, 2);
  const std::string text = R"(schema_version: 1
name: local
model: {zoo: llama-3.2-1b}
job: {method: full, seq_len: 128, micro_batch: 1, global_batch: 1, tokens: 1M, precision: bf16-mixed, framework: deepspeed}
plans:
  - name: here
    cluster: {node: local}
    offload: {preset: zero-infinity}
    parallel: {zero: 3}
)";
  const plan::Scenario s = io::parse_scenario(text, "local.yaml", ".", zoo(), local);
  REQUIRE(s.plans.size() == 1);
  const plan::Cluster& c = s.plans[0].cluster;
  CHECK(c.node.name == "local");
  CHECK(c.host.cores() == 6);
  CHECK(c.host.threads_per_core == 2);
  CHECK(c.host.dram_bytes == profile.machine.cpu.dram_bytes);
  CHECK(c.host.dram_bandwidth_Bps() == doctest::Approx(40e9));
  CHECK(c.gpu.name == "cpu-device");
  REQUIRE(c.drives.size() == 1);
  CHECK(c.drives[0].second == 2);
  const plan::Plan here = exec::on_this_machine(s.plans[0], exec::DeviceRates{}, 1e15, 2);
  CHECK(here.cluster.host.dram_bytes == profile.machine.cpu.dram_bytes);
  const plan::Plan there = exec::on_this_machine(plan_named(tiny(), "no offload"), exec::DeviceRates{}, 1e15, 0);
  CHECK(there.cluster.host.dram_bytes ==
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE)));
  std::string error;
  try {
    io::parse_scenario(text, "local.yaml", ".", zoo(), catalog());
  } catch (const std::exception& e) {
    error = e.what();
  }
  CHECK_MESSAGE(error.find("local.yaml:7") != std::string::npos, error);
  CHECK_MESSAGE(error.find("cluster.node") != std::string::npos, error);
  CHECK_MESSAGE(error.find("only `ftplan validate`") != std::string::npos, error);
}

// The step IR validate runs for `name` (on this machine, one storage directory).
schedule::StepIR ir_of(const plan::Scenario& s, const std::string& name) {
  const plan::Plan p = exec::on_this_machine(plan_named(s, name), exec::DeviceRates{}, 1e15, 1);
  return schedule::build_step(s.model, p, inventory::build_inventory(s.model, p, 0));
}

TEST_CASE(
    "a profile's CPU device rates as a step reads them: every GEMM point, attention at its shape, storage by "
    "directories") {
  const plan::Scenario s = tiny();
  const schedule::StepIR ir = ir_of(s, "ZeRO-Infinity");
  const schedule::Op* attention = nullptr;
  for (const auto& op : ir.ops)
    if (op.kind == schedule::OpKind::attention && op.flops > 0 && !attention) attention = &op;
  REQUIRE(attention);
  const exec::AttentionCall a = exec::attention_call(*attention);
  hardware::CpuDeviceSection d;
  d.gemm = {
      {"nn", 256, 128, 128, 3e10, {3e10}}, {"nt", 256, 128, 384, 2e10, {2e10}}, {"tn", 128, 128, 256, 1e10, {1e10}}};
  // One point at the step's own attention shape, one far from it: the first is the rate.
  d.attention = {{a.m, a.n, a.k, 2.5e10, {2.5e10}}, {a.m * 16, a.n * 16, a.k * 2, 4e10, {4e10}}};
  d.rates = {{"memory_Bps", 4e10, {4e10}},
             {"copy_Bps", 2e10, {2e10}},
             {"dram_Bps", 3e10, {3e10}},
             {"adam_params_per_s", 1e9, {1e9}}};
  d.storage = {{{"/nowhere/a"}, 1 << 20, 1 << 20, 8, 5e9, 6e9, {5e9}, {6e9}},
               {{"/nowhere/b"}, 1 << 20, 1 << 20, 8, 7e9, 8e9, {7e9}, {8e9}},
               {{"/nowhere/a", "/nowhere/b"}, 1 << 20, 1 << 20, 8, 9e9, 9.5e9, {9e9}, {9.5e9}}};
  std::string problem;
  exec::DeviceRates r = exec::rates_from_profile(d, ir, {"/nowhere/b"}, problem);
  CHECK_MESSAGE(problem.empty(), problem);
  REQUIRE(r.gemm.size() == 3);
  CHECK(r.gemm[1].layout == sim::Efficiency::Layout::nt);
  CHECK(r.gemm[1].k == 384);
  CHECK(r.attention_flops_per_s == 2.5e10);
  CHECK(r.memory_Bps == 4e10);
  CHECK(r.adam_params_per_s == 1e9);
  // The row of the same directory, not the first of as many.
  CHECK(r.nvme_read_Bps == 7e9);
  CHECK(r.nvme_write_Bps == 8e9);
  r = exec::rates_from_profile(d, ir, {"/nowhere/b", "/nowhere/a"}, problem);
  CHECK(r.nvme_read_Bps == 9e9);  // as many directories (the order differs)
  // What a step needs and the profile lacks is named, never taken as zero.
  d.storage.pop_back();
  d.rates.pop_back();
  problem.clear();
  exec::rates_from_profile(d, ir, {"/nowhere/a", "/nowhere/b"}, problem);
  CHECK_MESSAGE(problem.find("adam_params_per_s") != std::string::npos, problem);
  CHECK_MESSAGE(problem.find("NVMe rates over 2 storage directories") != std::string::npos, problem);
}

TEST_CASE("validate predicts from a profile measured apart from the run and probes nothing of the run") {
  /* The profile is measured first (a small grid, seconds), then the run: the simulation's rates are
   * the profile's, no in-run probe runs, and the comparison still holds its exact checks (bytes per
   * link, device peak). With in_run_rates the probes run too and their simulation sits beside. */
  const plan::Scenario s = tiny();
  ScratchDir dir("exec-validate-profile");
  exec::DeviceGrid grid;
  grid.m = {64, 256};
  grid.nk = {128, 512};
  grid.cold_calls = 1;
  grid.attention_seq = {64, 128};
  grid.attention_head_dim = {64};
  const hardware::CpuDeviceSection profile = exec::measure_cpu_device(grid, {dir.path});
  REQUIRE(profile.gemm.size() == 2 * 2 * 2 * 3);
  REQUIRE(profile.storage.size() == 1);
  exec::ValidateOptions o;
  o.steps = 2;
  o.storage_dirs = {dir.path};
  o.profile = &profile;
  exec::Validation v = exec::validate(s.model, plan_named(s, "ZeRO-Infinity"), o);
  REQUIRE_MESSAGE(v.ok, v.problem);
  CHECK(v.rates_from == "profile");
  CHECK(v.rate_samples.empty());
  CHECK(v.in_run_simulated_step_time_s == 0);
  CHECK(v.rates.nvme_read_Bps == profile.storage[0].read_Bps);
  // What moved, counted where it moved (copy calls, NVMe requests rounded up to the I/O alignment)
  // and by the kernel's block-I/O counters, is what the simulator charged each link: the gradients'
  // device-to-host copy included (fp32, every parameter's share: it was 2.5x off before).
  int counted = 0;
  for (const auto& l : v.links) {
    CAPTURE(l.name);
    CHECK(l.measured_bytes == l.simulated_bytes);
    if (l.counted_bytes >= 0) {
      ++counted;
      CHECK(l.counted_bytes == doctest::Approx(l.simulated_bytes).epsilon(0.01));
    }
    if (l.block_bytes >= 0) CHECK(l.block_bytes == doctest::Approx(l.simulated_bytes).epsilon(0.01));
  }
  CHECK(counted == 4);  // pcie h2d and d2h, nvme read and write
  CHECK(v.measured_device_peak_bytes == doctest::Approx(v.simulated_device_peak_bytes).epsilon(0.02));
  CHECK(v.measured_step_time_s > v.simulated_step_time_s / 10);
  CHECK(v.measured_step_time_s < v.simulated_step_time_s * 10);
  o.in_run_rates = true;
  v = exec::validate(s.model, plan_named(s, "ZeRO-Infinity"), o);
  REQUIRE_MESSAGE(v.ok, v.problem);
  CHECK(v.rates_from == "profile");
  CHECK(v.rate_samples.size() == 3);
  CHECK(v.in_run_simulated_step_time_s > 0);
  CHECK(v.rates.nvme_read_Bps == profile.storage[0].read_Bps);  // the prediction's rates stay the profile's
  // The offload overhead (step beyond the compute stream) on both sides: ZeRO-Infinity's flash and
  // copies add to the step.
  CHECK(v.simulated_overhead_s > 0);
  CHECK(v.measured_overhead_s > 0);
  CHECK(v.measured_overhead_s < v.measured_step_time_s);
  // The device spot-checked its products as it ran them, all right.
  CHECK(v.work.checked > 100);
  CHECK(v.work.wrong == 0);
  CHECK(dir.empty());
}

TEST_CASE("the CPU device's work check recomputes entries of every kind of product, and only when asked") {
  exec::CpuDevice device(std::uint64_t{1} << 20, 1);
  device.gemm(0, exec::GemmCall{64, 96, 80, false, false, 1, true});
  CHECK(device.work_check().checked == 0);
  device.check_work(true);
  device.gemm(0, exec::GemmCall{64, 96, 80, false, false, 1, true});     // C = A B
  device.gemm(0, exec::GemmCall{64, 96, 80, true, true, 1, true});       // dA and dB
  device.gemm(0, exec::GemmCall{2048, 16, 4096, true, true, 1, false});  // dB alone, long sums
  device.attention(0, 128, 128, 64, 2);                                  // S and O, twice
  const exec::WorkCheck w = device.work_check();
  CHECK(w.checked == 2 * (1 + 2 + 1 + 2 * 2));
  CHECK_MESSAGE(w.wrong == 0, w.first_wrong);
}

TEST_CASE("--device cuda without a usable GPU is a clear problem, not a crash") {
  /* Built without CUDA: "built without CUDA"; built with it on a machine without a GPU: "no CUDA
   * device found". Either way the plan is not validated and the result says why. (With a GPU,
   * calibrate/run-on-gpu.sh runs the matrix on the CUDA device.) */
  exec::ValidateOptions o;
  o.steps = 1;
  o.cuda = true;
  std::string why;
  if (exec::make_cuda_device(std::uint64_t{64} << 20, 1, why)) return;  // a GPU is here
  const plan::Scenario s = tiny();
  const exec::Validation v = exec::validate(s.model, plan_named(s, "no offload"), o);
  CHECK_FALSE(v.ok);
  CHECK_MESSAGE(v.problem.find("CUDA") != std::string::npos, v.problem);
}
