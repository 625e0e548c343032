// One plan, one answer: the same plan evaluated through each verb's path gives the same figures,
// field by field (issue 15). memory = the footprint row; simulate = simulate_step + its row;
// compare = evaluate::evaluate_plan + the cost row; sweep = a one-point sweep of the same scenario; the GUI =
// gui::evaluate of the same text; plan = the planner's evaluation of its candidates.
#include <doctest/doctest.h>

#include <random>
#include <string>

#include <fmt/format.h>

#include "common/error.hpp"
#include "footprint/footprint.hpp"
#include "gui/evaluation.hpp"
#include "io/results.hpp"
#include "io/scenario_io.hpp"
#include "plan/checks.hpp"
#include "planner/planner.hpp"
#include "present/verdict.hpp"
#include "sim/simulate.hpp"
#include "sweep/sweep.hpp"
#include "test_support.hpp"

using namespace ftplan;

namespace {

// Every field of `want` is in `got` with the same value: "" when so, else the first difference.
std::string differs(const io::Row& want, const io::Row& got) {
  for (const auto& [key, value] : want.fields) {
    const io::Value* v = got.get(key);
    if (!v) return "missing " + key;
    if (*v != value) return fmt::format("{}: {} vs {}", key, io::csv_cell(value), io::csv_cell(*v));
  }
  return {};
}

// A random plan of the kinds users compare: single GPUs and nodes, sharded and not, pipelines,
// LoRA and QLoRA, MoE, tiered (CPU and NVMe offload). Deterministic: rng() % n, not a
// distribution (their output is implementation-defined).
std::string random_scenario(std::mt19937& rng) {
  const auto pick = [&](std::initializer_list<const char*> xs) { return *(xs.begin() + rng() % xs.size()); };
  const auto pick_int = [&](std::initializer_list<int> xs) { return *(xs.begin() + rng() % xs.size()); };
  const std::string model = pick({"llama-3.2-1b", "qwen2.5-0.5b", "llama-3.1-8b", "mixtral-8x7b", "gemma-2-2b"});
  const std::string method = pick({"full", "lora", "qlora"});
  const std::string framework = pick(
      {"pytorch-fsdp", "pytorch-fsdp2", "deepspeed", "deepspeed", "deepspeed", "megatron", "hf-trainer", "torchtune"});
  const int seq = pick_int({512, 1024, 2048});
  const int micro = pick_int({1, 2, 4});
  const int accumulation = pick_int({1, 2, 4, 8});
  const std::string ckpt = pick({"none", "full", "selective"});
  const std::string precision = pick({"bf16-mixed", "bf16"});
  std::string cluster, parallel, offload;
  int gpus = 1;
  switch (rng() % 4) {
    case 0:
      gpus = pick_int({1, 2, 4, 8, 16});
      cluster = fmt::format("{{gpu: {}, gpus: {}}}", pick({"h100-sxm-80gb", "a100-sxm4-80gb", "a100-sxm4-40gb"}), gpus);
      break;
    case 1:
      gpus = 1;
      cluster = fmt::format("{{gpu: {}, gpus: 1{}}}", pick({"rtx-4090", "l40s", "h100-sxm-80gb"}),
                            rng() % 2 ? ", exclusive: true" : "");
      break;
    default:
      gpus = 4;
      cluster =
          "{node: workstation-4x-rtx-6000-ada, dram: 512 GiB, drives: [{drive: gigabyte-ai-top-100e-2tb, count: 4}]}";
      break;
  }
  const int tp = gpus >= 2 ? pick_int({1, 1, 2}) : 1;
  const int pp = gpus >= 4 && framework == std::string("megatron") ? pick_int({1, 2}) : 1;
  const int ep = model == "mixtral-8x7b" && gpus >= 8 ? pick_int({1, 8}) : 1;
  const int dp = gpus / (tp * pp);
  int zero = 0;
  if (framework == std::string("deepspeed")) zero = pick_int({0, 1, 2, 3});
  if (framework == std::string("megatron")) zero = pick_int({0, 1});
  parallel = fmt::format("{{tp: {}, pp: {}, ep: {}{}}}", tp, pp, ep, zero > 0 ? fmt::format(", zero: {}", zero) : "");
  if (framework == std::string("deepspeed") && rng() % 2)
    offload = fmt::format("    offload: {{preset: {}}}\n",
                          pick({"zero-offload", "zero-infinity", "aidaptiv", "activation-cpu"}));
  return fmt::format(
      "schema_version: 1\nmodel: {}\njob: {{method: {}, framework: {}, seq_len: {}, micro_batch: {}, global_batch: {}, "
      "tokens: 10M, activation_checkpointing: {}, precision: {}}}\nplans:\n  - name: p\n    cluster: {}\n    parallel: "
      "{}\n{}",
      model, method, framework, seq, micro, micro * dp * accumulation, ckpt, precision, cluster, parallel, offload);
}

std::string indented(const std::string& text) {
  std::string out = "  ";
  for (char c : text) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}

}  // namespace

