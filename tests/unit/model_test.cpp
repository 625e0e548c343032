#include <doctest/doctest.h>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <cstdlib>
#include <fstream>

#include "io/model_io.hpp"
#include "model/model.hpp"
#include "test_support.hpp"

using namespace ftplan;

TEST_CASE("the zoo holds the models people fine-tune, each with a published count") {
  const auto& zoo = test::zoo();
  CHECK(zoo.models().size() >= 24);
  for (const char* name :
       {"llama-2-7b",   "llama-2-13b",  "llama-2-70b", "llama-3.1-8b",     "llama-3.1-70b",     "llama-3.1-405b",
        "llama-3.2-1b", "llama-3.2-3b", "mistral-7b",  "mixtral-8x7b",     "mixtral-8x22b",     "qwen2.5-0.5b",
        "qwen2.5-7b",   "qwen2.5-14b",  "qwen2.5-32b", "qwen2.5-72b",      "gemma-2-2b",        "gemma-2-9b",
        "gemma-2-27b",  "phi-3-mini",   "gpt-3-175b",  "megatron-gpt-22b", "mt-nlg-530b",       "megatron-gpt-1t",
        "bloom-176b",   "mpt-7b",       "mpt-30b",     "mpt-70b",          "bert-large-uncased"}) {
    CAPTURE(name);
    CHECK(zoo.find(name) != nullptr);
  }
}

TEST_CASE("every zoo model's parameter count matches its published figure") {
  for (const auto& m : test::zoo().models()) {
    CAPTURE(m.name);
    REQUIRE(m.published.params > 0);
    CHECK(!m.published.source.empty());
    const std::int64_t counted = model::count_params(m).total;
    const std::int64_t diff = std::llabs(counted - m.published.params);
    if (m.published.exact) {
      CHECK(counted == m.published.params);
    } else {
      INFO(
          fmt::format("counted {} vs published {} (tolerance {})", counted, m.published.params, m.published.tolerance));
      CHECK(m.published.tolerance > 0);
      CHECK(diff <= m.published.tolerance);
    }
  }
}

TEST_CASE("Megatron GPT: count = 12lh^2 + 13lh + (V+s)h + final norm (Narayanan et al. 2021, eq. 2)") {
  /* Narayanan et al. count 12lh^2(1 + 13/(12h) + (V+s)/(12lh)): per layer 4h^2+4h attention,
   * 8h^2+5h MLP, two LayerNorms 4h; plus V x h tokens and s x h positions. Their formula leaves
   * out the final LayerNorm (2h), which the checkpoint has. */
  const auto* m = test::zoo().find("megatron-gpt-1t");
  REQUIRE(m);
  const std::int64_t l = m->layers, h = m->hidden, V = m->vocab, s = m->max_context;
  CHECK(model::count_params(*m).total == 12 * l * h * h + 13 * l * h + (V + s) * h + 2 * h);
}

