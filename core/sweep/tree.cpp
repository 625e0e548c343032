#include "sweep/tree.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/strings.hpp"

namespace ftplan::sweep::detail {

Tree Tree::scalar(std::string text, bool plain) {
  Tree t;
  t.kind = Kind::scalar;
  t.text = std::move(text);
  t.plain = plain;
  return t;
}

Tree* Tree::find(const std::string& key) {
  for (auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

Tree to_tree(const YAML::Node& n, const std::string& file) {
  Tree t;
  if (const auto mark = n.Mark(); !mark.is_null())
    t.where = {file, mark.line + 1, mark.column + 1};
  else
    t.where = {file, 0, 0};
  if (!n.IsDefined() || n.IsNull()) return t;
  if (n.IsScalar()) {
    t.kind = Tree::Kind::scalar;
    t.text = n.Scalar();
    t.plain = n.Tag() != "!";  // yaml-cpp tags quoted scalars "!"
  } else if (n.IsSequence()) {
    t.kind = Tree::Kind::seq;
    for (const auto& item : n) t.items.push_back(to_tree(item, file));
  } else if (n.IsMap()) {
    t.kind = Tree::Kind::map;
    for (const auto& kv : n) t.entries.emplace_back(kv.first.Scalar(), to_tree(kv.second, file));
  }
  return t;
}

void emit(const Tree& t, std::string& out, bool as_written) {
  switch (t.kind) {
    case Tree::Kind::null: out += "null"; return;
    case Tree::Kind::scalar:
      if (as_written && t.plain)
        out += t.text;
      else
        append_yaml_quoted(out, t.text);
      return;
    case Tree::Kind::seq:
      out += '[';
      for (std::size_t i = 0; i < t.items.size(); ++i) {
        if (i) out += ", ";
        emit(t.items[i], out, as_written);
      }
      out += ']';
      return;
    case Tree::Kind::map:
      out += '{';
      for (std::size_t i = 0; i < t.entries.size(); ++i) {
        if (i) out += ", ";
        if (as_written)
          out += t.entries[i].first;
        else
          append_yaml_quoted(out, t.entries[i].first);
        out += ": ";
        emit(t.entries[i].second, out, as_written);
      }
      out += '}';
      return;
  }
}

YAML::Node to_node(const Tree& t) {
  switch (t.kind) {
    case Tree::Kind::null: break;
    case Tree::Kind::scalar: return YAML::Node(t.text);
    case Tree::Kind::seq: {
      YAML::Node n(YAML::NodeType::Sequence);
      for (const Tree& i : t.items) n.push_back(to_node(i));
      return n;
    }
    case Tree::Kind::map: {
      YAML::Node n(YAML::NodeType::Map);
      for (const TreeEntry& e : t.entries) n.force_insert(e.first, to_node(e.second));
      return n;
    }
  }
  return YAML::Node(YAML::NodeType::Null);
}

std::vector<Segment> parse_path(std::string_view key, std::string& error) {
  std::vector<Segment> out;
  std::size_t i = 0;
  bool expect_segment = true;
  while (i < key.size()) {
    if (key[i] == '[') {
      const auto close = key.find(']', i);
      if (close == std::string_view::npos) {
        error = "a '[' without its ']'";
        return {};
      }
      out.push_back({std::string(trim(key.substr(i + 1, close - i - 1)))});
      if (out.back().text.empty()) {
        error = "an empty [ ]";
        return {};
      }
      i = close + 1;
      expect_segment = false;
      continue;
    }
    if (key[i] == '.') {
      if (expect_segment) {
        error = "an empty part between dots";
        return {};
      }
      expect_segment = true;
      ++i;
      continue;
    }
    const auto end = key.find_first_of(".[", i);
    const auto len = (end == std::string_view::npos ? key.size() : end) - i;
    out.push_back({std::string(key.substr(i, len))});
    i += len;
    expect_segment = false;
  }
  if (out.empty() || expect_segment) error = "an empty part between dots";
  return out;
}

std::string item_name(const Tree& item, std::size_t index) {
  if (item.kind == Tree::Kind::map)
    if (const Tree* n = item.find("name"); n && n->kind == Tree::Kind::scalar) return n->text;
  return fmt::format("plan {}", index);
}

bool is_index(const std::string& s) {
  return !s.empty() && s.size() < 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Sets `value` at `path` below `node`; creates missing mapping keys. Returns "" or what is wrong.
std::string apply(Tree& node, const std::vector<Segment>& path, std::size_t at, const Tree& value,
                  const std::string& done) {
  if (at == path.size()) {
    const SourceLocation where = node.where;
    node = value;
    node.where = where;
    return {};
  }
  const std::string& seg = path[at].text;
  const std::string here = done.empty() ? seg : done + "." + seg;
  if (node.kind == Tree::Kind::null) node.kind = Tree::Kind::map;
  if (node.kind == Tree::Kind::map) {
    Tree* child = node.find(seg);
    if (!child) {
      node.entries.emplace_back(seg, Tree{});
      child = &node.entries.back().second;
    }
    return apply(*child, path, at + 1, value, here);
  }
  if (node.kind == Tree::Kind::seq) {
    std::vector<Tree*> targets;
    if (seg == "*") {
      for (auto& item : node.items) targets.push_back(&item);
      if (targets.empty()) return fmt::format("{} is an empty list", done);
    } else if (is_index(seg)) {
      const auto index = static_cast<std::size_t>(std::stoul(seg));
      if (index >= node.items.size())
        return fmt::format("{} has {} items; there is no item {} (items count from 0)", done, node.items.size(), index);
      targets.push_back(&node.items[index]);
    } else {
      std::vector<std::string> names;
      for (std::size_t i = 0; i < node.items.size(); ++i) {
        names.push_back(item_name(node.items[i], i));
        if (names.back() == seg) targets.push_back(&node.items[i]);
      }
      if (targets.empty())
        return fmt::format("{} has no item named '{}'{}; names: {}", done, seg, did_you_mean(seg, names),
                           join(names, ", "));
    }
    for (Tree* t : targets)
      if (auto e = apply(*t, path, at + 1, value, here); !e.empty()) return e;
    return {};
  }
  std::string shown;
  show(node, shown);
  return fmt::format("{} is {}, not a mapping, so it has no '{}'; set {} itself", done, shown, seg, done);
}

const Tree& nearest(const Tree& root, const std::string& dotted) {
  const Tree* at = &root;
  std::string error;
  for (const auto& seg : parse_path(dotted, error)) {
    const Tree* next = nullptr;
    if (at->kind == Tree::Kind::map)
      next = at->find(seg.text);
    else if (at->kind == Tree::Kind::seq && is_index(seg.text) && std::stoul(seg.text) < at->items.size())
      next = &at->items[std::stoul(seg.text)];
    if (!next) break;
    at = next;
  }
  return *at;
}

}  // namespace ftplan::sweep::detail
