// Tiered-memory plans against the published offload results (hardware-figures.md, "Published
// offload results"): the orderings and bounds the physics gives.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "footprint/footprint.hpp"
#include "inventory/inventory.hpp"
#include "io/profile_io.hpp"
#include "io/scenario_io.hpp"
#include "planner/planner.hpp"
#include "schedule/step_ir.hpp"
#include "sim/lowering.hpp"  // detail::topology_of: the copies' path
#include "sim/simulate.hpp"
#include "test_support.hpp"

using namespace ftplan;

namespace {

plan::Scenario parse(const std::string& text) {
  return io::parse_scenario(text, "tiered_test.yaml", test::data_dir(), test::zoo(), test::catalog());
}

// A GPT-2-style model of `layers` x `hidden` (12 L h^2 parameters), as in the ZeRO-Offload paper's scans.
std::string gpt(int layers, int hidden) {
  return fmt::format(
      "model:\n  name: gpt-{}x{}\n  hidden: {}\n  layers: {}\n  heads: {}\n  ffn: {}\n  ffn_kind: gelu\n  vocab: "
      "50257\n"
      "  tied_embeddings: true\n  norm: layernorm\n  bias: all\n  positional: learned\n  max_context: 1024\n",
      layers, hidden, hidden, layers, hidden / 128, 4 * hidden);
}

const char* kJob =
    "job: {seq_len: 1024, micro_batch: 1, tokens: 10M, precision: fp16-mixed, "
    "activation_checkpointing: full, framework: deepspeed}\n";

}  // namespace

TEST_CASE(
    "ZeRO-Offload: a 10B model trains on one 32 GB V100 where plain data parallelism fits ~1.4B (Ren et al. 2021)") {
  /* Plain mixed-precision Adam needs 16 B/param of state: 32 GB holds at most ~1.9B before
   * activations and overheads. Scan hidden-2048 models by depth: the largest that fits is 1-2B. */
  double largest = 0;
  for (int layers = 8; layers <= 64; layers += 4) {
    const auto s = parse("schema_version: 1\n" + gpt(layers, 2048) + kJob +
                         "plans:\n  - name: plain\n    cluster: {gpu: v100-sxm2-32gb, gpus: 1, exclusive: true}\n");
    if (footprint::footprint(s.model, s.plans[0]).fits)
      largest = std::max(largest, static_cast<double>(model::count_params(s.model).total));
  }
  MESSAGE(fmt::format("largest plain data-parallel model on a V100-32GB: {:.2f}B (paper: 1.4B)", largest / 1e9));
  CHECK(largest > 1.0e9);
  CHECK(largest < 2.0e9);
  /* 10B (50 x 4096): does not fit plainly, fits with optimizer and gradients on the host. */
  const auto s =
      parse("schema_version: 1\n" + gpt(50, 4096) + kJob +
            "plans:\n  - name: plain\n    cluster: {gpu: v100-sxm2-32gb, gpus: 1, exclusive: true}\n"
            "  - name: offload\n    cluster: {gpu: v100-sxm2-32gb, gpus: 1, exclusive: true}\n    parallel: {zero: 2}\n"
            "    offload: {preset: zero-offload}\n");
  CHECK(model::count_params(s.model).total == doctest::Approx(10.3e9).epsilon(0.02));
  CHECK_FALSE(footprint::footprint(s.model, s.plans[0]).fits);
  CHECK(footprint::footprint(s.model, s.plans[1]).fits);
}

TEST_CASE("ZeRO-Offload trains the 10B model on one V100-32GB at about 40 TFLOPS (Ren et al. 2021)") {
  /* The paper reports ~40 TFLOPS at 10B on one V100 (DGX-2; here a DGX-1 V100-32GB host), counting FLOPs as DeepSpeed
   * does with activation checkpointing (recompute included: hardware FLOPs), at the batch that fits. */
  auto s = parse("schema_version: 1\n" + gpt(50, 4096) + kJob +
                 "plans:\n  - name: offload\n    cluster: {gpu: v100-sxm2-32gb, gpus: 1, exclusive: true}\n    "
                 "parallel: {zero: 2}\n"
                 "    offload: {preset: zero-offload}\n");
  plan::Plan p = s.plans[0];
  p.job.micro_batch = footprint::max_micro_batch(s.model, p, 64);
  p.job.global_batch = p.job.micro_batch;
  REQUIRE(p.job.micro_batch >= 1);
  const auto r = sim::simulate_step(s.model, p);
  REQUIRE(r.ok);
  MESSAGE(
      fmt::format("ZeRO-Offload 10B on one V100: micro-batch {}, {:.1f} hardware TFLOP/s ({:.1f} model), bound by {} "
                  "(paper: ~40)",
                  p.job.micro_batch, r.hardware_tflops_per_gpu, r.model_tflops_per_gpu, r.bound_by));
  // The bound: +-25% (V100 GEMMs at the 83 of 125 TFLOPS cuBLAS measured, Markidis et al. 2018).
  CHECK(std::abs(r.hardware_tflops_per_gpu / 40.0 - 1.0) <= 0.25);
}

