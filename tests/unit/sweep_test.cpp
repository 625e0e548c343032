// Sweeps: expansion of grid, zip, range, geometric, random and Latin-hypercube axes; dotted keys
// applied to the base scenario and read like a file; errors naming the sweep file's line and key;
// shards; the journal; merged shards equal to one unsharded run.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/scenario_io.hpp"
#include "io/yaml_reader.hpp"
#include "sweep/output.hpp"
#include "sweep/sweep.hpp"
#include "test_support.hpp"

using namespace ftplan;

namespace {

// A small, fast base: LoRA on one RTX 4090 (a handful of micro-batches a step).
constexpr const char* kScenario = R"(scenario:
  schema_version: 1
  model: llama-3.2-1b
  job: {method: lora, seq_len: 1024, micro_batch: 1, global_batch: 2, steps: 10}
  plans:
    - name: one 4090
      cluster: {gpu: rtx-4090, gpus: 1}
    - name: two.h100
      cluster: {gpu: h100-sxm-80gb, gpus: 2}
)";

sweep::Sweep make(const std::string& rest) {
  const std::string text = std::string("schema_version: 1\n") + kScenario + rest;
  return sweep::Sweep::parse(text, "sweep.yaml", test::data_dir(), test::zoo(), test::catalog());
}

std::string error_of(const std::string& rest) {
  return test::input_error_of([&] { make(rest); });
}

std::int64_t as_int(const io::Value& v) { return std::get<std::int64_t>(v); }
double as_double(const io::Value& v) { return std::get<double>(v); }

}  // namespace

TEST_CASE("a grid is the cartesian product, the last axis varying fastest") {
  /* 3 sequence lengths x 2 micro-batches = 6 points, in nested-loop order of the file. */
  const auto s = make(
      "axes:\n"
      "  - {key: job.seq_len, values: [512, 1024, 2048]}\n"
      "  - {key: job.micro_batch, values: [1, 2]}\n");
  REQUIRE(s.size() == 6);
  REQUIRE(s.axes().size() == 2);
  CHECK(s.axes()[0].column == "axis.job.seq_len");
  const std::int64_t seq[] = {512, 512, 1024, 1024, 2048, 2048}, mb[] = {1, 2, 1, 2, 1, 2};
  for (int p = 0; p < 6; ++p) {
    const auto v = s.values(p);
    CHECK(as_int(v[0]) == seq[p]);
    CHECK(as_int(v[1]) == mb[p]);
  }
}

TEST_CASE("zip pairs values; range and geometric generate them") {
  /* zip group (3 pairs) x range 1..7 step 3 (1, 4, 7) = 9 points; geometric 1, 2, 4, 8 alone = 4;
   * a real range 0.5..1.0 step 0.25 = 0.5, 0.75, 1.0. */
  const auto s = make(
      "axes:\n"
      "  - zip:\n"
      "      - {key: job.seq_len, values: [512, 1024, 2048]}\n"
      "      - {key: job.global_batch, values: [2, 4, 8]}\n"
      "  - {key: job.steps, range: {from: 1, to: 7, step: 3}}\n");
  REQUIRE(s.size() == 9);
  CHECK(as_int(s.values(4)[0]) == 1024);
  CHECK(as_int(s.values(4)[1]) == 4);
  CHECK(as_int(s.values(4)[2]) == 4);
  CHECK(as_int(s.values(8)[2]) == 7);

  const auto g = make("axes:\n  - {key: job.micro_batch, geometric: {from: 1, to: 8, factor: 2}}\n");
  REQUIRE(g.size() == 4);
  CHECK(as_int(g.values(3)[0]) == 8);

  const auto r = make("axes:\n  - {key: job.lora.dropout, range: {from: 0.5, to: 1.0, step: 0.25}}\n");
  REQUIRE(r.size() == 3);
  CHECK(as_double(r.values(1)[0]) == doctest::Approx(0.75));

  const auto z = make(
      "mode: zip\n"
      "axes:\n"
      "  - {key: job.seq_len, values: [512, 1024]}\n"
      "  - {key: job.micro_batch, values: [1, 2]}\n");
  CHECK(z.size() == 2);
}

