// libFuzzer targets for the readers (issue 22): each gives arbitrary bytes to one reader, which
// must read them or throw ftplan::InputError. Anything else is a bug libFuzzer reports: another
// exception (uncaught, so it aborts), a crash, an ASan/UBSan report, a hang past -timeout, memory
// past -rss_limit_mb. One executable per reader, chosen at compile time by FTPLAN_FUZZ_READER
// (fuzz/CMakeLists.txt); scripts/fuzz.sh builds them and runs each for a given time.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "io/catalog_io.hpp"
#include "io/import/import.hpp"
#include "io/model_io.hpp"
#include "io/profile_io.hpp"
#include "io/scenario_io.hpp"
#include "io/yaml_reader.hpp"
#include "sweep/output.hpp"
#include "sweep/sweep.hpp"

namespace {

namespace fs = std::filesystem;

#define FTPLAN_FUZZ_IS(name) (std::string_view(FTPLAN_FUZZ_READER) == name)

const ftplan::model::Zoo* g_zoo = nullptr;
const ftplan::hardware::Catalog* g_catalog = nullptr;

// A folder of this process's own, for the importers (which read the files they name); in memory
// (/dev/shm) where there is one; removed at exit.
struct Scratch {
  fs::path dir = (fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path()) /
                 ("ftplan-fuzz-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};
Scratch* g_scratch = nullptr;

void write(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

// The catalog is io::kCatalogFiles; the input replaces the one whose top-level list it starts with
// (gpus: unless another is named), the others stay the shipped ones.
const char* catalog_file_of(std::string_view text) {
  for (const char* kind : {"nodes", "hosts", "drives", "nics", "expanders"})
    if (text.find(std::string("\n") + kind + ":") != std::string_view::npos ||
        text.substr(0, std::string_view(kind).size() + 1) == std::string(kind) + ":")
      return kind;
  return "gpus";
}
std::map<std::string, YAML::Node>* g_catalog_files = nullptr;  // the files an input does not replace

// The four files an input does not replace are there to complete the catalog (its cross-references),
// not to be read: they are the same for every input, so reading all 73 shipped entries again per
// input (most of the time per input, measured: docs/hardening.md) reaches nothing new. They are
// the shipped files, parsed once, cut down to the first two nodes and the GPUs, hosts, drives and
// NICs those name: a catalog whose every cross-reference holds, as small as keeps one of each.
std::map<std::string, YAML::Node> small_catalog() {
  std::map<std::string, YAML::Node> files;
  for (const char* kind : ftplan::io::kCatalogFiles)
    files[kind] =
        ftplan::io::detail::load_yaml_file(fs::path(FTPLAN_ZOO_DIR) / "hardware" / (std::string(kind) + ".yaml"));
  const auto scalar = [](const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : std::string(); };
  std::map<std::string, std::set<std::string>> named;  // kind -> names the kept nodes refer to
  YAML::Node kept_nodes(YAML::NodeType::Sequence);
  for (std::size_t i = 0; i < 2 && i < files["nodes"]["nodes"].size(); ++i) {
    const YAML::Node node = files["nodes"]["nodes"][i];
    kept_nodes.push_back(node);
    named["nodes"].insert(scalar(node["name"]));
    named["gpus"].insert(scalar(node["gpu"]));
    named["hosts"].insert(scalar(node["host"]));
    for (const auto& d : node["drives"]) named["drives"].insert(scalar(d["drive"]));
    for (const auto& x : node["nics"]) named["nics"].insert(scalar(x["nic"]));
    for (const auto& g : node["default_for"]) named["gpus"].insert(scalar(g));
  }
  for (auto& [kind, root] : files) {
    YAML::Node entries(YAML::NodeType::Sequence), file(YAML::NodeType::Map);
    for (const auto& e : root[kind])
      if (named[kind].count(scalar(e["name"]))) entries.push_back(e);
    for (const auto& kv : root) file[kv.first.Scalar()] = kv.first.Scalar() == kind ? entries : kv.second;
    root = file;
  }
  return files;
}

void read_input(std::string_view text) {
  if (FTPLAN_FUZZ_IS("scenario")) {
    ftplan::io::parse_scenario(text, "fuzz.yaml", FTPLAN_SOURCE_DIR "/scenarios", *g_zoo, *g_catalog);
  } else if (FTPLAN_FUZZ_IS("sweep")) {
    ftplan::sweep::Sweep::parse(text, "fuzz.yaml", FTPLAN_SOURCE_DIR "/scenarios", *g_zoo, *g_catalog);
  } else if (FTPLAN_FUZZ_IS("sweep_output")) {
    // A sweep's own files read back, which a crash or an edit may have damaged: its journal (a
    // resumed run) and its shards' tables, CSV and JSON Lines (`ftplan sweep merge`).
    for (auto format : {ftplan::sweep::OutputFormat::csv, ftplan::sweep::OutputFormat::jsonl}) try {
        ftplan::sweep::parse_table(format, text, "fuzz.out");
      } catch (const ftplan::InputError&) {
      }
    ftplan::sweep::parse_journal(text, "fuzz.part");
  } else if (FTPLAN_FUZZ_IS("profile")) {
    ftplan::io::parse_profile(text, "fuzz.yaml");
  } else if (FTPLAN_FUZZ_IS("model")) {
    ftplan::io::parse_model_file(text, "fuzz/model.yaml");
  } else if (FTPLAN_FUZZ_IS("hf_config")) {
    ftplan::io::parse_hf_config(text, "some-model/config.json");
  } else if (std::string_view(FTPLAN_FUZZ_READER).rfind("import_", 0) == 0) {
    // The importers: the input as one config file of the target's kind (the file name carries
    // the extension detection looks at), translated and read back as a scenario.
    const fs::path p =
        g_scratch->dir / (FTPLAN_FUZZ_IS("import_torchtitan") ? "train.toml"
                          : FTPLAN_FUZZ_IS("import_accelerate") || FTPLAN_FUZZ_IS("import_torchtune") ||
                                  FTPLAN_FUZZ_IS("import_axolotl") || FTPLAN_FUZZ_IS("import_llama_factory")
                              ? "config.yaml"
                              : "config.json");
    write(p, text);
    const std::vector<ftplan::io::ImportOverride> overrides = {{"model", "llama-3.2-1b", "fuzz"},
                                                               {"plan.cluster.gpu", "h100-sxm-80gb", "fuzz"},
                                                               {"plan.cluster.gpus", "8", "fuzz"}};
    const auto imported = ftplan::io::import_configs({p}, overrides, *g_zoo);
    ftplan::io::load_imported(imported, g_scratch->dir, *g_zoo, *g_catalog);
  } else if (FTPLAN_FUZZ_IS("catalog")) {
    // Only the varied file is parsed per input; the other four are the shipped ones, parsed once.
    const std::string kind = catalog_file_of(text);
    ftplan::io::detail::read_catalog("fuzz", [&](const fs::path& path) {
      const std::string stem = path.stem().string();
      return stem == kind ? ftplan::io::detail::load_yaml_text(text, path.string()) : g_catalog_files->at(stem);
    });
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_scratch = new Scratch;
  g_zoo = new ftplan::model::Zoo(ftplan::io::load_zoo(FTPLAN_ZOO_DIR));
  g_catalog = new ftplan::hardware::Catalog(ftplan::io::load_catalog(FTPLAN_ZOO_DIR));
  if (FTPLAN_FUZZ_IS("catalog")) g_catalog_files = new std::map<std::string, YAML::Node>(small_catalog());
  std::atexit([] { delete g_scratch; });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    read_input(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const ftplan::InputError&) {
    // The expected answer to bad input.
  }
  return 0;
}
