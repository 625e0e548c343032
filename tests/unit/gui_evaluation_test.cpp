// The GUI's evaluation (gui/evaluation.cpp, Qt-free): scenario text + what-if knobs through the
// CLI's reader, checks and evaluation.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/strings.hpp"
#include "gui/evaluation.hpp"
#include "io/output_schema.hpp"
#include "test_support.hpp"

using namespace ftplan;

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

gui::Outcome run(const std::string& text, const gui::Overrides& o = {}) {
  return gui::evaluate(text, "s.yaml", test::data_dir(), test::zoo(), test::catalog(), o);
}

}  // namespace

TEST_CASE("the GUI evaluates a scenario's plans as the CLI's compare does, and applies what-if knobs") {
  const std::string text = read(test::zoo_dir().parent_path() / "scenarios" / "llama70b-full-h100-vs-workstation.yaml");
  const auto base = run(text);
  REQUIRE(base.scenario);
  CHECK(base.errors.empty());
  REQUIRE(base.evaluations.size() == 2);
  CHECK(!base.verdict.empty());
  CHECK(base.evaluations[0].feasible());
  // The table is compare's, cell by cell: cents below $100, "vs first", GPU time not computing.
  const auto row = [&](const gui::Outcome& o, const std::string& name) {
    const auto at =
        std::find_if(o.comparison.rows.begin(), o.comparison.rows.end(), [&](const auto& r) { return r.name == name; });
    REQUIRE(at != o.comparison.rows.end());
    return *at;
  };
  CHECK(base.comparison.basis == "rented, billed per second");
  CHECK(row(base, "cost").cells[0] == present::money(base.evaluations[0].cost.cost_usd));
  CHECK(row(base, "cost").cells[0].find('.') != std::string::npos);  // $82.78, not $83
  CHECK(!row(base, "job time").vs_first[1].empty());
  CHECK(row(base, "GPU time not computing").cells[1].find("GPU-h") != std::string::npos);
  // The answer in one line: A is cheaper and sooner; B is 1.9x the cost and 58x the time.
  CHECK(base.answer.rfind("Cheapest: A 32x H100 FSDP, $", 0) == 0);
  CHECK(base.answer.find("(rented, billed per second)") != std::string::npos);
  CHECK(base.answer.find("B 4x RTX 6000 Ada + flash is 1.9x the cost and 58x the time") != std::string::npos);

  // Without checkpointing the 32-GPU plan keeps every layer's activations: more memory.
  gui::Overrides none;
  none.checkpointing = plan::Checkpointing::none;
  const auto more = run(text, none);
  REQUIRE(more.scenario);
  CHECK(more.evaluations[0].memory.gpu_peak_bytes() > base.evaluations[0].memory.gpu_peak_bytes());

  // Exported as `ftplan compare --format json/csv` writes them, the answer on top.
  const auto json = nlohmann::json::parse(gui::results_json(base));
  CHECK(json["schema_version"] == io::kOutputSchemaVersion);
  REQUIRE(json["results"].size() == 2);
  CHECK(json["results"][0]["plan"] == "A 32x H100 FSDP");
  CHECK(json["results"][0]["cost_usd"].get<double>() == doctest::Approx(base.evaluations[0].cost.cost_usd));
  CHECK(json["answer"] == base.answer);
  // compare's notes and crossover too (the export lacked them): this scenario rents, so no
  // crossover; its notes as compare's.
  CHECK(json.contains("advice"));
  CHECK(json["ownership"].is_null());
  // compare's "Rent:" line: where each rented plan's rate comes from.
  CHECK(json["rent"] == present::rent_words(base.plans, base.evaluations));
  CHECK(json["rent"].get<std::string>().find("no cloud rents Workstation with 4x RTX 6000 Ada") != std::string::npos);
  // compare's "Bought" line: what each plan's capex buys, the parts the tiered plan adds included.
  CHECK(json["bought"] == present::bom_words(base.plans));
  CHECK(json["bought"].get<std::string>().find("4 x NVIDIA DGX H100 at $300,000 = $1,200,000") != std::string::npos);
  CHECK(json["bought"].get<std::string>().find("+2 x Gigabyte AI TOP 100E") != std::string::npos);
  const auto notes = present::advice(base.scenario->model, base.plans, base.evaluations);
  if (notes.empty())
    CHECK(json["advice"].is_null());
  else
    CHECK(json["advice"] == join(notes, " "));
  const std::string csv = gui::results_csv(base);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);  // header + 2 plans
  CHECK(csv.rfind("plan,", 0) == 0);

  // A deadline no plan meets: the answer says so, and why each is out.
  std::string tight = text + "constraints: {deadline: 30 min}\n";
  const auto late = run(tight);
  REQUIRE(late.scenario);
  CHECK(late.answer.rfind(
            "No plan meets the constraints (deadline 30.0 min): A 32x H100 FSDP: 51.7 min, past the deadline", 0) == 0);

  // A knob the plans cannot take is reported like the reader's checks, naming plan and key.
  // (The scenario's global batch of 32 does not split into micro-batches of 3 on 32 GPUs.)
  gui::Overrides odd;
  odd.micro_batch = 3;
  const auto refused = run(text, odd);
  CHECK(!refused.scenario);
  REQUIRE(!refused.errors.empty());
  CHECK(refused.errors.front().find("plan 'A 32x H100 FSDP': job.global_batch") != std::string::npos);

  // A typo in the text: the reader's message with its line, which the editor marks.
  std::string typo = text;
  const auto at = typo.find("seq_len:");
  REQUIRE(at != std::string::npos);
  typo.replace(at, 8, "seq_lenn:");
  const auto bad = run(typo);
  CHECK(!bad.scenario);
  REQUIRE(!bad.errors.empty());
  CHECK(bad.errors.front().rfind("s.yaml:", 0) == 0);
  REQUIRE(bad.error_lines.size() == bad.errors.size());
  CHECK(bad.error_lines.front() ==
        1 + static_cast<int>(std::count(typo.begin(), typo.begin() + static_cast<long>(at), '\n')));
}