TEST_CASE("ZeRO-Infinity's NVMe offload of a 10B model on 2 A100 PCIe nodes is much slower than CPU offload") {
  /* DeepSpeedExamples#192: the maintainers call 10B too small for NVMe offload, which is slower
   * than CPU offload: parameters and optimizer state cross the drives every step. */
  const auto s =
      parse("schema_version: 1\n" + gpt(50, 4096) + kJob +
            "plans:\n"
            "  - name: cpu\n    cluster: {node: server-8x-a100-pcie-80gb, nodes: 2}\n    parallel: {zero: 3}\n"
            "    offload: {preset: zero-offload, params: cpu}\n"
            "  - name: nvme\n    cluster: {node: server-8x-a100-pcie-80gb, nodes: 2}\n    parallel: {zero: 3}\n"
            "    offload: {preset: zero-infinity}\n");
  const double cpu = sim::simulate_step(s.model, s.plans[0]).step_time_s;
  const double nvme = sim::simulate_step(s.model, s.plans[1]).step_time_s;
  MESSAGE(fmt::format("step time: CPU offload {:.2f} s, NVMe offload {:.2f} s ({:.1f}x)", cpu, nvme, nvme / cpu));
  CHECK(nvme > 1.5 * cpu);
}

TEST_CASE("an NVMe-offloaded 70B step speeds up with striped drives until other bounds take over") {
  /* Llama-3.1-70B on the 4-GPU workstation, ZeRO-Infinity placement. Each added drive adds read
   * and write bandwidth; as the host's DRAM, the CPU's Adam and the GPUs' links carry more of the
   * step, each doubling helps less. Expect near-linear gains at first and diminishing ones later
   * (DeepSpeed's default swap reads, updates and writes each optimizer sub-group in turn, so the
   * optimizer's part stays drive-bound longer than its reads alone would: 1.29x from 8 to 16). */
  std::vector<double> step;
  for (int drives : {1, 2, 4, 8, 16}) {
    const auto s = parse(fmt::format(
        "schema_version: 1\nmodel: llama-3.1-70b\n"
        "job: {{seq_len: 4096, micro_batch: 1, global_batch: 4, tokens: 1M, activation_checkpointing: full, "
        "framework: deepspeed}}\nplans:\n  - name: d\n"
        "    cluster: {{node: workstation-4x-rtx-6000-ada, nodes: 1, dram: 512 GiB, "
        "drives: [{{drive: gigabyte-ai-top-100e-2tb, count: {}}}]}}\n"
        "    parallel: {{zero: 3}}\n    offload: {{preset: zero-infinity}}\n",
        drives));
    step.push_back(sim::simulate_step(s.model, s.plans[0]).step_time_s);
  }
  MESSAGE(fmt::format("step time with 1, 2, 4, 8, 16 drives: {:.1f}, {:.1f}, {:.1f}, {:.1f}, {:.1f} s", step[0],
                      step[1], step[2], step[3], step[4]));
  for (std::size_t i = 1; i < step.size(); ++i) CHECK(step[i] < step[i - 1]);
  for (std::size_t i = 2; i < step.size(); ++i) CHECK(step[i - 1] / step[i] < step[i - 2] / step[i - 1]);
  CHECK(step[0] / step[1] > 1.6);   // drive-bound: doubling drives nearly halves the step
  CHECK(step[3] / step[4] < 1.35);  // less drive-bound: doubling helps less
}