TEST_CASE(
    "one plan, one answer: memory, simulate, compare, sweep and the GUI agree field by field on 200 random plans") {
  std::mt19937 rng(20261203);
  int checked = 0, tiered = 0, sharded = 0, pipelines = 0, adapters = 0, moe = 0, infeasible = 0;
  for (int tries = 0; checked < 200 && tries < 5000; ++tries) {
    const std::string text = random_scenario(rng);
    plan::Scenario s;
    try {
      s = io::parse_scenario(text, "consistency.yaml", test::data_dir(), test::zoo(), test::catalog());
    } catch (const InputError&) {
      continue;  // a layout the frameworks refuse
    }
    const plan::Plan& p = s.plans.front();
    INFO(text);
    // compare (and the reference for the rest)
    const evaluate::Evaluation e = evaluate::evaluate_plan(s.model, p);
    const io::Row compared = io::cost_row(p, e.memory, e.step, e.power, e.cost);
    // A plan that does not run draws no curve (its row's run figures are null): only its idle and
    // maximum draw, which its row shows.
    if (!e.feasible()) {
      CHECK(e.power.energy_per_step_j == 0);
      CHECK(e.power.idle_power_w > 0);
      CHECK(e.power.max_power_w > e.power.idle_power_w);
    }
    // memory
    const footprint::Footprint f = footprint::footprint(s.model, p);
    CHECK_MESSAGE(differs(io::footprint_row(p, f), compared).empty(), differs(io::footprint_row(p, f), compared));
    // simulate
    const sim::StepResult step = sim::simulate_step(s.model, p, sim::Options{});
    const io::Row simulated = io::simulation_row(p, f, step);
    CHECK_MESSAGE(differs(simulated, compared).empty(), differs(simulated, compared));
    // compare's "GPU time not computing" is simulate's "waiting on comm or copies" + "idle" on
    // every GPU: one definition (the compute stream idle; issue 41: 89.0 against 90.1 GPU-h).
    if (e.feasible())
      CHECK(e.power.gpu_idle_s_per_step ==
            doctest::Approx((step.exposed_comm_s + step.idle_s) * p.cluster.gpus()).epsilon(1e-6).scale(1e-6));
    // sweep: the same scenario as a one-point sweep
    const auto sw = sweep::Sweep::parse(
        "schema_version: 1\nscenario:\n" + indented(text) + "\naxes:\n  - {key: job.tokens, values: [10M]}\n",
        "consistency-sweep.yaml", test::data_dir(), test::zoo(), test::catalog());
    const auto swept = sw.evaluate(0);
    REQUIRE(swept.size() == 1);
    CHECK_MESSAGE(differs(compared, swept[0]).empty(), differs(compared, swept[0]));
    // the GUI
    const gui::Outcome g = gui::evaluate(text, "consistency.yaml", test::data_dir(), test::zoo(), test::catalog(), {});
    REQUIRE(g.evaluations.size() == 1);
    const auto& ge = g.evaluations[0];
    const io::Row shown = io::cost_row(g.plans[0], ge.memory, ge.step, ge.power, ge.cost);
    CHECK_MESSAGE(differs(compared, shown).empty(), differs(compared, shown));

    ++checked;
    tiered += p.offload.preset != plan::OffloadPreset::none;
    sharded += plan::sharding_in_effect(p).zero > 0;
    pipelines += p.parallel.pp > 1;
    adapters += p.job.method != plan::Method::full;
    moe += s.model.is_moe();
    infeasible += !e.feasible();
  }
  MESSAGE(fmt::format("{} plans: {} tiered, {} sharded, {} pipelines, {} LoRA/QLoRA, {} MoE, {} that do not fit",
                      checked, tiered, sharded, pipelines, adapters, moe, infeasible));
  CHECK(checked >= 200);
  CHECK(tiered >= 10);
  CHECK(sharded >= 20);
  CHECK(pipelines >= 5);
  CHECK(adapters >= 50);
  CHECK(moe >= 10);
}

