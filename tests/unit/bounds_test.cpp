// Upper bounds of every count that sizes a simulation (issue 22): inputs past
// them are refused with located errors, a step too large to hold is refused by
// name, and the planner survives a plan that throws and an interruption.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "evaluate/pool.hpp"
#include "io/model_io.hpp"
#include "io/results.hpp"
#include "io/scenario_io.hpp"
#include "plan/checks.hpp"
#include "planner/planner.hpp"
#include "schedule/step_ir.hpp"
#include "sim/simulate.hpp"
#include "test_support.hpp"

using namespace ftplan;
namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(FTPLAN_TEST_SCRATCH) / "bounds" / name;
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

}  // namespace

TEST_CASE(
    "every entry point to a model has the same bounds, reported at the "
    "file, line and key") {
  SUBCASE(
      "zoo YAML: 100,000 layers (once inside the reader's range) are "
      "refused at `layers`") {
    const fs::path dir = scratch("zoo");
    std::string text = read(test::zoo_dir() / "models" / "llama-3.2-1b.yaml");
    text = std::regex_replace(text, std::regex("\nlayers: 16\n"), "\nlayers: 100000\n");
    const fs::path file = dir / "llama-3.2-1b.yaml";
    write(file, text);
    const std::string msg = test::input_error_of([&] { io::load_model_file(file); });
    CHECK(msg.find(file.string() + ":8:") != std::string::npos);
    CHECK(msg.find("layers: 100000 layers are more than 1024") != std::string::npos);
    // 1024 itself is accepted.
    write(file, std::regex_replace(text, std::regex("\nlayers: 100000\n"), "\nlayers: 1024\n"));
    CHECK(test::input_error_of([&] { io::load_model_file(file); }).empty());
  }
  const std::string llama = read(test::data_dir() / "hf" / "llama-3.1-8b" / "config.json");
  const auto hf_error = [&](const std::string& key, const std::string& value) {
    const fs::path dir = scratch("hf-" + key + "-" + value);
    const fs::path file = dir / "config.json";
    write(file, std::regex_replace(llama, std::regex("\"" + key + "\": [0-9]+"), "\"" + key + "\": " + value));
    return std::make_pair(file.string(), test::input_error_of([&] { io::load_hf_config(file); }));
  };
  SUBCASE(
      "HF config.json: a billion layers are refused at num_hidden_layers "
      "(line 17)") {
    const auto [file, msg] = hf_error("num_hidden_layers", "1000000000");
    CHECK(msg.find(file + ":17:") != std::string::npos);
    CHECK(msg.find("num_hidden_layers: 1000000000 layers are more than 1024") != std::string::npos);
    CHECK(msg.find("model.layers") != std::string::npos);
  }
  SUBCASE("HF config.json: 2^32 + 1 layers are an error, not 1 layer") {
    const auto [file, msg] = hf_error("num_hidden_layers", "4294967297");
    CHECK(msg.find(file + ":17:") != std::string::npos);
  }
  SUBCASE(
      "HF config.json: num_key_value_heads 0 is refused (it read as 'as "
      "many as the query heads')") {
    const auto [file, msg] = hf_error("num_key_value_heads", "0");
    CHECK(msg.find(file + ":18:") != std::string::npos);
    CHECK(msg.find("num_key_value_heads") != std::string::npos);
  }
  SUBCASE("HF config.json: a vocabulary past the bound, at vocab_size") {
    const auto [file, msg] = hf_error("vocab_size", "1000000000");
    CHECK(msg.find(file + ":33:") != std::string::npos);
    CHECK(msg.find("model.vocab") != std::string::npos);
  }
  SUBCASE("a scenario's inline model: the same check, at the scenario's key") {
    const std::string text =
        "schema_version: 1\nname: deep\nmodel:\n  name: deep\n  hidden: 512\n  "
        "layers: 5000\n  heads: 8\n  ffn: 2048\n"
        "  vocab: 32000\n  max_context: 4096\njob: {method: lora, tokens: 1M, "
        "global_batch: 8}\n"
        "plans:\n  - name: a\n    cluster: {gpu: rtx-4090, gpus: 1}\n";
    const std::string msg = test::input_error_of(
        [&] { io::parse_scenario(text, "deep.yaml", test::data_dir(), test::zoo(), test::catalog()); });
    CHECK(msg.find("deep.yaml:6:") != std::string::npos);
    CHECK(msg.find("model.layers") != std::string::npos);
    CHECK(msg.find("more than 1024") != std::string::npos);
  }
}

namespace {

// The reproduction: Llama-3.2-1B LoRA on one RTX 4090, 1M tokens,
// global batch `batch`.
plan::Scenario lora_1b(const std::string& batch) {
  const std::string text =
      "schema_version: 1\nname: big batch\nmodel: llama-3.2-1b\njob:\n  "
      "method: lora\n"
      "  seq_len: 2048\n  micro_batch: 1\n  global_batch: " +
      batch +
      "\n  tokens: 1M\n  precision: bf16-mixed\n"
      "plans:\n  - name: one 4090\n    cluster: {gpu: rtx-4090, gpus: 1}\n";
  return io::parse_scenario(text, "big.yaml", test::data_dir(), test::zoo(), test::catalog());
}

}  // namespace