TEST_CASE("Latin-hypercube samples put one point in each stratum of every axis, the same for the same seed") {
  /* LHS (McKay, Beckman & Conover 1979): with 10 points over a continuous range 0..10, each of
   * the strata [0,1), [1,2), ... [9,10) holds exactly one point; over a 5-value list, each value
   * is drawn exactly twice. Random sampling guarantees neither. */
  const std::string rest =
      "axes:\n"
      "  - {key: job.lora.alpha, range: {from: 0, to: 10}}\n"
      "  - {key: job.lora.rank, values: [4, 8, 16, 32, 64]}\n"
      "sample: {method: lhs, count: 10, seed: 42}\n";
  const auto s = make(rest);
  REQUIRE(s.size() == 10);
  std::set<int> strata;
  std::map<std::int64_t, int> ranks;
  for (int p = 0; p < 10; ++p) {
    const auto v = s.values(p);
    const double x = as_double(v[0]);
    CHECK(x >= 0);
    CHECK(x < 10);
    strata.insert(static_cast<int>(x));
    ++ranks[as_int(v[1])];
  }
  CHECK(strata.size() == 10);
  CHECK(ranks.size() == 5);
  for (const auto& [r, n] : ranks) CHECK(n == 2);
  // Deterministic: same seed, same points; another seed, other points.
  const auto again = make(rest);
  const auto other = make(std::string(rest).replace(rest.find("seed: 42"), 8, "seed: 43"));
  bool differs = false;
  for (int p = 0; p < 10; ++p) {
    CHECK(as_double(again.values(p)[0]) == as_double(s.values(p)[0]));
    differs = differs || as_double(other.values(p)[0]) != as_double(s.values(p)[0]);
  }
  CHECK(differs);

  const auto rnd = make(
      "axes:\n  - {key: job.lora.alpha, range: {from: 1, to: 100, scale: log, integer: true}}\n"
      "sample: {method: random, count: 50, seed: 1}\n");
  for (int p = 0; p < 50; ++p) {
    const auto x = as_int(rnd.values(p)[0]);
    CHECK(x >= 1);
    CHECK(x <= 100);
  }
}

TEST_CASE("dotted keys set one key for every plan, one plan by name or index, and create missing keys") {
  const auto s = make(
      "axes:\n"
      "  - {key: plans.*.job.micro_batch, values: [2]}\n"
      "  - {key: 'plans[two.h100].cluster.gpus', name: h100s, values: [4]}\n"
      "  - {key: plans.0.parallel.fsdp, values: [shard_grad_op]}\n"
      "  - {key: job.loss.chunks, values: [8]}\n"
      "  - {key: job.global_batch, values: [16]}\n");
  const std::string yaml = s.scenario_yaml(0);
  CHECK(yaml.find("\"gpus\": \"4\"") != std::string::npos);
  CHECK(yaml.find("\"chunks\": \"8\"") != std::string::npos);
  CHECK(s.axes()[1].column == "axis.h100s");
  const auto rows = s.evaluate(0);
  REQUIRE(rows.size() == 2);
  REQUIRE(rows[1].get("gpu_count"));
  CHECK(std::get<std::string>(*rows[0].get("plan")) == "one 4090");
  CHECK(as_int(*rows[0].get("gpu_count")) == 1);
  CHECK(as_int(*rows[1].get("gpu_count")) == 4);
  CHECK(as_int(*rows[1].get("axis.h100s")) == 4);
  CHECK(as_int(*rows[1].get("point")) == 0);
  // The full result fields of DESIGN.md's contract are there.
  for (const char* k : {"feasible",
                        "infeasible_reason",
                        "gpu_allocated_peak_bytes",
                        "gpu_reserved_peak_bytes",
                        "gpu_peak_bytes",
                        "host_peak_bytes",
                        "nvme_bytes",
                        "step_time_s",
                        "tokens_per_s",
                        "mfu",
                        "hfu",
                        "model_tflops_per_gpu",
                        "hardware_tflops_per_gpu",
                        "job_time_s",
                        "peak_power_w",
                        "energy_kwh",
                        "cost_usd",
                        "memory.gpu.weights_bytes",
                        "meets_constraints",
                        "cheapest_plan"})
    CHECK_MESSAGE(rows[1].get(k) != nullptr, k);
}

TEST_CASE("an invalid point is a row per plan with the reader's reason, not an error") {
  /* There is no fine-tuning method "dora" here: the scenario reader refuses it. */
  const auto s = make("axes:\n  - {key: job.method, values: [lora, dora]}\n");
  const auto ok = s.evaluate(0);
  CHECK(std::get<bool>(*ok[0].get("feasible")));
  const auto bad = s.evaluate(1);
  REQUIRE(bad.size() == 2);
  for (const auto& row : bad) {
    CHECK_FALSE(std::get<bool>(*row.get("feasible")));
    const auto& why = std::get<std::string>(*row.get("infeasible_reason"));
    CHECK(why.find("invalid scenario: job.method: 'dora' is not one of") != std::string::npos);
  }
  CHECK(std::get<std::string>(*bad[1].get("plan")) == "two.h100");
}