TEST_CASE("DeepSpeed's optimizer swap reads, steps and writes each sub-group in turn unless pipelined") {
  /* stage3.py step(): for each sub-group, swap in (waited), step, swap out (PartitionedOptimizer-
   * Swapper waits on the aio handle). Llama-3.1-8B full on one workstation (4 GPUs, ZeRO-3, 2.0B
   * parameters a rank), sub-groups of 4 GB of swap buffer = 250M parameters: 9 per rank. In the
   * IR, chunk c + 1's read waits for chunk c's write (neither flag), its update and chunk c - 1's
   * write (pipeline_write), chunk c - 1's write (pipeline_read) or its update and chunk c - 2's
   * write (both): what frees the swap buffer it reads into. So the default step is the longest;
   * each flag holds one more sub-group of pinned buffers (4 GB).                                 */
  const auto scenario = [](const std::string& flags) {
    return parse(
        "schema_version: 1\nmodel: llama-3.1-8b\n"
        "job: {seq_len: 2048, micro_batch: 1, global_batch: 4, tokens: 1M, activation_checkpointing: full, "
        "framework: deepspeed}\nplans:\n  - name: p\n"
        "    cluster: {node: workstation-4x-rtx-6000-ada, nodes: 1, dram: 512 GiB, "
        "drives: [{drive: gigabyte-ai-top-100e-2tb, count: 2}]}\n"
        "    parallel: {zero: 3}\n    offload: {preset: zero-infinity, chunk_size: 4 GB" +
        flags + "}\n");
  };
  // DeepSpeed's pool of optimizer swap buffers holds 4 a sub-group in flight (master, m, v, gradient).
  const char* flags[] = {"", ", pipeline_write: true, optimizer_buffer_count: 8",
                         ", pipeline_read: true, optimizer_buffer_count: 8",
                         ", pipeline_read: true, pipeline_write: true, optimizer_buffer_count: 12"};
  std::vector<double> step, swap_buffers;
  for (int f = 0; f < 4; ++f) {
    CAPTURE(flags[f]);
    const auto s = scenario(flags[f]);
    const plan::Plan& p = s.plans.front();
    const auto ir = schedule::build_step(s.model, p, inventory::build_inventory(s.model, p, 0));
    std::vector<int> reads, updates, writes;
    for (int i = 0; i < static_cast<int>(ir.ops.size()); ++i) {
      const auto& op = ir.ops[static_cast<std::size_t>(i)];
      if (op.name.rfind("nvme read optimizer chunk", 0) == 0) reads.push_back(i);
      if (op.name.rfind("optimizer step chunk", 0) == 0) updates.push_back(i);
      if (op.name.rfind("nvme write optimizer chunk", 0) == 0) writes.push_back(i);
    }
    REQUIRE(reads.size() == 9);
    REQUIRE(updates.size() == 9);
    REQUIRE(writes.size() == 9);
    const auto waits_on = [&](int op, int on) {
      const auto& d = ir.ops[static_cast<std::size_t>(op)].deps;
      return std::find(d.begin(), d.end(), on) != d.end();
    };
    for (std::size_t c = 2; c < reads.size(); ++c) {
      const std::vector<int>& on = f % 2 == 1 ? updates : writes;  // pipeline_write: the update
      const std::size_t before = f >= 2 ? c - 2 : c - 1;           // pipeline_read: one earlier
      CHECK(waits_on(reads[c], on[before]));
      if (f % 2 == 1 && before >= 1) CHECK(waits_on(reads[c], writes[before - 1]));
    }
    step.push_back(sim::simulate_step(s.model, p).step_time_s);
    for (const auto& t : ir.tensors)
      if (t.name == inventory::kOptimizerSwapBuffers) swap_buffers.push_back(t.bytes);
  }
  MESSAGE(fmt::format("step time: neither {:.1f} s, pipeline_write {:.1f}, pipeline_read {:.1f}, both {:.1f}", step[0],
                      step[1], step[2], step[3]));
  CHECK(step[0] > step[1]);
  CHECK(step[0] > step[2]);
  // Either flag hides the CPU's Adam under the swap; both overlap a read with a write, which share
  // the drives here (22.0, 15.3, 15.3, 15.3 s): no slower, and no faster once the drives bound it.
  CHECK(step[3] <= step[1] * 1.001);
  CHECK(step[3] <= step[2] * 1.001);
  REQUIRE(swap_buffers.size() == 4);
  CHECK(swap_buffers[0] == doctest::Approx(4e9));
  CHECK(swap_buffers[1] == doctest::Approx(8e9));
  CHECK(swap_buffers[2] == doctest::Approx(8e9));
  CHECK(swap_buffers[3] == doctest::Approx(12e9));
  // With DeepSpeed's default pool (offload_optimizer.buffer_count 4) a pipelined swap runs out of
  // buffers at its second sub-group in flight: refused as not fitting, saying what to give.
  const auto short_pool = scenario(", pipeline_read: true");
  const footprint::Footprint f = footprint::footprint(short_pool.model, short_pool.plans.front());
  CHECK_FALSE(f.fits);
  CHECK(f.infeasible_reason.find("holds 8 swap buffers at once") != std::string::npos);
  CHECK(f.infeasible_reason.find("give optimizer_buffer_count: 8") != std::string::npos);
  CHECK(
      footprint::footprint(short_pool.model, scenario(", pipeline_read: true, optimizer_buffer_count: 8").plans.front())
          .fits);
}

