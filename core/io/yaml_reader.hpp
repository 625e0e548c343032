// Private machinery of the readers in core/io: load a YAML file safely, then walk its maps
// with typed getters that record every problem (file:line:column, key, what was expected)
// instead of stopping at the first. Unknown keys are errors with a "did you mean".
// The text is parsed by libyaml into yaml-cpp's nodes; parse errors become InputErrors here and
// nowhere else.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "common/enum_names.hpp"
#include "common/error.hpp"
#include "common/units.hpp"

namespace ftplan::io::detail {

// An enum's names (common/enum_names.hpp) as a reader's choices, to which a key may add its own
// aliases.
template <class E>
std::vector<std::pair<std::string, E>> choices_of() {
  std::vector<std::pair<std::string, E>> out;
  for (const EnumName<E>& n : enum_table(E{})) out.emplace_back(n.name, n.value);
  return out;
}

// Largest input file read (scenarios, zoo entries, config.json): anything bigger is not one of ours.
inline constexpr std::uintmax_t kMaxInputBytes = 16u << 20;
// Most values (scalars, lists and mappings, keys included) in one document with its aliases
// expanded. The largest shipped inputs hold about a thousand (model_zoo/hardware/gpus.yaml 1,270,
// the calibration profile in model_zoo/hardware/profiles/ 1,009); a million is an alias bomb,
// refused before any reader walks it.
inline constexpr std::size_t kMaxYamlNodes = 1'000'000;
// Deepest nesting of flow collections ('[', '{') read: shipped inputs nest 3 deep, JSON configs
// about 6; deeper (counting every bracket, in strings too) is refused by a pre-scan before
// the parser tokenizes it (load_yaml_text), and lists or mappings of any style nested deeper by
// the parse.
inline constexpr int kMaxFlowDepth = 256;

// Reads a whole input file; missing, unreadable, directory or oversized files throw InputError.
std::string read_input_file(const std::filesystem::path& path);
// Reads and parses `path`. Empty, binary, non-UTF-8, oversized, multi-document, unparsable or
// alias-bomb (more than kMaxYamlNodes values once expanded) files throw InputError naming the
// file (and line/column where the parser knows it).
YAML::Node load_yaml_file(const std::filesystem::path& path);
// Same for text already in memory; `name` is used as the file name in messages.
YAML::Node load_yaml_text(std::string_view text, const std::string& name);

class Reader;

// A YAML mapping being read. Each getter marks its key as known; finish() reports the rest.
// Getters leave `out` untouched when the key is absent, so defaults stay in the structs'
// member initialisers.
class MapView {
 public:
  MapView(Reader& reader, YAML::Node node, std::string path);
  MapView(const MapView&) = default;
  MapView(MapView&&) = default;
  // Not assignable: assigning a YAML::Node assigns the node it refers to (the document's).
  MapView& operator=(const MapView&) = delete;
  MapView& operator=(MapView&&) = delete;

  bool valid() const { return valid_; }  // false when absent or not a mapping (the latter is reported)
  bool has(std::string_view key) const;
  const std::string& path() const { return path_; }
  std::string key_path(std::string_view key) const;
  SourceLocation location() const;
  SourceLocation location_of(std::string_view key) const;  // of the value, else of the map
  YAML::Node raw() const { return node_; }

  // Marks `key` known and returns its node (null node when absent).
  YAML::Node take(std::string_view key);
  // Reports `key` missing when absent; returns whether present.
  bool require(std::string_view key, std::string_view what = {});