TEST_CASE(
    "a global batch past ftplan's limit is refused at its line, not "
    "simulated") {
  /* global_batch 4294967296 (2^32) made the accumulation count 0 as an int:
   * SIGSEGV in the step IR builder. The reader bounds it by
   * plan::kMaxGlobalBatch (2^24) and names line 8.        */
  const std::string msg = test::input_error_of([] { lora_1b("4294967296"); });
  CHECK(msg.find("big.yaml:8") != std::string::npos);
  CHECK(msg.find("job.global_batch") != std::string::npos);
  CHECK(msg.find(std::to_string(plan::kMaxGlobalBatch)) != std::string::npos);
  CHECK(test::input_error_of([] { lora_1b("16777216"); }).empty());  // the limit itself is accepted
}

TEST_CASE(
    "a step too large to hold is refused by name; the steady-state "
    "shortcut simulates it in bounded memory") {
  /* The largest accepted batch: 2^24 micro-batches x 16 layers = 2^28 layer
   * passes, 4,096x schedule::kMaxLayerPasses (2^16). Before the bound, building
   * it reserved ~10^10 ops (std::length_error / bad_alloc) or ran out of
   * memory. The whole step is simulated when asked (max_micro_batches 0:
   * simulate --trace, a sweep's steady_state: false, GPipe). */
  const plan::Scenario s = lora_1b(std::to_string(plan::kMaxGlobalBatch));
  const plan::Plan& p = s.plans.front();
  CHECK(schedule::layer_passes(s.model, p) == plan::kMaxGlobalBatch * 16);
  sim::Options whole;
  whole.max_micro_batches = 0;
  const sim::StepResult full = sim::simulate_step(s.model, p, whole);
  CHECK_FALSE(full.ok);
  CHECK(full.problem.find("not simulated") != std::string::npos);
  CHECK(full.problem.find(std::to_string(schedule::kMaxLayerPasses)) != std::string::npos);
  CHECK(full.problem.find("16777216 micro-batches x 16 layers") != std::string::npos);
  // build_step refuses as well (the CLI's --ir path), with the same message.
  CHECK_THROWS_WITH_AS(schedule::build_step(s.model, p, inventory::build_inventory(s.model, p, 0)),
                       doctest::Contains("not simulated"), std::length_error);
  // evaluate::evaluate_plan reports it as the plan's reason, with nothing else failing.
  const evaluate::Evaluation e = evaluate::evaluate_plan(s.model, p, whole);
  CHECK_FALSE(e.feasible());
  CHECK(e.reason().find("layer passes") != std::string::npos);

  // The steady-state shortcut (every verb's default) builds 3 micro-batches
  // whatever the batch: within bounds, and 2^24 micro-batches take 2^24 / 2^4 = 2^20 times
  // as long as 16 (same per-micro-batch work).
  sim::Options o;
  o.max_micro_batches = sim::kSteadyStateMicroBatches;
  const sim::StepResult big = sim::simulate_step(s.model, p, o);
  REQUIRE(big.ok);
  const plan::Scenario small = lora_1b("16");
  const sim::StepResult sixteen = sim::simulate_step(small.model, small.plans.front(), o);
  REQUIRE(sixteen.ok);
  CHECK(big.step_time_s / sixteen.step_time_s == doctest::Approx(1 << 20).epsilon(0.01));
}

TEST_CASE(
    "a plan's GPU count is bounded even when nodes x gpus_per_node is "
    "not checked by the reader") {
  const plan::Scenario s = lora_1b("16");
  plan::Plan p = s.plans.front();
  p.cluster.nodes = 1 << 20;  // the reader's bound on nodes
  p.cluster.gpus_per_node = 1024;
  const auto findings = plan::check_plan(s.model, p);
  REQUIRE_FALSE(findings.empty());
  CHECK(findings.front().key == "cluster.nodes");
  CHECK(findings.front().message.find(std::to_string(plan::kMaxGpus)) != std::string::npos);
}

TEST_CASE(
    "the worker pool hands a task's exception back as that task's; the "
    "others run") {
  /* 100 tasks on 3 workers; tasks 7 and 42 throw. Every task runs once;
   * failed() sees 7 and 42. */
  std::vector<std::atomic<int>> runs(100);
  std::mutex m;
  std::set<std::size_t> failed;
  const std::size_t ran = evaluate::for_each(
      100, 3,
      [&](std::size_t i) {
        ++runs[i];
        if (i == 7 || i == 42) throw std::length_error("vector::reserve");
      },
      [&](std::size_t i, std::exception_ptr) {
        const std::lock_guard lock(m);
        failed.insert(i);
      });
  CHECK(ran == 100);
  for (const auto& r : runs) CHECK(r.load() == 1);
  CHECK(failed == std::set<std::size_t>{7, 42});

  // A stop flag: no task starts once it is set (one worker: exactly the first 5
  // run).
  std::atomic<bool> stop{false};
  std::size_t count = 0;
  const std::size_t ran_stopped = evaluate::for_each(
      100, 1, [&](std::size_t) { stop = ++count == 5; }, [](std::size_t, std::exception_ptr) {}, &stop);
  CHECK(ran_stopped == 5);
  CHECK(count == 5);
}

