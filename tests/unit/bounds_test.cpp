// Upper bounds of every count that sizes a simulation (issue 22): inputs past
// them are refused with located errors, a step too large to hold is refused by
// name, and the planner survives a plan that throws and an interruption.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "io/model_io.hpp"
#include "io/scenario_io.hpp"
#include "test_support.hpp"

using namespace ftplan;
namespace fs = std::filesystem;

namespace {

std::string read(const fs::path &p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path scratch(const std::string &name) {
  const fs::path dir = fs::path(FTPLAN_TEST_SCRATCH) / "bounds" / name;
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path &p, const std::string &text) {
  std::ofstream out(p);
  out << text;
}

} // namespace

TEST_CASE("every entry point to a model has the same bounds, reported at the "
          "file, line and key") {
  SUBCASE("zoo YAML: 100,000 layers (once inside the reader's range) are "
          "refused at `layers`") {
    const fs::path dir = scratch("zoo");
    std::string text = read(test::zoo_dir() / "models" / "llama-3.2-1b.yaml");
    text = std::regex_replace(text, std::regex("\nlayers: 16\n"),
                              "\nlayers: 100000\n");
    const fs::path file = dir / "llama-3.2-1b.yaml";
    write(file, text);
    const std::string msg =
        test::input_error_of([&] { io::load_model_file(file); });
    CHECK(msg.find(file.string() + ":8:") != std::string::npos);
    CHECK(msg.find("layers: 100000 layers are more than 1024") !=
          std::string::npos);
    // 1024 itself is accepted.
    write(file, std::regex_replace(text, std::regex("\nlayers: 100000\n"),
                                   "\nlayers: 1024\n"));
    CHECK(test::input_error_of([&] { io::load_model_file(file); }).empty());
  }
  const std::string llama =
      read(test::data_dir() / "hf" / "llama-3.1-8b" / "config.json");
  const auto hf_error = [&](const std::string &key, const std::string &value) {
    const fs::path dir = scratch("hf-" + key + "-" + value);
    const fs::path file = dir / "config.json";
    write(file, std::regex_replace(llama, std::regex("\"" + key + "\": [0-9]+"),
                                   "\"" + key + "\": " + value));
    return std::make_pair(
        file.string(), test::input_error_of([&] { io::load_hf_config(file); }));
  };
  SUBCASE("HF config.json: a billion layers are refused at num_hidden_layers "
          "(line 17)") {
    const auto [file, msg] = hf_error("num_hidden_layers", "1000000000");
    CHECK(msg.find(file + ":17:") != std::string::npos);
    CHECK(msg.find("num_hidden_layers: 1000000000 layers are more than 1024") !=
          std::string::npos);
    CHECK(msg.find("model.layers") != std::string::npos);
  }
  SUBCASE("HF config.json: 2^32 + 1 layers are an error, not 1 layer") {
    const auto [file, msg] = hf_error("num_hidden_layers", "4294967297");
    CHECK(msg.find(file + ":17:") != std::string::npos);
  }
  SUBCASE("HF config.json: num_key_value_heads 0 is refused (it read as 'as "
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
    const std::string msg = test::input_error_of([&] {
      io::parse_scenario(text, "deep.yaml", test::data_dir(), test::zoo(),
                         test::catalog());
    });
    CHECK(msg.find("deep.yaml:6:") != std::string::npos);
    CHECK(msg.find("model.layers") != std::string::npos);
    CHECK(msg.find("more than 1024") != std::string::npos);
  }
}