TEST_CASE("pageable host buffers slow ZeRO-Offload's copies (DeepSpeed PR #5301: pinned is ~6x faster)") {
  const auto s = parse(
      "schema_version: 1\n" + gpt(50, 4096) + kJob +
      "plans:\n  - name: pinned\n    cluster: {gpu: v100-sxm2-32gb, gpus: 1, exclusive: true}\n    parallel: {zero: "
      "2}\n"
      "    offload: {preset: zero-offload}\n"
      "  - name: pageable\n    cluster: {gpu: v100-sxm2-32gb, gpus: 1, exclusive: true}\n    parallel: {zero: 2}\n"
      "    offload: {preset: zero-offload, pinned: false}\n");
  const auto pinned = sim::simulate_step(s.model, s.plans[0]);
  const auto pageable = sim::simulate_step(s.model, s.plans[1]);
  const auto h2d = [](const sim::StepResult& r) {
    for (const auto& st : r.streams)
      if (st.name == "h2d") return st.busy_s;
    return 0.0;
  };
  MESSAGE(
      fmt::format("ZeRO-Offload 10B step: pinned {:.2f} s (h2d busy {:.2f} s), pageable {:.2f} s (h2d busy {:.2f} s)",
                  pinned.step_time_s, h2d(pinned), pageable.step_time_s, h2d(pageable)));
  // Pageable copies move at the driver's staging rate, 1/6 of the pinned PCIe rate.
  double staged = 0, staged_s = 0;
  for (const auto& l : pageable.links)
    if (l.name == "pageable staging") {
      staged = l.bytes;
      staged_s = l.busy_s;
    }
  REQUIRE(staged_s > 0);
  const auto& gpu = s.plans[1].cluster.gpu;
  CHECK(staged / staged_s ==
        doctest::Approx(gpu.host_link.bandwidth_Bps() * sim::default_efficiency(gpu).pcie / 6.0).epsilon(0.05));
  CHECK(h2d(pageable) > 2.0 * h2d(pinned));
  CHECK(pageable.step_time_s > pinned.step_time_s);
}

TEST_CASE("PCIe is full duplex: host-to-device and device-to-host copies run at once, each at the link's rate") {
  /* ZeRO-3 with the parameters, gradients and optimizer in host memory and the activations
   * offloaded, on one RTX 4090 (PCIe 4.0 x16) with DRAM to spare: the forward fetches each layer's
   * parameters (h2d) while it sends the previous layer's activations out (d2h), and the backward
   * fetches activations and parameters while gradients go out. A PCIe link is a dual-simplex pair
   * (PCI Express Base Specification 4.0, 4.2: each direction its own lanes), so while copies run
   * the link moves more than one direction's rate; as one shared link (before) it moved at most
   * that: PCIe bytes / time any PCIe copy ran <= one direction's rate (43.2 s step then, 39.5 s
   * now). */
  const auto s = parse(
      "schema_version: 1\nmodel: llama-3.1-8b\n"
      "job: {seq_len: 4096, micro_batch: 1, global_batch: 8, tokens: 1M, activation_checkpointing: none, "
      "framework: deepspeed, method: full}\n"
      "plans:\n  - name: z3\n    cluster: {gpu: rtx-4090, gpus: 1, dram: 512 GiB}\n    parallel: {zero: 3}\n"
      "    offload: {params: cpu, optimizer: cpu, gradients: cpu, optimizer_step: cpu, activations: cpu}\n");
  const auto& p = s.plans[0];
  sim::Options o;
  o.trace = true;
  const auto r = sim::simulate_step(s.model, p, o);
  // Every byte the IR copies one way crosses that direction's link, and only that one.
  const auto ir = schedule::build_step(s.model, p, inventory::build_inventory(s.model, p), 0, false);
  double to_gpu = 0, from_gpu = 0;
  for (const auto& op : ir.ops)
    if (op.kind == schedule::OpKind::copy && op.dst == plan::Tier::gpu)
      to_gpu += op.bytes;
    else if (op.kind == schedule::OpKind::copy && op.src == plan::Tier::gpu)
      from_gpu += op.bytes;
  const auto link = [&](const char* name) {
    for (const auto& l : r.links)
      if (l.name == name) return l;
    return sim::LinkUse{};
  };
  REQUIRE(to_gpu > 0);
  REQUIRE(from_gpu > 0);
  CHECK(link("pcie h2d").bytes == doctest::Approx(to_gpu));
  CHECK(link("pcie d2h").bytes == doctest::Approx(from_gpu));
  // The time any PCIe copy runs: the union of the h2d and d2h streams' spans.
  std::vector<std::pair<double, double>> spans;
  for (const auto& t : r.tracks.streams)
    if (t.name == "h2d" || t.name == "d2h")
      for (const auto& x : t.spans) spans.emplace_back(x.start_s, x.end_s);
  std::sort(spans.begin(), spans.end());
  double busy = 0, end = 0;
  for (const auto& [a, b] : spans) {
    busy += std::max(0.0, b - std::max(a, end));
    end = std::max(end, b);
  }
  const auto topo = sim::detail::topology_of(p, sim::default_efficiency(p.cluster.gpu));
  const double rate = (link("pcie h2d").bytes + link("pcie d2h").bytes) / busy;
  MESSAGE(fmt::format(
      "step {:.2f} s; PCIe copies ran {:.2f} s at {:.1f} GB/s both ways together, one direction {:.1f} GB/s",
      r.step_time_s, busy, rate / 1e9, topo.pcie_Bps / 1e9));
  // Host DRAM, which both directions and the CPU Adam share, keeps it below twice (31.5 GB/s
  // against 26.8 one way: 1.18x).
  CHECK(rate > 1.1 * topo.pcie_Bps);
}