namespace {

plan::Scenario search_scenario() {
  // The example's recipe on Llama-3.1-8B and a smaller grid: one GPU type, 4-8
  // GPUs, 48 layouts (44 after the layouts that need more GPUs than there are),
  // 33 simulated.
  std::string text = read(test::zoo_dir().parent_path() / "scenarios" / "llama70b-plan.yaml");
  text = std::regex_replace(text, std::regex("model: llama-3.1-70b"), "model: llama-3.1-8b");
  plan::Scenario s = io::parse_scenario(text, "plan.yaml", test::data_dir(), test::zoo(), test::catalog());
  s.search.gpus = {"h100-sxm-80gb"};
  s.search.gpu_counts = {4, 8};
  s.search.tp = {1, 2, 4};
  s.search.pp = {1, 2};
  s.search.zero = {1, 3};
  s.search.micro_batch = {1};
  s.search.offload = {plan::OffloadPreset::none};
  return s;
}

}  // namespace

TEST_CASE(
    "the planner lists a plan whose evaluation throws as failed, with "
    "its reason, and goes on") {
  /* The pool ended the process (std::terminate from a worker thread, even with
   * one thread) on one plan's std::length_error. Here every plan with "tp2" in
   * its name throws; the rest are simulated. */
  const plan::Scenario s = search_scenario();
  planner::Control control;
  control.evaluate = [&](const plan::Plan& p) {
    if (p.name.find(" tp2 ") != std::string::npos)
      throw std::length_error("cannot create std::vector larger than max_size()");
    return evaluate::evaluate_plan(s.model, p);
  };
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    const planner::Result r =
        planner::search(s.model, s.job, test::catalog(), s.search, s.constraints, s.cost, threads, control);
    REQUIRE(r.failed > 0);
    CHECK_FALSE(r.interrupted);
    CHECK(r.examined == r.enumerated);
    std::int64_t failed = 0, fine = 0;
    for (const auto& c : r.candidates) {
      if (c.plan.name.find(" tp2 ") != std::string::npos) {
        ++failed;
        CHECK(c.error == "cannot create std::vector larger than max_size()");
        CHECK_FALSE(c.evaluation.feasible());
        CHECK(c.evaluation.reason() ==
              "could not be evaluated: cannot create "
              "std::vector larger than max_size()");
        CHECK_FALSE(c.meets_constraints);
      } else {
        CHECK(c.error.empty());
        fine += c.evaluation.feasible();
      }
    }
    CHECK(failed == r.failed);
    CHECK(fine > 0);  // the search went on past the failures
    CHECK(r.fastest >= 0);
    for (int i : r.pareto) CHECK(r.candidates[static_cast<std::size_t>(i)].error.empty());
  }
}

TEST_CASE(
    "an interrupted search returns the plans simulated so far, with its "
    "picks among them, and reports progress") {
  const plan::Scenario s = search_scenario();
  const planner::Result whole = planner::search(s.model, s.job, test::catalog(), s.search, s.constraints, s.cost, 1);
  REQUIRE(whole.enumerated > 20);
  std::atomic<bool> stop{false};
  std::int64_t reports = 0, last = 0;
  planner::Control control;
  control.stop = &stop;
  control.progress = [&](std::int64_t examined, std::int64_t enumerated, std::int64_t) {
    ++reports;
    CHECK(examined > last);  // one thread: every layout reports, in order
    CHECK(enumerated == whole.enumerated);
    last = examined;
    if (examined == 20) stop = true;
  };
  const planner::Result r =
      planner::search(s.model, s.job, test::catalog(), s.search, s.constraints, s.cost, 1, control);
  CHECK(r.interrupted);
  CHECK(r.examined == 20);
  CHECK(reports == 20);
  CHECK(r.enumerated == whole.enumerated);
  // The first 20 layouts' plans, exactly as the whole search simulated them.
  REQUIRE(r.simulated == static_cast<std::int64_t>(r.candidates.size()));
  REQUIRE(r.candidates.size() <= whole.candidates.size());
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    CHECK(r.candidates[i].plan.name == whole.candidates[i].plan.name);
    CHECK(r.candidates[i].evaluation.cost.job_time_s == whole.candidates[i].evaluation.cost.job_time_s);
  }
  if (r.fastest >= 0) CHECK(r.candidates[static_cast<std::size_t>(r.fastest)].meets_constraints);
  CHECK(r.pareto == planner::pareto_front(r.candidates));
}