  bool get(std::string_view key, std::int64_t& out, std::int64_t min = std::numeric_limits<std::int64_t>::min(),
           std::int64_t max = std::numeric_limits<std::int64_t>::max());
  bool get(std::string_view key, int& out, int min = std::numeric_limits<int>::min(),
           int max = std::numeric_limits<int>::max());
  bool get(std::string_view key, double& out, double min = -std::numeric_limits<double>::infinity(),
           double max = std::numeric_limits<double>::infinity());
  bool get(std::string_view key, bool& out);
  bool get(std::string_view key, std::string& out);
  bool get_quantity(std::string_view key, Quantity kind, double& out, double min = 0,
                    double max = std::numeric_limits<double>::infinity());
  bool get_strings(std::string_view key, std::vector<std::string>& out);
  // A key the mapping must have: require(key), then get(key, out, bounds...) (a missing key is
  // reported as missing, a present one as any get reports it).
  template <class T, class... Bounds>
  bool get_required(std::string_view key, T& out, Bounds... bounds) {
    require(key);
    return get(key, out, bounds...);
  }
  bool get_required_quantity(std::string_view key, Quantity kind, double& out, double min = 0,
                             double max = std::numeric_limits<double>::infinity()) {
    require(key);
    return get_quantity(key, kind, out, min, max);
  }

  template <class E>
  bool get_enum(std::string_view key, E& out, const std::vector<std::pair<std::string, E>>& names) {
    std::string text;
    if (!get(key, text)) return false;
    for (const auto& [name, value] : names)
      if (name == text) {
        out = value;
        return true;
      }
    std::vector<std::string> options;
    for (const auto& n : names) options.push_back(n.first);
    report_bad_choice(key, text, options);
    return false;
  }
  // An enum named by its table.
  template <class E>
  bool get_enum(std::string_view key, E& out) {
    return get_enum(key, out, choices_of<E>());
  }

  // A nested mapping (invalid view when absent; reported when present but not a mapping).
  MapView map(std::string_view key);
  // A nested sequence's items (empty when absent; reported when present but not a sequence).
  std::vector<YAML::Node> seq(std::string_view key);

  // Reports keys never asked for, each with a "did you mean".
  void finish();

  Reader& reader() { return *reader_; }
  // "'text' is not one of a, b, c (did you mean ...?)" at `key`.
  void report_bad_choice(std::string_view key, const std::string& text, const std::vector<std::string>& options);

 private:
  bool scalar_of(std::string_view key, std::string& out);
  // The scalar at `key` as `text` and as a number (parse_quantity's count); reported as not `what`.
  bool number_of(std::string_view key, std::string_view what, std::string& text, double& value);

  // The value at `key` (the first such key, as yaml-cpp's lookup), or nullptr.
  const YAML::Node* find(std::string_view key) const;
  // The value at `key`, else the mapping itself (where an error about the key points).
  const YAML::Node& at(std::string_view key) const;

  Reader* reader_;
  YAML::Node node_;
  std::string path_;
  bool valid_ = false;
  std::vector<std::string> known_;
  // The mapping's scalar keys and their values in document order, listed once: yaml-cpp looks a
  // key up by converting every key of the map to a string, with two shared_ptr copies each (a
  // catalog entry's ~30 getters made that most of reading it; perf on fuzz_catalog). The keys'
  // text lives in the document, which node_ keeps alive.
  std::vector<std::pair<std::string_view, YAML::Node>> entries_;
};

// The file being read and the diagnostics collected so far.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  SourceLocation where(const YAML::Node& node) const;
  void error(const YAML::Node& at, std::string key, std::string message);
  void error(SourceLocation where, std::string key, std::string message);
  Diagnostics& diagnostics() { return diagnostics_; }
  void throw_if_any() const { diagnostics_.throw_if_any(); }

  MapView root(const YAML::Node& node, std::string path = {}) { return MapView(*this, node, std::move(path)); }

 private:
  std::string file_;
  Diagnostics diagnostics_;
};

// The file's required `schema_version` into `version`; a version other than `reads` is reported
// with what to do (`format`: "scenario-format", "sweep-format").
void read_schema_version(MapView& root, int& version, int reads, std::string_view format);

// "a mapping", "a sequence", "the text 'x'", "nothing": how a node looks, for messages.
std::string describe_node(const YAML::Node& node);

}  // namespace ftplan::io::detail