TEST_CASE("a point past the model's context is invalid, with the reader's reason naming the limit") {
  /* Llama-3.2-1B: max_position_embeddings 131072. The point at 200000 tokens goes through the
   * scenario reader like a file and is refused there. */
  const auto s = make("axes:\n  - {key: job.seq_len, values: [131072, 200000]}\n");
  for (const auto& row : s.evaluate(0)) {
    const io::Value* why = row.get("infeasible_reason");
    REQUIRE(why);
    if (const auto* text = std::get_if<std::string>(why)) CHECK(text->find("invalid scenario") == std::string::npos);
  }
  const auto bad = s.evaluate(1);
  REQUIRE(bad.size() == 2);
  for (const auto& row : bad) {
    CHECK_FALSE(std::get<bool>(*row.get("feasible")));
    CHECK(std::get<std::string>(*row.get("infeasible_reason"))
              .find("invalid scenario: job.seq_len: 200000 is longer than llama-3.2-1b's context of 131072 tokens") !=
          std::string::npos);
  }
}

TEST_CASE("axis columns are plain identifiers, part by part") {
  const auto s = make(
      "axes:\n"
      "  - {key: 'plans[two.h100].cluster.gpus', values: [4]}\n"
      "  - {key: plans.*.job.micro_batch, values: [1]}\n"
      "  - {key: job.seq_len, name: Seq Len (tokens), values: [512]}\n");
  REQUIRE(s.axes().size() == 3);
  CHECK(s.axes()[0].column == "axis.plans_two_h100.cluster.gpus");
  CHECK(s.axes()[1].column == "axis.plans.job.micro_batch");
  CHECK(s.axes()[2].column == "axis.seq_len_tokens");
}

TEST_CASE("a wrong sweep file names its line, column and key") {
  // Axis key the scenario does not have: at the axis's key (line 12 of the text), with a suggestion.
  std::string e = error_of("axes:\n  - key: job.seq_lenn\n    values: [1024]\n");
  CHECK(e.find("sweep.yaml:12:10: job.seq_lenn: not a key of the scenario (did you mean") != std::string::npos);
  CHECK(e.find("did you mean 'seq_len'") != std::string::npos);
  // Unknown key of the sweep format itself.
  e = error_of("axes:\n  - {key: job.seq_len, valuse: [1]}\n");
  CHECK(e.find("sweep.yaml:12:") != std::string::npos);
  CHECK(e.find("axes[0].valuse: unknown key (did you mean 'values'?)") != std::string::npos);
  // A plan that is not there.
  e = error_of("axes:\n  - {key: 'plans[three].cluster.gpus', values: [1]}\n");
  CHECK(e.find("sweep.yaml:12:") != std::string::npos);
  CHECK(e.find("plans has no item named 'three'") != std::string::npos);
  // Through a scalar.
  e = error_of("axes:\n  - {key: model.layers, values: [2]}\n");
  CHECK(e.find("model is llama-3.2-1b, not a mapping") != std::string::npos);
  // Zip lengths, continuous range without sampling, bad sample method, missing axes.
  CHECK(error_of("axes:\n  - zip:\n    - {key: job.seq_len, values: [1, 2]}\n    - {key: job.steps, values: [1]}\n")
            .find("zipped axes pair value by value") != std::string::npos);
  CHECK(error_of("axes:\n  - {key: job.seq_len, range: {from: 1, to: 2}}\n").find("give a `step`, or `sample`") !=
        std::string::npos);
  CHECK(error_of("axes:\n  - {key: job.seq_len, values: [1]}\nsample: {method: lhc, count: 3}\n")
            .find("did you mean 'lhs'") != std::string::npos);
  CHECK(error_of("").find("axes: is required") != std::string::npos);
}