TEST_CASE("for a search scenario the GUI shows the planner's picks and keeps the whole search") {
  const std::string text = R"(schema_version: 1
name: small search
model: llama-3.1-8b
job: {method: full, seq_len: 2048, global_batch: 16, tokens: 10M, framework: deepspeed}
search:
  gpus: [h100-sxm-80gb]
  gpu_counts: [1, 8]
  zero: [1, 3]
  micro_batch: [1, 2]
  activation_checkpointing: [full]
  offload: [none, zero-offload]
constraints: {max_gpus: 8}
)";
  const auto o = run(text);
  REQUIRE(o.scenario);
  REQUIRE(o.search);
  CHECK(o.search->simulated > 0);
  REQUIRE(!o.plans.empty());
  CHECK(o.plans.size() == o.evaluations.size());
  // Each shown plan says what it was picked for; a plan picked for several says so once.
  CHECK(o.plans.front().name.rfind("fastest", 0) == 0);
  for (const auto& p : o.plans) CHECK(p.name.find(": ") != std::string::npos);
  CHECK(o.verdict.find("layouts") != std::string::npos);
  CHECK(o.answer.rfind("Cheapest within at most 8 GPUs: ", 0) == 0);

  // The micro-batch and checkpointing knobs replace what the planner searches over.
  gui::Overrides two;
  two.micro_batch = 2;
  two.checkpointing = plan::Checkpointing::none;  // the text searches [full] only
  const auto fixed = run(text, two);
  REQUIRE(fixed.search);
  REQUIRE(!fixed.search->candidates.empty());
  for (const auto& c : fixed.search->candidates) {
    CHECK(c.plan.job.micro_batch == 2);
    CHECK(c.plan.job.checkpointing == plan::Checkpointing::none);
  }
}

TEST_CASE("the GUI writes the what-if knobs into the scenario's job block, comments kept") {
  const std::string text = read(test::zoo_dir().parent_path() / "scenarios" / "llama70b-full-h100-vs-workstation.yaml");
  gui::Overrides o;
  o.seq_len = 2048;
  o.checkpointing = plan::Checkpointing::none;
  const auto edit = gui::with_knobs(text, "s.yaml", test::data_dir(), test::zoo(), test::catalog(), o);
  REQUIRE(edit.problem.empty());
  CHECK(edit.text.find("  seq_len: 2048\n") != std::string::npos);
  CHECK(edit.text.find("  activation_checkpointing: none\n") != std::string::npos);
  CHECK(edit.text.find("seq_len: 4096") == std::string::npos);
  CHECK(edit.text.rfind("# The project's motivating question", 0) == 0);  // comments kept
  // Only those two lines changed.
  CHECK(std::count(edit.text.begin(), edit.text.end(), '\n') == std::count(text.begin(), text.end(), '\n'));
  // Read back without knobs it evaluates as the knobs made the text evaluate.
  const auto knobbed = run(text, o);
  const auto saved = run(edit.text);
  REQUIRE(saved.scenario);
  CHECK(saved.evaluations[0].memory.gpu_peak_bytes() == knobbed.evaluations[0].memory.gpu_peak_bytes());
  CHECK(saved.evaluations[1].cost.job_time_s == knobbed.evaluations[1].cost.job_time_s);

  // A key a plan sets itself: the knob overrides it there, the text's job would not.
  const std::string eight = read(test::zoo_dir().parent_path() / "scenarios" / "llama8b-single-gpu.yaml");
  gui::Overrides micro;
  micro.micro_batch = 1;
  const auto refused = gui::with_knobs(eight, "s.yaml", test::data_dir(), test::zoo(), test::catalog(), micro);
  CHECK(refused.text.empty());
  CHECK(refused.problem.find("plan '8x H100 LoRA'") != std::string::npos);
}