TEST_CASE("a calibration profile's NVMe runs set the drives' rates (nearest to DeepSpeed aio's 1 MiB x depth 8)") {
  const auto profile = io::load_profile(test::zoo_dir() / "hardware" / "profiles" / "dev-vm-cpu-storage.yaml");
  const auto s = parse("schema_version: 1\n" + gpt(50, 4096) + kJob +
                       "plans:\n  - name: nvme\n    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n    parallel: {zero: 3}\n"
                       "    offload: {preset: zero-infinity}\n");
  const auto eff = sim::efficiency_from_profile(profile, s.plans[0].cluster.gpu, hardware::Dtype::bf16);
  CHECK(eff.nvme_read_Bps > 0);
  CHECK(eff.nvme_write_Bps > 0);
  CHECK(eff.source.find("NVMe") != std::string::npos);
  const auto measured = sim::simulate_step(s.model, s.plans[0], {}, &eff);
  const auto catalog = sim::simulate_step(s.model, s.plans[0]);
  MESSAGE(
      fmt::format("ZeRO-Infinity 10B on one H100: {:.1f} s with the dev VM's disk ({:.2f} GB/s read), {:.1f} s with "
                  "the catalog's drives",
                  measured.step_time_s, eff.nvme_read_Bps / 1e9, catalog.step_time_s));
  // The dev VM's virtual disk is far slower than a datacenter NVMe drive.
  CHECK(measured.step_time_s > catalog.step_time_s);
}

