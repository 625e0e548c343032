// JSON, YAML and TOML documents as one tree of import::Node, each value with its place.
#include <sstream>
#include <string>
#include <unordered_set>

#include <toml++/toml.h>

#include <fmt/format.h>

#include "io/import/detail.hpp"
#include "io/yaml_reader.hpp"

namespace ftplan::io::import {
namespace {

// Deeper than any configuration file nests (DeepSpeed: 3 levels, torchtitan: 3); refusing deeper
// documents keeps the recursive conversion's stack small whatever the input.
constexpr int kMaxDepth = 64;

Node from_yaml(const YAML::Node& y, const std::string& file, int depth) {
  Node n;
  if (y.Mark().is_null())
    n.where = {file, 0, 0};
  else
    n.where = {file, y.Mark().line + 1, y.Mark().column + 1};
  if (depth > kMaxDepth) throw InputError(n.where, "", fmt::format("nested deeper than {} levels", kMaxDepth));
  switch (y.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null: n.kind = Node::Kind::null; break;
    case YAML::NodeType::Scalar:
      n.kind = Node::Kind::scalar;
      n.text = y.Scalar();
      n.quoted = y.Tag() == "!";  // yaml-cpp tags quoted scalars "!", plain ones "?"
      break;
    case YAML::NodeType::Sequence:
      n.kind = Node::Kind::seq;
      for (const auto& e : y) n.elems.push_back(from_yaml(e, file, depth + 1));
      break;
    case YAML::NodeType::Map: {
      n.kind = Node::Kind::map;
      // A key given twice: Python's json and PyYAML keep the last, OmegaConf (torchtune) refuses
      // the file; a reader that kept either would take one value and drop the other unseen.
      std::unordered_set<std::string> keys;
      for (const auto& kv : y) {
        if (!kv.first.IsScalar()) {
          const Node k = from_yaml(kv.first, file, depth + 1);
          throw InputError(k.where, "", "a mapping key that is not text");
        }
        if (!keys.insert(kv.first.Scalar()).second) {
          const Node k = from_yaml(kv.first, file, depth + 1);
          throw InputError(k.where, kv.first.Scalar(), "appears twice in the same mapping");
        }
        Node value = from_yaml(kv.second, file, depth + 1);
        // An empty value ("key:" and nothing) has no place of its own: yaml-cpp marks it where the
        // next token starts, often the next key's line. It is the key's.
        if (value.is_null() && !kv.first.Mark().is_null() &&
            (value.where.line == 0 || value.where.line > kv.first.Mark().line + 1))
          value.where = {file, kv.first.Mark().line + 1, kv.first.Mark().column + 1};
        n.items.push_back(Node::Item{kv.first.Scalar(), std::move(value)});
      }
      break;
    }
  }
  return n;
}

SourceLocation where_of(const toml::node& t, const std::string& file) {
  const auto& b = t.source().begin;
  return {file, static_cast<int>(b.line), static_cast<int>(b.column)};
}

Node from_toml(const toml::node& t, const std::string& file, int depth) {
  Node n;
  n.where = where_of(t, file);
  if (depth > kMaxDepth) throw InputError(n.where, "", fmt::format("nested deeper than {} levels", kMaxDepth));
  if (const auto* tab = t.as_table()) {
    n.kind = Node::Kind::map;
    for (const auto& [k, v] : *tab) n.items.push_back(Node::Item{std::string(k.str()), from_toml(v, file, depth + 1)});
  } else if (const auto* arr = t.as_array()) {
    n.kind = Node::Kind::seq;
    for (const auto& e : *arr) n.elems.push_back(from_toml(e, file, depth + 1));
  } else {
    n.kind = Node::Kind::scalar;
    if (const auto* s = t.as_string()) {
      n.text = s->get();
      n.quoted = true;
    } else if (const auto* i = t.as_integer()) {
      n.text = std::to_string(i->get());
    } else if (const auto* f = t.as_floating_point()) {
      n.text = fmt::format("{}", f->get());
    } else if (const auto* b = t.as_boolean()) {
      n.text = b->get() ? "true" : "false";
    } else {
      std::ostringstream os;
      t.visit([&](const auto& v) { os << v; });
      n.text = os.str();
    }
  }
  return n;
}

}  // namespace

const Node* Node::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

Node load_yaml_tree(const std::filesystem::path& path) {
  const YAML::Node y = io::detail::load_yaml_file(path);
  return from_yaml(y, path.string(), 0);
}

Node load_toml_tree(const std::filesystem::path& path) {
  const std::string text = io::detail::read_input_file(path);
  const std::string file = path.string();
  try {
    const toml::table t = toml::parse(text, file);
    return from_toml(t, file, 0);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw InputError({file, static_cast<int>(b.line), static_cast<int>(b.column)}, "",
                     fmt::format("not TOML: {}", e.description()));
  }
}

}  // namespace ftplan::io::import