TEST_CASE("the planner's figures for a plan are the ones compare gives that plan") {
  const auto s = io::parse_scenario(
      "schema_version: 1\nmodel: llama-3.2-1b\njob: {method: full, seq_len: 1024, micro_batch: 1, global_batch: 16, "
      "tokens: 10M, framework: deepspeed}\nsearch:\n  gpus: [h100-sxm-80gb, rtx-4090]\n  gpu_counts: [1, 2, 8]\n"
      "  zero: [0, 1, 3]\n  micro_batch: [1, 2]\n",
      "consistency-plan.yaml", test::data_dir(), test::zoo(), test::catalog());
  REQUIRE(s.has_search);
  const auto r = planner::search(s.model, s.job, test::catalog(), s.search, s.constraints, s.cost, 2);
  REQUIRE(r.candidates.size() >= 10);
  for (const auto& c : r.candidates) {
    INFO(c.plan.name);
    const evaluate::Evaluation e = evaluate::evaluate_plan(s.model, c.plan);
    const auto& pe = c.evaluation;
    const io::Row planned = io::cost_row(c.plan, pe.memory, pe.step, pe.power, pe.cost);
    const io::Row compared = io::cost_row(c.plan, e.memory, e.step, e.power, e.cost);
    CHECK_MESSAGE(differs(compared, planned).empty(), differs(compared, planned));
  }
}

TEST_CASE("the planner lists each layout once and searches offload only when asked") {
  /* One GPU: ZeRO 1-3 without offload are ZeRO 0 again (one data-parallel rank shards nothing).
   * No offload list: no offload preset in any candidate. */
  const auto s = io::parse_scenario(
      "schema_version: 1\nmodel: llama-3.2-1b\njob: {method: full, seq_len: 1024, micro_batch: 1, global_batch: 16, "
      "tokens: 10M, framework: deepspeed}\nsearch:\n  gpus: [h100-sxm-80gb]\n  gpu_counts: [1, 2]\n  tp: [1]\n  pp: "
      "[1]\n"
      "  zero: [0, 1, 2, 3]\n  micro_batch: [1]\n  activation_checkpointing: [none]\n",
      "dedup.yaml", test::data_dir(), test::zoo(), test::catalog());
  const auto r = planner::search(s.model, s.job, test::catalog(), s.search, s.constraints, s.cost, 1);
  CHECK(r.duplicates == 3);             // ZeRO 1, 2, 3 on the one GPU
  CHECK(r.candidates.size() == 1 + 4);  // 1 GPU: ZeRO 0; 2 GPUs: ZeRO 0-3
  for (const auto& c : r.candidates) CHECK(c.plan.offload.preset == plan::OffloadPreset::none);
}