namespace {

// An 8B QLoRA step on one H100 with the saved activations offloaded to host memory and no
// checkpointing: each layer's saved tensors (~0.56 GiB at seq 4096) take longer to cross PCIe
// than the layer's forward takes to compute.
plan::Scenario activation_offload(const std::string& offload) {
  return parse(
      "schema_version: 1\nmodel: llama-3.1-8b\n"
      "job: {method: qlora, framework: hf-trainer, seq_len: 4096, micro_batch: 1, global_batch: 1, steps: 1,\n"
      "      activation_checkpointing: none}\n"
      "plans:\n  - name: p\n    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n    offload: {preset: " +
      offload + "}\n");
}

const sim::TrackSpan* span(const sim::StepResult& r, const std::string& stream, const std::string& name) {
  for (const auto& t : r.tracks.streams)
    if (t.name.find(stream) != std::string::npos)
      for (const auto& s : t.spans)
        if (s.name == name) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("activation offload: the GPU holds the footprint's resident layers and the forward waits for its copies") {
  /* Footprint: with activation offload the GPU keeps R = 1 + prefetch_depth = 2 layers of saved
   * activations (the one being produced or consumed, and one in flight); the rest is in host
   * memory. The step IR bounds the copies to those R slots, so the simulated GPU peak is the
   * footprint's allocated peak plus the overheads outside the allocator, as without offload
   * (simulate_test "simulated and analytic GPU memory peaks agree"): before the bound the forward
   * ran ahead of its device-to-host copies and the simulated peak was 23.8 GiB against 12.6.
   *
   * Time, worked: L = 32 layers of S bytes saved each; B the copies' rate (below); one
   * copy takes d = S / B; a layer's forward c < d. Copies run one after another on the d2h
   * stream; layer l's copy starts when its forward ends. Layer l >= 2 takes the slot layer l - 2
   * frees when its copy ends, so its forward starts at c + (l - 1) d (copy 0 ends at c + d, and
   * the copies are back to back from there): the last forward ends at 2c + (L - 2) d, not at
   * L c as when the forward ran ahead. Backward brings layer l back once layer l + 2's backward has
   * freed its slot and the copy stream is free (h2d; its own PCIe direction, but the same share of
   * host DRAM, the binding link here): the copies back run
   * back to back after the last copy out, so the step is c + 2 L d + (the last layer's backward
   * and the LoRA optimizer step: under 2% of it here). */
  const auto s = activation_offload("activation-cpu");
  const auto& p = s.plans[0];
  const auto f = footprint::footprint(s.model, p);
  const auto inv = inventory::build_inventory(s.model, p);
  double S = 0;
  int resident = 0;
  for (const auto& g : inv.groups) {
    if (std::string(g.name) == "saved activations (offloaded)") S = g.bytes;
    if (std::string(g.name) == "saved activations (resident)") resident = g.count;
  }
  REQUIRE(S > 0.5 * (1 << 30));
  CHECK(resident == 2);
  sim::Options o;
  o.trace = true;
  const auto r = sim::simulate_step(s.model, p, o);
  const double footprint_peak = f.gpu_allocated_peak_bytes + f.gpu()[inventory::Category::overhead];
  CHECK(r.gpu_peak_bytes() == doctest::Approx(footprint_peak).epsilon(0.02));
  CHECK(r.gpu_peak_bytes() < footprint_peak + S);  // not even one layer more

  const auto topo = sim::detail::topology_of(p, sim::default_efficiency(p.cluster.gpu));
  // The copies cross the GPU's PCIe link (Gen5 x16 x 0.85 = 56.1 GB/s) and the rank's share of
  // host DRAM (DGX H100: 2 sockets x 8 channels x DDR5-4400 x 8 B x 0.75 / 8 GPUs = 52.8 GB/s).
  const double B = std::min({topo.pcie_Bps, topo.uplink_Bps, topo.dram_Bps});
  CHECK(B == doctest::Approx(52.8e9));
  const double d = S / B;
  const auto* first = span(r, "compute", "fwd L0 norms/rope/residual");
  const auto* copy0 = span(r, "d2h", "d2h activations L0");
  const auto* copy31 = span(r, "d2h", "d2h activations L31");
  REQUIRE(first);
  REQUIRE(copy0);
  REQUIRE(copy31);
  CHECK(copy0->end_s - copy0->start_s == doctest::Approx(d).epsilon(0.001).scale(0));
  const double c = copy0->start_s - first->start_s;  // layer 0's forward
  CHECK(c < d);
  // Layer l's forward waits for layer l - 2's copy: it starts when that copy ends.
  for (int l : {2, 10, 31}) {
    CAPTURE(l);
    const auto* fwd = span(r, "compute", fmt::format("fwd L{} norms/rope/residual", l));
    REQUIRE(fwd);
    CHECK(fwd->start_s - first->start_s == doctest::Approx(c + (l - 1) * d).epsilon(0.001).scale(0));
  }
  CHECK(copy31->end_s - first->start_s == doctest::Approx(c + 32 * d).epsilon(0.001).scale(0));
  CHECK(r.step_time_s == doctest::Approx(c + 64 * d).epsilon(0.02).scale(0));
  CHECK(r.step_time_s > c + 64 * d);

  /* The same step with the activations on flash: a GPU slot is freed once its layer has reached
   * flash through a pinned staging buffer, so the GPU again holds the footprint's two layers
   * (29.97 GiB simulated before the bound). */
  const auto n = activation_offload("activation-nvme");
  const auto fn = footprint::footprint(n.model, n.plans[0]);
  const auto rn = sim::simulate_step(n.model, n.plans[0]);
  CHECK(rn.gpu_peak_bytes() ==
        doctest::Approx(fn.gpu_allocated_peak_bytes + fn.gpu()[inventory::Category::overhead]).epsilon(0.02));
}

TEST_CASE("CXL memory: ZeRO-Offload's state in two expanders, its bytes, its capacity and its step, worked") {
  /* Llama-3.1-8B (P = 8.03e9 parameters), full fine-tune, one H100 with the node to itself and two
   * Micron CZ120 256 GB (catalog expanders.yaml: 36 GB/s in all, 24 GB/s one way), under
   * zero-offload-cxl: the fp32 master, m and v (12 B per parameter) and the fp32 gradients (4 B)
   * in CXL memory, the step on the host's cores.
   * - The CXL tier holds 16 P = 128.5 GB, of 2 x 256 GB; host DRAM holds none of the state.
   * - The CPU step moves 28 B per parameter (schedule::kAdamBytesPerParam) through the expanders:
   *   28 P / (2 x 36 GB/s) = 3.12 s, where the DGX's DRAM (8-channel DDR5 x 2 sockets) would take
   *   far less; the gradients (4 P) leave the GPU and the updated 16-bit parameters (2 P) return
   *   one way each: the expanders carry 34 P in all. */
  const std::string text = std::string("schema_version: 1\nmodel: llama-3.1-8b\n") +
                           "job: {method: full, seq_len: 2048, micro_batch: 2, global_batch: 16, tokens: 20M, "
                           "precision: bf16-mixed, activation_checkpointing: full, framework: deepspeed}\n"
                           "plans:\n"
                           "  - name: cxl\n"
                           "    cluster: {gpu: h100-sxm-80gb, gpus: 1, exclusive: true,\n"
                           "              expanders: [{expander: micron-cz120-256gb, count: 2}]}\n"
                           "    parallel: {zero: 2}\n"
                           "    offload: {preset: zero-offload-cxl}\n"
                           "  - name: dram\n"
                           "    cluster: {gpu: h100-sxm-80gb, gpus: 1, exclusive: true}\n"
                           "    parallel: {zero: 2}\n"
                           "    offload: {preset: zero-offload}\n";
  const auto sc = parse(text);
  const plan::Plan& cxl = sc.plans[0];
  const double P = static_cast<double>(model::count_params(sc.model).total);
  const auto f = footprint::footprint(sc.model, cxl);
  CHECK(f.fits);
  CHECK(f.peak(plan::Tier::cxl) == doctest::Approx(16 * P).epsilon(1e-3));
  CHECK(f.capacity(plan::Tier::cxl) == doctest::Approx(2 * 256e9));
  CHECK(f.bytes(plan::Tier::cpu)[inventory::Category::optimizer] == 0);
  CHECK(f.bytes(plan::Tier::cxl)[inventory::Category::optimizer] == doctest::Approx(12 * P).epsilon(1e-3));

  const sim::StepResult r = sim::simulate_step(sc.model, cxl);
  REQUIRE(r.ok);
  CHECK(r.peak(plan::Tier::cxl) == doctest::Approx(16 * P).epsilon(1e-3));
  const auto use = [](const auto& list, const std::string& name) {
    for (const auto& x : list)
      if (x.name == name) return x;
    FAIL("no " << name);
    return list.front();
  };
  const double cpu_step = 28 * P / (2 * 36e9);
  CHECK(use(r.streams, "cpu").busy_s == doctest::Approx(cpu_step).epsilon(0.01));
  CHECK(use(r.links, "cxl memory (share)").bytes == doctest::Approx(34 * P).epsilon(1e-3));
  CHECK(use(r.links, "cxl read (share)").bytes == doctest::Approx(2 * P).epsilon(1e-3));
  CHECK(use(r.links, "cxl write (share)").bytes == doctest::Approx(4 * P).epsilon(1e-3));
  // No byte of the state crosses host DRAM (the DMA and the CPU reach the expanders directly).
  for (const auto& l : r.links) CHECK(l.name != "host dram (share)");
  // The same plan with the state in host DRAM: its CPU step is faster than the expanders allow.
  const sim::StepResult d = sim::simulate_step(sc.model, sc.plans[1]);
  CHECK(use(d.streams, "cpu").busy_s < 0.5 * cpu_step);

  /* Without expanders, placing state in CXL memory is refused, naming the key to add. */
  const std::string none = test::input_error_of([&] {
    parse(std::string("schema_version: 1\nmodel: llama-3.1-8b\n") +
          "job: {method: full, seq_len: 2048, micro_batch: 2, tokens: 20M, framework: deepspeed}\n"
          "plans:\n  - name: x\n    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n    parallel: {zero: 2}\n"
          "    offload: {preset: zero-offload-cxl}\n");
  });
  CHECK(none.find("no CXL memory expanders; add cluster.expanders") != std::string::npos);
}

TEST_CASE("the planner tries CXL memory expanders as it tries drives: each count for the CXL preset") {
  /* search.expanders: {expander, counts}: the expander per node. The CXL preset runs on each count but 0 (nowhere
   * to place it), named "Ncxl"; a preset that keeps nothing there runs on the first count only (as
   * NVMe ones vary with search.drives alone). On the RTX 6000 Ada workstation slice, one GPU's
   * share of its host DRAM is too small for 8B's 16 B a parameter of offloaded state (ZeRO-Offload
   * does not fit), and four expanders hold it. */
  const auto sc = parse(std::string("schema_version: 1\nmodel: llama-3.1-8b\n") +
                        "job: {method: full, seq_len: 2048, global_batch: 16, tokens: 20M, precision: bf16-mixed, "
                        "activation_checkpointing: full, framework: deepspeed}\n"
                        "search: {gpus: [rtx-6000-ada], gpu_counts: [1], tp: [1], pp: [1], zero: [2], micro_batch: "
                        "[2], activation_checkpointing: [full], offload: [zero-offload, zero-offload-cxl],\n"
                        "         expanders: {expander: micron-cz120-256gb, counts: [0, 4]}}\n");
  const planner::Result r = planner::search(sc.model, sc.job, test::catalog(), sc.search, sc.constraints, sc.cost, 1);
  std::vector<std::string> names;
  for (const auto& c : r.candidates) names.push_back(c.plan.name + (c.evaluation.feasible() ? "" : " (does not fit)"));
  std::vector<std::string> all = names;
  std::sort(all.begin(), all.end());
  INFO(fmt::format("{}", fmt::join(all, "; ")));
  REQUIRE(r.candidates.size() + static_cast<std::size_t>(r.pruned_memory) == 2);
  REQUIRE(r.candidates.size() == 1);  // ZeRO-Offload in one GPU's share of DRAM does not fit
  const auto& cxl = r.candidates.front();
  CHECK(cxl.plan.name.ends_with("zero-offload-cxl 4cxl"));
  CHECK(cxl.plan.cluster.expanders.size() == 1);
  CHECK(cxl.plan.cluster.expanders.front().second == 4);
  CHECK(cxl.evaluation.feasible());
}

TEST_CASE("a device axis reads the same for every kind of device that backs a tier (plan::kDeviceKinds)") {
  /* search.drives in the form search.expanders has: {drive: NAME, counts}. The workstation's node has
   * two Gigabyte AI-TOP drives; the axis puts in 0 or 1 Samsung PM9A3 instead. ZeRO-Infinity places
   * state on NVMe, so it runs on 1 only (0: nowhere to place it), named "1nvme", on that drive. */
  const std::string job = std::string("schema_version: 1\nmodel: llama-3.1-8b\n") +
                          "job: {method: full, seq_len: 2048, global_batch: 16, tokens: 20M, precision: bf16-mixed, "
                          "activation_checkpointing: full, framework: deepspeed}\n";
  const auto sc = parse(job +
                        "search: {gpus: [rtx-6000-ada], gpu_counts: [1], tp: [1], pp: [1], zero: [3], micro_batch: "
                        "[2], activation_checkpointing: [full], offload: [zero-infinity],\n"
                        "         drives: {drive: samsung-pm9a3-3.84tb, counts: [0, 1]}}\n");
  REQUIRE(sc.search.devices.size() == 1);
  CHECK(sc.search.devices.front().kind == "drives");
  const planner::Result r = planner::search(sc.model, sc.job, test::catalog(), sc.search, sc.constraints, sc.cost, 1);
  CHECK(r.enumerated == 1);
  REQUIRE(r.candidates.size() == 1);
  const auto& c = r.candidates.front();
  CHECK(c.plan.name.ends_with("zero-infinity 1nvme"));
  REQUIRE(c.plan.cluster.drives.size() == 1);
  CHECK(c.plan.cluster.drives.front().first.name == "samsung-pm9a3-3.84tb");
  CHECK(c.plan.cluster.drives.front().second == 1);

  /* Counts alone count the node's own device; a node without one is told, not ignored. */
  const std::string error = test::input_error_of(
      [&] { parse(job + "search: {gpus: [rtx-6000-ada], offload: [zero-offload-cxl], expanders: [0, 2]}\n"); });
  CHECK(error.find("search.expanders: rtx-6000-ada's node (workstation-4x-rtx-6000-ada) has no CXL memory expander "
                   "to count: name one, {expander: NAME, counts: [...]}") != std::string::npos);
}