TEST_CASE("PaLM training FLOPs per token: 6N + 12 L H Q T") {
  /* Llama-3.1-8B, T = 4096: N (matmul parameters incl. untied head) = total - embedding - norms
   * = 8,030,261,248 - 128256*4096 - (32*2+1)*4096 = 7,504,658,432.
   * 6N = 45,027,950,592; 12 * 32 layers * 32 heads * 128 * 4096 = 6,442,450,944. */
  const auto* m = test::zoo().find("llama-3.1-8b");
  REQUIRE(m);
  const auto c = model::count_params(*m);
  CHECK(c.active_matmul == 7'504'658'432);
  const auto f = model::flops_per_token(*m, 4096);
  CHECK(f.training() == doctest::Approx(45'027'950'592.0 + 6'442'450'944.0));
  CHECK(f.backward == doctest::Approx(2 * f.forward));
}

TEST_CASE("sliding-window layers attend at most their window") {
  /* Gemma-2-9B alternates local (4096-token window) and global layers: at T = 8192 the 21 local
   * layers attend 4096 tokens, the 21 global ones 8192. Forward attention FLOPs/token
   * = 4 * 16 heads * 256 * (21*4096 + 21*8192). */
  const auto* m = test::zoo().find("gemma-2-9b");
  REQUIRE(m);
  CHECK(model::flops_per_token(*m, 8192).attention_forward ==
        doctest::Approx(4.0 * 16 * 256 * (21 * 4096 + 21 * 8192)));
  CHECK(model::flops_per_token(*m, 2048).attention_forward == doctest::Approx(4.0 * 16 * 256 * 42 * 2048));
}

TEST_CASE("MoE: a token is routed through experts_per_token experts") {
  /* Mixtral-8x7B: 46.7B total, 12.9B active (Mistral AI, "Mixtral of experts", 2024: "12.9B active"). */
  const auto* m = test::zoo().find("mixtral-8x7b");
  REQUIRE(m);
  const auto c = model::count_params(*m);
  CHECK(c.total == 46'702'792'704);
  CHECK(static_cast<double>(c.active_total) == doctest::Approx(12.9e9).epsilon(0.005));
}

TEST_CASE("Hugging Face config.json imports give the checkpoints' exact counts") {
  const YAML::Node expected = YAML::LoadFile((test::data_dir() / "hf" / "expected.yaml").string());
  int checked = 0;
  for (const auto& kv : expected["fixtures"]) {
    const std::string dir = kv.first.as<std::string>();
    if (kv.second["params"].IsNull()) continue;
    CAPTURE(dir);
    const auto m = io::load_hf_config(test::data_dir() / "hf" / dir / "config.json");
    CHECK(model::count_params(m).total == kv.second["params"].as<std::int64_t>());
    ++checked;
  }
  CHECK(checked >= 10);
  // The import and the hand-written zoo entry describe the same network.
  const auto imported = io::load_hf_config(test::data_dir() / "hf" / "llama-3.1-8b" / "config.json");
  CHECK(model::count_params(imported).total == model::count_params(*test::zoo().find("llama-3.1-8b")).total);
  const auto gemma = io::load_hf_config(test::data_dir() / "hf" / "gemma-2-9b" / "config.json");
  CHECK(gemma.attention.local_every == 2);
  CHECK(gemma.norms_per_layer == 4);
}

TEST_CASE("a broken config.json names the file and the missing key") {
  const auto path = test::data_dir() / "hf" / "broken" / "config.json";
  const std::string msg = test::input_error_of([&] { io::load_hf_config(path); });
  CHECK(msg.find(path.string()) != std::string::npos);
  CHECK(msg.find("hidden_size: is required") != std::string::npos);
}

TEST_CASE("a zoo file and a config.json read from text in memory are read as from their files") {
  /* parse_model_file / parse_hf_config are what the fuzzer drives; the file readers are them plus
   * reading the file, so both give the same model and the same messages. */
  const auto read = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const auto zoo_file = test::zoo_dir() / "models" / "llama-3.2-1b.yaml";
  const auto a = io::load_model_file(zoo_file), b = io::parse_model_file(read(zoo_file), zoo_file);
  CHECK(b.name == a.name);
  CHECK(b.layers == a.layers);
  CHECK(model::count_params(b).total == model::count_params(a).total);
  const auto hf = std::filesystem::path(FTPLAN_TEST_DATA) / "hf/mistral-7b-v0.1/config.json";
  const auto c = io::load_hf_config(hf), d = io::parse_hf_config(read(hf), hf);
  CHECK(d.name == "mistral-7b-v0.1");
  CHECK(model::count_params(d).total == model::count_params(c).total);
  CHECK_THROWS_WITH_AS(io::parse_hf_config("{\"num_key_value_heads\": 0}", "x/config.json"),
                       doctest::Contains("x/config.json"), InputError);
}

TEST_CASE("a config.json's null values mean the default, however many there are") {
  /* Found by fuzzing (docs/hardening.md): the nulls were removed one by one, each removal a search
   * from the map's start, so 20,000 read-past keys and 20,000 nulls took 13 s (tests/cli/bounds.sh
   * holds the time). Now a few are removed in place and more dropped in one pass: both ways a null
   * key the reader reads (head_dim) is absent, not "expected a single value". */
  const auto hf = test::data_dir() / "hf" / "llama-3.1-8b" / "config.json";
  std::ifstream in(hf, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.erase(text.rfind('}'));
  const auto plain = io::load_hf_config(hf);
  for (const int nulls : {1, 64, 65, 5000}) {
    CAPTURE(nulls);
    std::string with = text + ", \"head_dim\": null";
    for (int i = 1; i < nulls; ++i) with += fmt::format(", \"unread_{}\": null", i);
    const auto m = io::parse_hf_config(with + "}", hf);
    CHECK(m.head_dim == plain.head_dim);
    CHECK(model::count_params(m).total == model::count_params(plain).total);
    // A key the reader needs, null: absent, so still required, and named.
    std::string missing = with + "}";
    missing.replace(missing.find("\"hidden_size\": 4096"), 19, "\"hidden_size\": null");
    CHECK_THROWS_WITH_AS(io::parse_hf_config(missing, hf), doctest::Contains("hidden_size: is required"), InputError);
  }
}

TEST_CASE("a lazy zoo reads a model when first asked for it, and reports a broken file then") {
  namespace fs = std::filesystem;
  const fs::path dir = test::scratch_path("lazy-zoo");
  fs::remove_all(dir);
  fs::create_directories(dir / "models");
  fs::copy_file(test::zoo_dir() / "models" / "llama-3.2-1b.yaml", dir / "models" / "llama-3.2-1b.yaml");
  std::ofstream(dir / "models" / "broken-7b.yaml") << "schema_version: 1\nname: broken-7b\nlayers: [\n";
  // The whole zoo refuses to load; the lazy one reads the good model alone.
  CHECK(!test::input_error_of([&] { io::load_zoo(dir); }).empty());
  const model::Zoo zoo = io::lazy_zoo(dir);
  CHECK(zoo.names() == std::vector<std::string>{"broken-7b", "llama-3.2-1b"});
  const model::ModelSpec* m = zoo.find("llama-3.2-1b");
  REQUIRE(m != nullptr);
  CHECK(m->layers == 16);
  CHECK(zoo.find("llama-3.2-1b") == m);  // read once, kept
  CHECK(zoo.find("no-such-model") == nullptr);
  const std::string broken = test::input_error_of([&] { zoo.find("broken-7b"); });
  CHECK(broken.find((dir / "models" / "broken-7b.yaml").string()) != std::string::npos);
  // Every model: the broken file's problem, as load_zoo reports it.
  CHECK(test::input_error_of([&] { zoo.models(); }) == test::input_error_of([&] { io::load_zoo(dir); }));
  fs::copy_file(test::zoo_dir() / "models" / "llama-3.2-1b.yaml", dir / "models" / "broken-7b.yaml",
                fs::copy_options::overwrite_existing);
  // (now a file whose name differs from its model's: still refused, at that file)
  CHECK(test::input_error_of([&] { zoo.find("broken-7b"); }).find("differs from the file name") != std::string::npos);
  fs::remove_all(dir);
}