TEST_CASE("the planner searches interleaving and sequence parallelism where they apply, and only when asked") {
  /* 4 GPUs, tp {1, 2} x pp {1, 2} x virtual stages {1, 2} x sequence parallel {false, true}: virtual
   * stages only with a pipeline, sequence parallelism only with tensor parallelism, so 1 (tp1 pp1)
   * + 2 (tp1 pp2) + 2 (tp2 pp1) + 4 (tp2 pp2) = 9 layouts; each candidate is the layout it names. */
  const auto s = io::parse_scenario(
      "schema_version: 1\nmodel: llama-3.2-1b\njob: {method: full, seq_len: 1024, micro_batch: 1, global_batch: 16, "
      "tokens: 10M, framework: megatron}\nsearch:\n  gpus: [h100-sxm-80gb]\n  gpu_counts: [4]\n  tp: [1, 2]\n  pp: [1, "
      "2]\n"
      "  virtual_stages: [1, 2]\n  sequence_parallel: [false, true]\n  zero: [0]\n  micro_batch: [1]\n"
      "  activation_checkpointing: [none]\n",
      "interleaving.yaml", test::data_dir(), test::zoo(), test::catalog());
  const auto r = planner::search(s.model, s.job, test::catalog(), s.search, s.constraints, s.cost, 1);
  CHECK(r.enumerated == 9);
  int interleaved = 0, sequence_parallel = 0;
  for (const auto& c : r.candidates) {
    INFO(c.plan.name);
    const auto& par = c.plan.parallel;
    CHECK((par.virtual_stages > 1) == (c.plan.name.find(" v2") != std::string::npos));
    CHECK(par.sequence_parallel == (c.plan.name.find(" sp") != std::string::npos));
    if (par.virtual_stages > 1) CHECK(par.schedule == plan::PipelineSchedule::interleaved);
    interleaved += par.virtual_stages > 1;
    sequence_parallel += par.sequence_parallel;
  }
  CHECK(interleaved >= 1);
  CHECK(sequence_parallel >= 1);
  CHECK_THROWS_WITH_AS(
      io::parse_scenario("schema_version: 1\nmodel: llama-3.2-1b\njob: {global_batch: 16, tokens: 10M}\n"
                         "search:\n  gpus: [h100-sxm-80gb]\n  sequence_parallel: [maybe]\n",
                         "bad.yaml", test::data_dir(), test::zoo(), test::catalog()),
      doctest::Contains("bad.yaml:6:23: search.sequence_parallel: expected true or false"), InputError);
}

TEST_CASE("compare says when a plan's fixed micro-batch leaves most of its GPU memory idle") {
  /* The default scenario's workstation at micro-batch 1 x 8 accumulation steps (as it was written
   * before `auto`): 9.7 of its 48 GiB per GPU while aiDAPTIV+ reads the parameters from flash for
   * every micro-batch: the comparison hinges on that setting, and compare says so. The 32-GPU plan
   * uses 60% of its memory: no note. */
  auto s = io::load_scenario(test::zoo_dir().parent_path() / "scenarios" / "llama70b-full-h100-vs-workstation.yaml",
                             test::zoo(), test::catalog());
  for (auto& p : s.plans) {
    p.job.micro_batch = 1;
    p.job.micro_batch_auto = false;
  }
  evaluate::choose_open_knobs(s);  // checkpointing, for micro-batch 1
  std::vector<evaluate::Evaluation> ev;
  for (const auto& p : s.plans) ev.push_back(evaluate::evaluate_plan(s.model, p));
  const auto notes = present::advice(s.model, s.plans, ev);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find(s.plans[1].name) == 0);
  CHECK(notes[0].find("read from flash 8 times a step") != std::string::npos);
}