TEST_CASE("ranges are counted, not expanded: a million-value axis costs nothing until a point asks for it") {
  /* Each value of a range was made when the file was read (about 400 bytes each): two axes of a
   * million took 400 MB and 2 s before the grid's size was even checked; 24 of them died of
   * bad_alloc. Now a range holds from, step and its count, and the grid is refused at once. */
  CHECK(error_of("axes:\n  - {key: job.steps, range: {from: 1, to: 1000000, step: 1}}\n"
                 "  - {key: job.seq_len, range: {from: 1, to: 1000000, step: 1}}\n")
            .find("the grid has 1000000000000 points; a sweep holds at most 10000000") != std::string::npos);
  const sweep::Sweep one = make("axes:\n  - {key: job.steps, range: {from: 10, to: 1000009, step: 1}}\n");
  REQUIRE(one.size() == 1'000'000);
  CHECK(as_int(one.values(999'999).at(0)) == 1'000'009);
  const sweep::Sweep geo = make("axes:\n  - {key: job.steps, geometric: {from: 3, to: 100, factor: 2}}\n");
  REQUIRE(geo.size() == 6);  // 3 6 12 24 48 96
  CHECK(as_int(geo.values(5).at(0)) == 96);
}

TEST_CASE("axes that repeat a key are reported once each, not once per pair") {
  /* 2,000 axes on one key printed every pair (two million lines, quadratic time); now each
   * repeating axis says which one came first. */
  std::string axes = "axes:\n";
  for (int i = 0; i < 2000; ++i) axes += "  - {key: job.steps, values: [1, 2]}\n";
  const std::string e = error_of(axes);
  CHECK(std::count(e.begin(), e.end(), '\n') == 1998);  // 1,999 lines
  CHECK(e.find("sweep.yaml:13:11: job.steps: another axis (12:11) already sets this key or column\n") == 0);
}

TEST_CASE("a sweep file whose aliases expand past the readers' limit is refused at once, like a scenario") {
  /* Seven levels of ten aliases: 10^7 values once expanded, past the limit of 10^6 that every
   * reader applies (a scenario gets the same message). Written out, the file is 600 bytes. */
  std::string bomb = "  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 7; ++i) {
    bomb += "  a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += (k ? ", *a" : "*a") + std::to_string(i - 1);
    bomb += "]\n";
  }
  const std::string text =
      std::string("schema_version: 1\n") + kScenario + bomb + "axes:\n  - {key: job.seq_len, values: [512, 1024]}\n";
  const std::string e = test::input_error_of(
      [&] { sweep::Sweep::parse(text, "sweep.yaml", test::data_dir(), test::zoo(), test::catalog()); });
  CHECK(e.find("sweep.yaml:") == 0);
  CHECK(e.find("with its aliases (*name) expanded the document holds more than 1000000 values") != std::string::npos);
  /* The same limit, the same words, for a scenario. */
  const std::string scenario = std::string(kScenario).substr(std::string("scenario:\n").size());
  const std::string e2 = test::input_error_of(
      [&] { io::parse_scenario(scenario + bomb, "x.yaml", test::data_dir(), test::zoo(), test::catalog()); });
  CHECK(e2.find("x.yaml:") == 0);
  CHECK(e2.find("with its aliases (*name) expanded the document holds more than 1000000 values") != std::string::npos);
}

TEST_CASE("the alias limit counts the expanded document exactly, and an alias inside its own node is refused") {
  /* {a: &a [[998 scalars]], b: [998 x *a, k scalars]}: the root map, its two keys, a's two
   * sequences and 998 items (1,000), b's sequence, 998 copies of a (998,000) and k scalars:
   * 1,000,004 - 1,000 + k values, as a walk of the loaded tree visits them (each map key too). At
   * k = 996 that is the limit, 1,000,000 values: accepted; one more is refused, at that scalar.
   * The count keeps each anchor's expanded size (a nested sequence's nodes included once), so it
   * is linear in the text (the walk took 10^6 steps).                                           */
  const auto document = [](int k) {
    std::string a = "a: &a [[", b = "b: [";
    for (int i = 0; i < 998; ++i) a += i ? ", x" : "x";
    for (int i = 0; i < 998; ++i) b += i ? ", *a" : "*a";
    for (int i = 0; i < k; ++i) b += ", y";
    return a + "]]\n" + b + "]\n";
  };
  CHECK(io::detail::load_yaml_text(document(996), "at-limit.yaml")["b"].size() == 998 + 996);
  const std::string e = test::input_error_of([&] { io::detail::load_yaml_text(document(997), "past.yaml"); });
  CHECK(e.find("past.yaml:2:") == 0);
  CHECK(e.find("more than 1000000 values") != std::string::npos);
  /* A node that holds an alias to itself expands without end. */
  const std::string r = test::input_error_of([&] { io::detail::load_yaml_text("x: &a [1, *a]\n", "self.yaml"); });
  CHECK(r.find("self.yaml:1:11:") == 0);
  CHECK(r.find("more than 1000000 values") != std::string::npos);
  /* The same in a map: an accelerate config of this shape (fuzz_import_accelerate, 2026-12-04)
   * took the tree walk 19 s and 2.1 GB before it refused it (libFuzzer: out of memory).        */
  const std::string m =
      test::input_error_of([&] { io::detail::load_yaml_text("fsdp: &a\n  x: 1\n  tpu: *a\n", "map.yaml"); });
  CHECK(m.find("map.yaml:3:8:") == 0);
  CHECK(m.find("more than 1000000 values") != std::string::npos);
}

namespace {

// Where two YAML trees differ ("" where they do not): type, tag, style, mark (offset, line,
// column), scalar text, and every element and key in order. `budget` bounds the nodes visited
// (an alias is walked again wherever it is used).
std::string mark_text(const YAML::Mark& m) {  // 0-based, as yaml-cpp keeps it
  return "line " + std::to_string(m.line) + " column " + std::to_string(m.column) + " byte " + std::to_string(m.pos);
}

std::string tree_difference(const YAML::Node& a, const YAML::Node& b, const std::string& path, int& budget) {
  if (--budget < 0) return "";
  if (a.Type() != b.Type()) return path + ": type";
  if (a.Tag() != b.Tag()) return path + ": tag";
  if (a.Style() != b.Style()) return path + ": style";
  const YAML::Mark ma = a.Mark(), mb = b.Mark();
  if (ma.pos != mb.pos || ma.line != mb.line || ma.column != mb.column)
    return path + ": mark " + mark_text(ma) + ", LoadAll's " + mark_text(mb);
  if (a.IsScalar() && a.Scalar() != b.Scalar()) return path + ": scalar";
  if (a.size() != b.size()) return path + ": size";
  if (a.IsSequence())
    for (std::size_t i = 0; i < a.size(); ++i)
      if (auto d = tree_difference(a[i], b[i], path + "[" + std::to_string(i) + "]", budget); !d.empty()) return d;
  if (a.IsMap())
    for (auto x = a.begin(), y = b.begin(); x != a.end(); ++x, ++y) {
      if (auto d = tree_difference(x->first, y->first, path + " key", budget); !d.empty()) return d;
      if (auto d = tree_difference(x->second, y->second, path + "." + (x->first.IsScalar() ? x->first.Scalar() : "?"),
                                   budget);
          !d.empty())
        return d;
    }
  return "";
}

}  // namespace

TEST_CASE("the reader's loader builds the tree yaml-cpp's LoadAll builds, marks included") {
  /* load_yaml_text parses with libyaml into yaml-cpp's nodes (core/io/yaml_reader.cpp
   * LibyamlEvents). On every shipped and test input it reads (the import corpora are projects'
   * own configs), the tree is LoadAll's node for node, tags, styles and marks included: the
   * readers' messages name the same line and column as when yaml-cpp parsed. On the committed
   * fuzz inputs the two parsers part on malformed text only, where yaml-cpp 0.7 departs from the
   * YAML spec and libyaml does not: a lone tag ('!') at the end of the text is a null there, a
   * '\r' is not a line break there, an explicit key's ('? k') missing value stands at the '?'.
   * (Where our loader refuses a file, LoadAll is not run: some of those never end.)           */
  namespace fs = std::filesystem;
  int compared = 0, refused = 0, fuzz_same = 0, fuzz_apart = 0;
  const fs::path root = FTPLAN_SOURCE_DIR;
  for (const char* dir : {"scenarios", "model_zoo", "tests/data", "fuzz/corpus"})
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      if (!entry.is_regular_file() || entry.file_size() > (1u << 20)) continue;
      const bool fuzz = std::string(dir) == "fuzz/corpus";
      const std::string text = io::detail::read_input_file(entry.path());
      YAML::Node ours;
      try {
        ours = io::detail::load_yaml_text(text, entry.path().string());
      } catch (const InputError&) {
        ++refused;
        continue;
      }
      std::vector<YAML::Node> theirs;
      try {
        theirs = YAML::LoadAll(text);
      } catch (const YAML::Exception& e) {
        INFO(entry.path().string() << ": yaml-cpp refuses it: " << e.what());
        CHECK(fuzz);
        ++fuzz_apart;
        continue;
      }
      REQUIRE(!theirs.empty());
      int budget = 200'000;
      const std::string difference = tree_difference(ours, theirs.front(), "", budget);
      if (fuzz) {
        ++(difference.empty() ? fuzz_same : fuzz_apart);
        continue;
      }
      INFO(entry.path().string());
      CHECK(difference == "");
      ++compared;
    }
  MESSAGE(compared << " shipped and test documents compared, " << refused
                   << " files refused; fuzz inputs: " << fuzz_same << " read alike, " << fuzz_apart << " apart");
  CHECK(compared > 200);
  // A tripwire for the fuzz inputs: their malformed corners are a few in a hundred.
  CHECK(fuzz_apart * 20 < fuzz_same);
}

TEST_CASE("shards are disjoint and together hold every point") {
  const auto s = sweep::parse_shard("2/3");
  CHECK(s.index == 2);
  CHECK(s.count == 3);
  for (const char* bad : {"0/3", "4/3", "3", "a/b", "1/0", "1/2x"})
    CHECK_THROWS_AS(sweep::parse_shard(bad), UsageError);
  for (int n : {1, 2, 3, 7}) {
    std::vector<int> owners(100, 0);
    for (int k = 1; k <= n; ++k)
      for (std::int64_t p = 0; p < 100; ++p) owners[p] += sweep::Shard{k, n}.contains(p);
    CHECK(std::all_of(owners.begin(), owners.end(), [](int o) { return o == 1; }));
  }
  /* size_of, point and index_of enumerate a slice without listing it: slice 2/3 of 0..9 is 1, 4, 7;
   * of 0..0 it is empty. Checked against contains() for every slice of every small total. */
  CHECK(sweep::Shard{2, 3}.size_of(10) == 3);
  CHECK(sweep::Shard{2, 3}.point(2) == 7);
  CHECK(sweep::Shard{2, 3}.size_of(1) == 0);
  CHECK_FALSE(sweep::Shard{1, 1}.contains(-1));
  for (int n : {1, 2, 3, 7})
    for (int k = 1; k <= n; ++k)
      for (std::int64_t total = 0; total < 30; ++total) {
        const sweep::Shard shard{k, n};
        std::vector<std::int64_t> listed;
        for (std::int64_t p = 0; p < total; ++p)
          if (shard.contains(p)) listed.push_back(p);
        REQUIRE(shard.size_of(total) == static_cast<std::int64_t>(listed.size()));
        for (std::size_t i = 0; i < listed.size(); ++i) {
          CHECK(shard.point(static_cast<std::int64_t>(i)) == listed[i]);
          CHECK(shard.index_of(listed[i]) == static_cast<std::int64_t>(i));
        }
      }
}

TEST_CASE("a journal line is a point and its rows of scalars, and nothing else is taken") {
  const std::string header = sweep::journal_header(1);
  const auto point_of = [&](const std::string& line) { return sweep::parse_journal(header + line + "\n", "j"); };
  // Rows in order, each field in order, every kind of scalar; other top-level keys ignored.
  const auto j = point_of(
      R"({"extra":{"a":[1,{"b":2}]},"point":7,"rows":[{"plan":"a","x":1.5,"n":null,"ok":false,"i":-3},{"plan":"b"}],"z":1})");
  REQUIRE(j.points.count(7) == 1);
  const auto& rows = j.points.at(7);
  REQUIRE(rows.size() == 2);
  REQUIRE(rows[0].fields.size() == 5);
  CHECK(rows[0].fields[0].first == "plan");
  CHECK(std::get<std::string>(rows[0].fields[0].second) == "a");
  CHECK(std::get<double>(rows[0].fields[1].second) == 1.5);
  CHECK(std::holds_alternative<std::nullptr_t>(rows[0].fields[2].second));
  CHECK(std::get<bool>(rows[0].fields[3].second) == false);
  CHECK(std::get<std::int64_t>(rows[0].fields[4].second) == -3);
  CHECK(std::get<std::string>(rows[1].fields[0].second) == "b");
  CHECK(point_of(R"({"point":8,"rows":[]})").points.at(8).empty());
  // Damaged: no point, a point that is not a whole number, no rows, rows that are not objects of
  // scalars, the rows twice, not an object, not JSON.
  for (const char* bad :
       {R"({"rows":[]})", R"({"point":1.5,"rows":[]})", R"({"point":"1","rows":[]})", R"({"point":1})",
        R"({"point":1,"rows":{}})", R"({"point":1,"rows":[1]})", R"({"point":1,"rows":[{"a":[1]}]})",
        R"({"point":1,"rows":[{"a":{"b":1}}]})", R"({"point":1,"rows":[[]]})", R"({"point":1,"rows":[],"rows":[]})",
        R"([1,2])", R"({"point":1,"rows":[{"a":1})"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(point_of(bad), InputError);
  }
}

TEST_CASE("rows kept in memory are what their journal line reads back as (the finished file takes either)") {
  /* A sweep writes a point it ran from its rows in memory, and a resumed one's from the journal:
   * the two must be the same values, or a resumed run's file would differ. JSON holds no infinity
   * or NaN (io::json_value writes null); -0.0, a whole double and the largest integers survive. */
  io::Row row;
  row.fields = {{"plan", io::Value(std::string("a \"quoted\" \\ name\twith a tab, caf\xc3\xa9"))},
                {"1e20", io::Value(1e20)},
                {"-2.5e-7", io::Value(-2.5e-7)},
                {"inf", io::Value(std::numeric_limits<double>::infinity())},
                {"-inf", io::Value(-std::numeric_limits<double>::infinity())},
                {"nan", io::Value(std::numeric_limits<double>::quiet_NaN())},
                {"whole", io::Value(3.0)},
                {"neg0", io::Value(-0.0)},
                {"tiny", io::Value(4.9406564584124654e-324)},
                {"third", io::Value(1.0 / 3.0)},
                {"big", io::Value(std::numeric_limits<std::int64_t>::max())},
                {"ok", io::Value(true)},
                {"none", io::Value(nullptr)}};
  std::vector<io::Row> kept = {row, row};
  const std::string line = sweep::journal_line(5, kept);
  sweep::as_journaled(kept);
  const auto back = sweep::parse_journal(sweep::journal_header(1) + line, "j").points.at(5);
  REQUIRE(back.size() == kept.size());
  for (std::size_t r = 0; r < back.size(); ++r) {
    REQUIRE(back[r].fields.size() == kept[r].fields.size());
    for (std::size_t f = 0; f < back[r].fields.size(); ++f) {
      const std::string& key = kept[r].fields[f].first;
      const io::Value& value = kept[r].fields[f].second;
      CAPTURE(key);
      CHECK(back[r].fields[f].first == key);
      CHECK(back[r].fields[f].second.index() == value.index());
      if (const double* d = std::get_if<double>(&value)) {
        CHECK(std::bit_cast<std::uint64_t>(std::get<double>(back[r].fields[f].second)) ==
              std::bit_cast<std::uint64_t>(*d));
      } else {
        CHECK(back[r].fields[f].second == value);
      }
    }
  }
  // And the CSV lines the two give are the same bytes.
  const std::vector<std::string> columns = {"plan", "inf",   "nan", "whole", "neg0",
                                            "tiny", "third", "big", "ok",    "none"};
  CHECK(sweep::table_lines(sweep::OutputFormat::csv, kept, columns) ==
        sweep::table_lines(sweep::OutputFormat::csv, back, columns));
}

TEST_CASE("the journal keeps whole lines and drops one cut short") {
  std::vector<io::Row> rows(1);
  rows[0].fields = {
      {"point", std::int64_t{3}}, {"plan", std::string("a")}, {"x", 0.1 + 0.2}, {"n", nullptr}, {"ok", true}};
  const std::string whole = sweep::journal_header(0xabcdef) + sweep::journal_line(3, rows);
  const std::string cut = whole + sweep::journal_line(4, rows).substr(0, 20);
  const auto j = sweep::parse_journal(cut, "j");
  CHECK(j.has_header);
  CHECK(j.fingerprint == 0xabcdef);
  CHECK(j.complete_bytes == whole.size());
  REQUIRE(j.points.count(3) == 1);
  CHECK(j.points.count(4) == 0);
  // Values come back exactly (0.1 + 0.2 is not 0.3).
  CHECK(as_double(*j.points.at(3)[0].get("x")) == 0.1 + 0.2);
  CHECK(std::holds_alternative<std::nullptr_t>(*j.points.at(3)[0].get("n")));
  CHECK_THROWS_AS(sweep::parse_journal(whole + "garbage\n", "j"), InputError);
  // A header whose fingerprint is not hex is a damaged line, not a UsageError.
  CHECK_THROWS_AS(sweep::parse_journal("{\"ftplan_sweep_journal\":1,\"fingerprint\":\"zz\"}\n", "j"), InputError);
  // A header without its fingerprint (the sweep_output fuzzer's first find: it read past the
  // document under ASan).
  CHECK_THROWS_AS(sweep::parse_journal("{\"ftplan_sweep_journal\":1,\"infgerprint\":\"5b\"}\n", "j"), InputError);
  // The table written piece by piece is the table written at once.
  const std::vector<std::string> columns = sweep::column_order({"x", "plan", "point", "ok", "n"}, {});
  for (auto f : {sweep::OutputFormat::csv, sweep::OutputFormat::jsonl})
    CHECK(sweep::table_header(f, columns) + sweep::table_lines(f, rows, columns) +
              sweep::table_lines(f, rows, columns) ==
          sweep::format_table(f, {rows[0], rows[0]}, {}));
}

TEST_CASE("merged shards equal one unsharded run, in CSV and JSON Lines, whatever order they finish in") {
  const auto s = make(
      "axes:\n"
      "  - {key: job.method, values: [lora, dora, qlora]}\n"
      "  - {key: plans.*.cluster.gpus, values: [1, 2]}\n");
  std::vector<std::vector<io::Row>> by_point;
  for (std::int64_t p = 0; p < s.size(); ++p) by_point.push_back(s.evaluate(p));
  std::vector<std::string> axis_columns;
  for (const auto& a : s.axes()) axis_columns.push_back(a.column);
  const auto table = [&](sweep::OutputFormat f, sweep::Shard shard) {
    std::vector<io::Row> rows;
    for (std::int64_t p = 0; p < s.size(); ++p)
      if (shard.contains(p)) rows.insert(rows.end(), by_point[p].begin(), by_point[p].end());
    return sweep::format_table(f, rows, axis_columns);
  };
  for (auto f : {sweep::OutputFormat::csv, sweep::OutputFormat::jsonl}) {
    const std::string whole = table(f, {1, 1});
    // Shards given out of order, one of them empty of feasible rows.
    const auto m = sweep::merge(
        f, {{"c", table(f, {3, 4})}, {"a", table(f, {1, 4})}, {"b", table(f, {2, 4})}, {"d", table(f, {4, 4})}});
    CHECK(m.points == 6);
    CHECK(m.rows == 12);
    CHECK(m.text == whole);
    // A missing shard and a shard given twice are refused.
    CHECK(test::input_error_of([&] {
            sweep::merge(f, {{"a", table(f, {1, 2})}});
          }).find("is a shard missing") != std::string::npos);
    CHECK(test::input_error_of([&] {
            sweep::merge(f, {{"a", table(f, {1, 1})}, {"b", table(f, {2, 2})}});
          }).find("point 1 is also in a") != std::string::npos);
  }
  // The columns do not depend on which rows come first: point, axes, the result fields in order.
  const std::string csv = table(sweep::OutputFormat::csv, {1, 1});
  CHECK(csv.rfind("point,axis.job.method,axis.plans.cluster.gpus,plan,feasible,infeasible_reason,gpu_count,", 0) == 0);
  // Point 2 (dora) is invalid: its rows have only a few columns. Which rows come first does not
  // change the header.
  REQUIRE(by_point[2][0].fields.size() < by_point[0][0].fields.size());
  std::vector<io::Row> valid_first = by_point[0], invalid_first = by_point[2];
  valid_first.insert(valid_first.end(), by_point[2].begin(), by_point[2].end());
  invalid_first.insert(invalid_first.end(), by_point[0].begin(), by_point[0].end());
  const auto header = [&](const std::vector<io::Row>& rows) {
    const std::string t = sweep::format_table(sweep::OutputFormat::csv, rows, axis_columns);
    return t.substr(0, t.find('\n'));
  };
  CHECK(header(valid_first) == header(invalid_first));
}

TEST_CASE("sweep::run evaluates every point once, and its rows do not depend on the thread count") {
  const auto s = make("axes:\n  - {key: job.seq_len, values: [256, 512, 768, 1024, 1280, 1536]}\n");
  std::vector<std::int64_t> points = {0, 1, 2, 3, 4, 5};
  std::map<std::int64_t, std::string> one, three;
  std::vector<std::string> cols = {"axis.job.seq_len"};
  sweep::run(s, points, 1, [&](std::int64_t p, std::vector<io::Row>& r) {
    one[p] = sweep::format_table(sweep::OutputFormat::jsonl, r, cols);
  });
  sweep::run(s, points, 3, [&](std::int64_t p, std::vector<io::Row>& r) {
    CHECK(three.count(p) == 0);
    three[p] = sweep::format_table(sweep::OutputFormat::jsonl, r, cols);
  });
  CHECK(one.size() == 6);
  CHECK(one == three);
  // A failing callback stops the run and comes back to the caller.
  CHECK_THROWS_AS(
      sweep::run(s, points, 2, [](std::int64_t, std::vector<io::Row>&) { throw std::runtime_error("disk full"); }),
      std::runtime_error);
}

TEST_CASE("every shipped sweep loads, and the tiered map gives a row per plan at each point") {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::zoo_dir().parent_path() / "scenarios")) {
    if (e.path().extension() != ".yaml" || e.path().filename().string().rfind("sweep-", 0) != 0) continue;
    CAPTURE(e.path().string());
    const auto s = sweep::Sweep::load(e.path(), test::zoo(), test::catalog());
    CHECK(s.size() > 1);
    ++n;
  }
  CHECK(n >= 3);
  // (Its CSV is no longer committed: a stored result went stale with the model, issue 41.)
  const auto s = sweep::Sweep::load(test::zoo_dir().parent_path() / "scenarios" / "sweep-tiered-vs-gpus.yaml",
                                    test::zoo(), test::catalog());
  // Its first point is the first of the grid: rented, the smallest model, the shortest deadline;
  // each point has the two plans.
  const auto rows = s.evaluate(0);
  CHECK(rows.size() == 2);
  const auto v = s.values(0);
  CHECK(std::get<std::string>(*rows[0].get("axis.cost.mode")) == std::get<std::string>(v[0]));
  CHECK(std::get<std::string>(*rows[0].get("axis.model")) == "llama-3.1-8b");
}