TEST_CASE("a GUI evaluation stops when asked, with nothing to show") {
  const std::string text = read(test::zoo_dir().parent_path() / "scenarios" / "llama70b-full-h100-vs-workstation.yaml");
  const std::atomic<bool> stop{true};
  const auto o = gui::evaluate(text, "s.yaml", test::data_dir(), test::zoo(), test::catalog(), {}, &stop);
  CHECK(o.cancelled);
  CHECK(o.evaluations.empty());
}

TEST_CASE("a search is reused when only the text's plans changed, and run again when what it reads changed") {
  const std::string text = read(test::zoo_dir().parent_path() / "scenarios" / "llama70b-plan.yaml");
  const std::string with_plan =
      text + "plans:\n  - name: mine\n    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    parallel: {zero: 3}\n";
  CHECK(gui::search_key(text, {}) == gui::search_key(with_plan, {}));
  gui::Overrides micro;
  micro.micro_batch = 1;
  CHECK(gui::search_key(text, {}) != gui::search_key(text, micro));
  std::string later = text;
  later.replace(later.find("deadline: 3 d"), 13, "deadline: 2 d");
  CHECK(gui::search_key(text, {}) != gui::search_key(later, {}));
  // Reused: the same result object, and the text's plan evaluated beside the picks.
  auto fake = std::make_shared<const planner::Result>();
  const auto o = gui::evaluate(with_plan, "s.yaml", test::data_dir(), test::zoo(), test::catalog(), {}, nullptr,
                               {gui::search_key(text, {}), fake});
  REQUIRE(o.scenario);
  CHECK(o.search == fake);
  REQUIRE(o.plans.size() == 1);  // the empty fake search has no picks
  CHECK(o.plans[0].name == "mine");
  CHECK(o.text_plan == std::vector<int>{0});
}

TEST_CASE("the new-scenario form writes a scenario that reads clean and evaluates, for every choice it offers") {
  /* Every method x every offload preset, GPUs by count or a node, with and without the tiered
   * plan beside it: the text reads back without an error and each plan is evaluated. A model by
   * its Hugging Face config.json too. */
  int cases = 0;
  const std::vector<std::string> presets = names_of<plan::OffloadPreset>();  // a new preset is covered
  for (const char* method : {"full", "lora", "qlora"})
    for (const std::string& offload : presets)
      for (const bool node : {false, true})
        for (const bool tiered : {false, true}) {
          gui::NewScenario n;
          n.model = "llama-3.2-1b";
          n.method = method;
          n.offload = offload;
          n.tokens = "1M";
          n.seq_len = 1024;
          if (node) {
            n.node = "dgx-h100";
            n.count = 1;
          }
          n.compare_tiered = tiered;
          const std::string text = gui::new_scenario_text(n);
          INFO(text);
          const auto o = run(text);
          CHECK(o.errors.empty());
          REQUIRE(o.scenario);
          CHECK(o.evaluations.size() == (tiered && offload != "none" ? 2u : 1u));
          ++cases;
        }
  CHECK(cases == static_cast<int>(3 * presets.size() * 4));
  gui::NewScenario hf;
  hf.model = (test::data_dir() / "hf" / "llama-3.1-8b" / "config.json").string();
  hf.tokens = "1M";
  const auto o = run(gui::new_scenario_text(hf));
  CHECK(o.errors.empty());
  REQUIRE(o.scenario);
  CHECK(o.scenario->model.layers == 32);
}
