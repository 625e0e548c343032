// Result rows as CSV/JSON readers see them: plain identifiers for every column, shares as
// fractions named so, and no 0 standing in for a figure that does not exist.
#include <doctest/doctest.h>

#include <cmath>
#include <regex>
#include <string>

#include "common/strings.hpp"
#include "io/results.hpp"
#include "io/scenario_io.hpp"
#include "test_support.hpp"

using namespace ftplan;

namespace {

plan::Scenario scenario(const std::string& plan_yaml) {
  const std::string text =
      "schema_version: 1\nmodel: llama-3.2-1b\n"
      "job: {method: full, seq_len: 1024, micro_batch: 1, steps: 10, framework: deepspeed}\n"
      "plans:\n  - name: p\n" +
      plan_yaml;
  return io::parse_scenario(text, "results_test.yaml", test::data_dir(), test::zoo(), test::catalog());
}

io::Row row_of(const plan::Scenario& s, const plan::Plan& p) {
  const evaluate::Evaluation e = evaluate::evaluate_plan(s.model, p);
  return io::cost_row(p, e.memory, e.step, e.power, e.cost);
}

}  // namespace

TEST_CASE("display names become plain snake_case identifiers") {
  CHECK(identifier("host dram (share)") == "host_dram_share");
  CHECK(identifier("gpu-gpu (pcie)") == "gpu_gpu_pcie");
  CHECK(identifier("stage 1 comm-reduce") == "stage_1_comm_reduce");
  CHECK(identifier("  Node 0 PCIe switch uplink 1 ") == "node_0_pcie_switch_uplink_1");
  CHECK(identifier("compute") == "compute");
}

TEST_CASE("every column of a tiered plan's row is an identifier; shares are fractions named so") {
  /* Full fine-tune of Llama-3.2-1B on one H100 with DeepSpeed ZeRO-Infinity: parameters, gradients and
   * optimizer states stream through host DRAM and NVMe, so the row has the shared links (their
   * display names, "host dram (share)", hold spaces and parentheses) and the copy streams. */
  const plan::Scenario s = scenario(
      "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n    parallel: {zero: 3}\n    offload: {preset: zero-infinity}\n");
  const io::Row r = row_of(s, s.plans.front());
  REQUIRE(std::get<bool>(*r.get("feasible")));
  const std::regex ident("[a-z0-9_]+(\\.[a-z0-9_]+)*");
  int links = 0, streams = 0;
  for (const auto& field : r.fields) {
    const std::string& k = field.first;  // not a structured binding: Clang 14 cannot capture one (CHECK_MESSAGE)
    CHECK_MESSAGE(std::regex_match(k, ident), k);
    if (k.rfind("links.", 0) == 0) ++links;
    if (k.rfind("utilization.", 0) == 0) {
      ++streams;
      CHECK_MESSAGE(k.size() > 9, k);
      CHECK_MESSAGE(k.substr(k.size() - 9) == "_fraction", k);
    }
  }
  CHECK(links > 0);
  CHECK(streams > 0);
  REQUIRE(r.get("links.host_dram_share.bytes"));
  CHECK(std::get<std::int64_t>(*r.get("links.host_dram_share.bytes")) > 0);
  REQUIRE(r.get("links.host_dram_share.utilization_fraction"));
  const double u = std::get<double>(*r.get("links.host_dram_share.utilization_fraction"));
  CHECK(u > 0);
  CHECK(u <= 1);
  REQUIRE(r.get("bound_utilization_fraction"));
  CHECK(std::get<double>(*r.get("bound_utilization_fraction")) <= 1);
  CHECK(r.get("bound_utilization") == nullptr);
}

TEST_CASE("flash wear of a plan without drives is null, not 0") {
  /* The same plan on a node with its drives and without: with drives and no NVMe writes the wear
   * is a real 0; without drives there is no wear to state. */
  const plan::Scenario s = scenario("    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n");
  plan::Plan with = s.plans.front();
  REQUIRE_FALSE(with.cluster.drives.empty());
  const io::Row a = row_of(s, with);
  REQUIRE(std::get<bool>(*a.get("feasible")));
  CHECK(std::get<double>(*a.get("flash_wear_fraction")) == 0.0);
  plan::Plan without = with;
  without.cluster.drives.clear();
  const io::Row b = row_of(s, without);
  REQUIRE(std::get<bool>(*b.get("feasible")));
  CHECK(std::holds_alternative<std::nullptr_t>(*b.get("flash_wear_fraction")));
}

TEST_CASE("the one CSV writer: header in first-seen order, missing cells empty, text quoted as RFC 4180 says") {
  io::Row a, b;
  a.set("plan", std::string("8x H100, ZeRO-3"));
  a.set("step_time_s", 1.5);
  b.set("plan", std::string("say \"hi\"\nthere"));
  b.set("gpu_count", std::int64_t{8});
  b.set("mfu", std::nan(""));
  /* Columns: plan, step_time_s (a's), then gpu_count, mfu (b's). A comma, a quote and a newline
   * each make a quoted cell, quotes doubled; b has no step time, a no GPU count; NaN is empty. */
  CHECK(io::rows_to_csv({a, b}) ==
        "plan,step_time_s,gpu_count,mfu\n"
        "\"8x H100, ZeRO-3\",1.5,,\n"
        "\"say \"\"hi\"\"\nthere\",,8,\n");
  /* Columns given: their order, others left out. */
  CHECK(io::rows_to_csv({a, b}, {"gpu_count", "plan"}) ==
        "gpu_count,plan\n,\"8x H100, ZeRO-3\"\n8,\"say \"\"hi\"\"\nthere\"\n");
  CHECK(io::csv_line({"a,b", "c"}) == "\"a,b\",c\n");
  CHECK(io::csv_line({}) == "\n");
}

TEST_CASE("the one CSV reader reads what the writer wrote, with each record's line") {
  /* The writer's table above: three records on lines 1, 2 and 3, the third's first cell holding a
   * quote and a line break (so a fourth record would start on line 5). CRLF ends read as LF; a
   * blank line is a record of one empty cell; a quoted cell never closed names its line. */
  const auto records = io::read_csv(
      "plan,step_time_s,gpu_count,mfu\r\n"
      "\"8x H100, ZeRO-3\",1.5,,\n"
      "\"say \"\"hi\"\"\nthere\",,8,\n"
      "\n"
      "last,1,2,3",
      "t.csv");
  REQUIRE(records.size() == 5);
  CHECK(records[0].cells == std::vector<std::string>{"plan", "step_time_s", "gpu_count", "mfu"});
  CHECK(records[1].cells == std::vector<std::string>{"8x H100, ZeRO-3", "1.5", "", ""});
  CHECK(records[2].cells == std::vector<std::string>{"say \"hi\"\nthere", "", "8", ""});
  CHECK(records[3].cells == std::vector<std::string>{""});
  CHECK(records[4].cells == std::vector<std::string>{"last", "1", "2", "3"});
  CHECK(records[0].line == 1);
  CHECK(records[2].line == 3);
  CHECK(records[3].line == 5);
  CHECK(records[4].line == 6);
  CHECK_THROWS_WITH_AS(io::read_csv("a,b\n\"open,1\n", "cut.csv"), doctest::Contains("cut.csv:3"), InputError);
}