TEST_CASE("micro_batch: auto runs each plan at its fastest micro-batch that fits and splits the global batch") {
  /* The default scenario (global batch 32): the workstation's step is fastest at micro-batch 4 (2
   * accumulation steps; 8 would not fit), the 32 H100s can only run 1. Every other micro-batch that
   * fits and divides is no faster. */
  auto s = io::load_scenario(test::zoo_dir().parent_path() / "scenarios" / "llama70b-full-h100-vs-workstation.yaml",
                             test::zoo(), test::catalog());
  // The reader leaves them open (it simulates nothing), and evaluation refuses a plan left so.
  for (const auto& p : s.plans) CHECK(p.job.knobs_open());
  CHECK_THROWS_WITH(evaluate::evaluate_plan(s.model, s.plans[0]), doctest::Contains("open knobs are chosen"));
  evaluate::choose_open_knobs(s);
  for (const auto& p : s.plans) {
    INFO(p.name);
    CHECK(p.job.micro_batch_auto);
    const int dp = plan::data_parallel_degree(p);
    CHECK(p.job.global_batch % (p.job.micro_batch * dp) == 0);
    CHECK(footprint::footprint(s.model, p).fits);
    const double chosen = sim::simulate_step(s.model, p).step_time_s;
    for (int mb = 1; mb <= 8; ++mb) {
      plan::Plan q = p;
      q.job.micro_batch = mb;
      if (p.job.global_batch % (mb * dp) != 0 || !footprint::footprint(s.model, q).fits) continue;
      CHECK(sim::simulate_step(s.model, q).step_time_s >= chosen);
    }
  }
  CHECK(s.plans[0].job.micro_batch == 1);
  CHECK(s.plans[1].job.micro_batch == 4);
}

TEST_CASE("activation_checkpointing: auto picks, with the micro-batch, the fastest combination that fits") {
  /* Llama-3.2-1B full fine-tune on one H100, global batch 16: without checkpointing the step
   * recomputes nothing, and micro-batches up to 16 fit; auto must find a combination no other
   * fitting, dividing (micro-batch, checkpointing) beats, and it is not full checkpointing. */
  auto s = io::parse_scenario(
      "schema_version: 1\nmodel: llama-3.2-1b\njob: {method: full, seq_len: 1024, micro_batch: auto, global_batch: 16, "
      "steps: 1, activation_checkpointing: auto, framework: hf-trainer}\nplans:\n  - name: p\n"
      "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n",
      "auto.yaml", test::data_dir(), test::zoo(), test::catalog());
  evaluate::choose_open_knobs(s);
  const auto& p = s.plans[0];
  CHECK(p.job.checkpointing_auto);
  CHECK(p.job.checkpointing != plan::Checkpointing::full);
  const double chosen = sim::simulate_step(s.model, p).step_time_s;
  for (auto c : {plan::Checkpointing::none, plan::Checkpointing::selective, plan::Checkpointing::full})
    for (int mb : {1, 2, 4, 8, 16}) {
      plan::Plan q = p;
      q.job.checkpointing = c;
      q.job.micro_batch = mb;
      if (!footprint::footprint(s.model, q).fits) continue;
      CHECK(sim::simulate_step(s.model, q).step_time_s >= chosen);
    }
}

TEST_CASE("the planner's layouts fix the knobs a job leaves to auto: each layout is evaluated") {
  /* A search over a job with micro_batch: auto and activation_checkpointing: auto: the search
   * chooses both from its lists, so each layout it evaluates has them fixed (none may reach
   * evaluation with its knobs open: evaluate_plan refuses such a plan). */
  const auto s = io::parse_scenario(
      "schema_version: 1\nmodel: llama-3.2-1b\njob: {method: lora, seq_len: 1024, micro_batch: auto, global_batch: 16, "
      "steps: 1, activation_checkpointing: auto}\nsearch: {gpus: [h100-sxm-80gb], gpu_counts: [1, 2], tp: [1], pp: "
      "[1], zero: [0], micro_batch: [1, 2], activation_checkpointing: [none, full]}\n",
      "auto_search.yaml", test::data_dir(), test::zoo(), test::catalog());
  const planner::Result r = planner::search(s.model, s.job, test::catalog(), s.search, s.constraints, s.cost, 1);
  CHECK(r.failed == 0);
  CHECK(r.simulated == 8);
  for (const auto& c : r.candidates) CHECK(c.error.empty());
}
