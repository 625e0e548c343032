// Private to core/sweep: a YAML document as plain data, and dotted keys into it. The base
// scenario and the axis values are held this way so that threads can copy and edit them freely
// (yaml-cpp nodes share state behind the scenes), and so a point's scenario is emitted without
// yaml-cpp's emitter. (Not part of sweep's interface: that is sweep/sweep.hpp.)
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/error.hpp"

namespace ftplan::sweep::detail {

// A mapping's entry. Its own type, not std::pair<std::string, Tree>: a pair needs a complete
// Tree, which a member of Tree cannot have (GCC lets it pass, Clang's libstdc++ checks refuse it).
struct TreeEntry;

struct Tree {
  enum class Kind { null, scalar, seq, map };
  Kind kind = Kind::null;
  std::string text;                // scalar
  bool plain = true;               // scalar written without quotes in its file
  std::vector<Tree> items;         // seq
  std::vector<TreeEntry> entries;  // map, in file order
  SourceLocation where;

  static Tree scalar(std::string text, bool plain = true);
  Tree* find(const std::string& key);
  const Tree* find(const std::string& key) const { return const_cast<Tree*>(this)->find(key); }
};

struct TreeEntry {
  std::string first;
  Tree second;
  TreeEntry(std::string key, Tree value) : first(std::move(key)), second(std::move(value)) {}
};

// `n` and everything below it, each node at its place in `file`.
Tree to_tree(const YAML::Node& n, const std::string& file);

// Flow YAML (JSON-shaped) of a tree. For the scenario reader (`as_written` false) every scalar and
// key is quoted, so none is reinterpreted; for an axis column (`as_written` true) scalars appear
// as the person wrote them: {gpu: h100-sxm-80gb, gpus: 8}.
void emit(const Tree& t, std::string& out, bool as_written = false);
// The YAML document `emit` writes, built without text: every scalar a string, as quoted; a node
// carries no mark (the tree's places are its base file's, not the point's).
YAML::Node to_node(const Tree& t);
inline void show(const Tree& t, std::string& out) { emit(t, out, true); }

// Dotted keys: "job.seq_len", "plans.*.cluster.gpus", "plans.0.parallel.zero",
// "plans[8x H100 LoRA].job.micro_batch". At a list, a segment is `*` (every item), an index,
// or the `name` of an item.
struct Segment {
  std::string text;
};
// The segments of `key`; on a malformed key, sets `error` to what is wrong.
std::vector<Segment> parse_path(std::string_view key, std::string& error);

// A list item's name: its `name`, else "plan N".
std::string item_name(const Tree& item, std::size_t index);
bool is_index(const std::string& s);

// Sets `value` at `path` below `node`; creates missing mapping keys. Returns "" or what is wrong.
std::string apply(Tree& node, const std::vector<Segment>& path, std::size_t at, const Tree& value,
                  const std::string& done);

// The deepest node along `dotted` (mapping keys and list indexes) below `root`: where in the
// sweep file a problem with that key of the scenario sits.
const Tree& nearest(const Tree& root, const std::string& dotted);

}  // namespace ftplan::sweep::detail
