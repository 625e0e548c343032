#include "io/yaml_edit.hpp"

#include <charconv>
#include <cstddef>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/error.hpp"
#include "io/yaml_reader.hpp"

namespace ftplan::io {

namespace {

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

// The text's lines: [begin, end) offsets without the '\n' and a trailing '\r'.
struct Lines {
  std::string_view text;
  std::vector<std::pair<std::size_t, std::size_t>> spans;

  explicit Lines(std::string_view t) : text(t) {
    for (std::size_t at = 0; at <= t.size();) {
      std::size_t end = t.find('\n', at);
      const std::size_t next = end == std::string_view::npos ? t.size() + 1 : end + 1;
      if (end == std::string_view::npos) end = t.size();
      std::size_t stop = end;
      if (stop > at && t[stop - 1] == '\r') --stop;
      if (at < t.size() || spans.empty()) spans.emplace_back(at, stop);
      at = next;
    }
  }
  std::size_t size() const { return spans.size(); }
  std::string_view line(std::size_t i) const { return text.substr(spans[i].first, spans[i].second - spans[i].first); }
  std::size_t begin(std::size_t i) const { return spans[i].first; }
  std::size_t indent(std::size_t i) const {
    const std::string_view l = line(i);
    const std::size_t p = l.find_first_not_of(' ');
    return p == std::string_view::npos ? l.size() : p;
  }
  // Blank, a comment, or a document marker: no content.
  bool content(std::size_t i) const {
    const std::string_view l = line(i);
    const std::size_t p = l.find_first_not_of(' ');
    if (p == std::string_view::npos || l[p] == '#') return false;
    return !(p == 0 && (l.substr(0, 3) == "---" || l.substr(0, 3) == "..." || l[0] == '%'));
  }
  // The offset where line i's next line starts (the text's size for the last line).
  std::size_t after(std::size_t i) const { return i + 1 < size() ? spans[i + 1].first : text.size(); }
};

struct Node {
  enum Kind { block_map, block_seq, scalar, flow_map, flow_seq, empty } kind = empty;
  // Block collections: content lines in [first, end); `indent` is the column of their keys or dashes;
  // a mapping that starts after a sequence item's "- " has its first key on line `first` at `indent`.
  std::size_t first = 0, end = 0, indent = 0;
  // Scalars, flow collections and empty values: the value's text is [a, b) of the whole text.
  std::size_t a = 0, b = 0;
  std::size_t line = 0;  // where the value (or, for a block, its key) is
  // How its parent holds it: a mapping entry whose key starts at `key_at` (offset) on `key_line`,
  // with the value (or, for a block, the ':') ending at `colon` + 1.
  bool entry = false;
  std::size_t key_line = 0, key_at = 0, colon = 0;
  // In a flow mapping: where the previous entry's value ends (kNone for the first) and the next
  // entry's key starts (kNone for the last).
  std::size_t prev_end = kNone, next_at = kNone;
};

class Editor {
 public:
  Editor(std::string_view text, std::string_view name) : lines_(text), text_(text), name_(name) {}

  [[noreturn]] void fail(std::size_t offset, std::string_view path, const std::string& message) const {
    int line = 1, col = 1;
    for (std::size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw InputError(SourceLocation{std::string(name_), line, col}, std::string(path), message);
  }

  Node root() const {
    Node n;
    n.kind = Node::block_map;
    n.first = 0;
    n.end = lines_.size();
    n.indent = 0;
    for (std::size_t i = 0; i < lines_.size(); ++i)
      if (lines_.content(i)) {
        n.indent = lines_.indent(i);
        n.first = i;
        const char c = lines_.line(i)[n.indent];
        if (c == '{' || c == '[') return value_at(i, lines_.begin(i) + n.indent, n.indent, "");
        break;
      }
    return n;
  }

  // The last content line of a block node (its first when it has none after).
  std::size_t last_content(const Node& n) const {
    std::size_t last = n.first;
    for (std::size_t i = n.first; i < n.end; ++i)
      if (lines_.content(i)) last = i;
    return last;
  }

  // The child `key` of `parent` (a mapping) or item `key` (a sequence); nullopt when absent.
  std::optional<Node> child(const Node& parent, const std::string& key, std::string_view path) const {
    switch (parent.kind) {
      case Node::block_map: return block_map_child(parent, key, path);
      case Node::block_seq: return block_seq_item(parent, index(parent, key, path), path);
      case Node::flow_map:
      case Node::flow_seq: return flow_child(parent, key, path);
      case Node::scalar: fail(parent.a, path, "is a scalar, not a mapping or a sequence");
      case Node::empty: return std::nullopt;
    }
    return std::nullopt;
  }

  // The path's nodes from the root: one per component found (fewer when the rest is absent).
  std::vector<Node> walk(const std::vector<std::string>& keys, std::string_view path) const {
    std::vector<Node> found{root()};
    for (const auto& k : keys) {
      const std::optional<Node> c = child(found.back(), k, path);
      if (!c) break;
      found.push_back(*c);
    }
    return found;
  }

  const Lines& lines() const { return lines_; }

 private:
  std::size_t index(const Node& n, const std::string& key, std::string_view path) const {
    std::size_t i = 0;
    const auto [p, ec] = std::from_chars(key.data(), key.data() + key.size(), i);
    if (ec != std::errc() || p != key.data() + key.size())
      fail(offset_of(n), path, fmt::format("is a sequence: '{}' is not an item number", key));
    return i;
  }
  std::size_t offset_of(const Node& n) const {
    return n.kind == Node::block_map || n.kind == Node::block_seq ? lines_.begin(n.first) + n.indent : n.a;
  }

  // End of a quoted scalar starting at `at` (the offset after its closing quote).
  std::size_t quoted_end(std::size_t at, std::size_t stop, std::string_view path) const {
    const char q = text_[at];
    for (std::size_t i = at + 1; i < stop; ++i) {
      if (q == '"' && text_[i] == '\\') {
        ++i;
      } else if (text_[i] == q) {
        if (q == '\'' && i + 1 < stop && text_[i + 1] == '\'') {
          ++i;
          continue;
        }
        return i + 1;
      }
    }
    fail(at, path, "a quoted scalar that spans lines cannot be edited here");
  }

  // End of the flow collection opening at `at` (after its closing bracket), on the same line.
  std::size_t flow_end(std::size_t at, std::size_t stop, std::string_view path) const {
    int depth = 0;
    for (std::size_t i = at; i < stop; ++i) {
      const char c = text_[i];
      if (c == '"' || c == '\'') {
        i = quoted_end(i, stop, path) - 1;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return i + 1;
      } else if (c == '#' && text_[i - 1] == ' ') {
        break;
      }
    }
    fail(at, path, "a flow collection ({...} or [...]) that spans lines cannot be edited here: write it as a block");
  }

  static void refuse_special(const Editor& e, std::size_t at, char c, std::string_view path) {
    if (c == '&' || c == '*') e.fail(at, path, "an anchored or aliased node (& or *) is shared: edit it by hand");
    if (c == '!') e.fail(at, path, "a tagged node (!) cannot be edited here");
    if (c == '|' || c == '>') e.fail(at, path, "a block scalar (| or >) cannot be edited here");
  }

  // The value that starts at or after offset `at` on line `line` (whose key is at column
  // `key_indent`): on the line, or a block on the lines below, or empty.
  Node value_at(std::size_t line, std::size_t at, std::size_t key_indent, std::string_view path,
                bool seq_same_indent = true) const {
    const std::size_t stop = lines_.spans[line].second;
    while (at < stop && text_[at] == ' ') ++at;
    Node n;
    n.line = line;
    n.a = n.b = at;
    if (at < stop && text_[at] != '#') {
      const char c = text_[at];
      refuse_special(*this, at, c, path);
      if (c == '{' || c == '[') {
        n.kind = c == '{' ? Node::flow_map : Node::flow_seq;
        n.b = flow_end(at, stop, path);
      } else if (c == '"' || c == '\'') {
        n.kind = Node::scalar;
        n.b = quoted_end(at, stop, path);
      } else {
        n.kind = Node::scalar;
        std::size_t e = at;
        while (e < stop && !(text_[e] == '#' && text_[e - 1] == ' ')) ++e;
        while (e > at && text_[e - 1] == ' ') --e;
        n.b = e;
      }
      return n;
    }
    // Nothing on the line: a block below, or an empty (null) value.
    std::size_t j = line + 1;
    while (j < lines_.size() && !lines_.content(j)) ++j;
    if (j >= lines_.size()) return n;
    const std::size_t ind = lines_.indent(j);
    const std::string_view l = lines_.line(j);
    const bool dash = l[ind] == '-' && (ind + 1 == l.size() || l[ind + 1] == ' ');
    if (ind > key_indent || (ind == key_indent && dash && seq_same_indent)) {
      n.kind = dash ? Node::block_seq : Node::block_map;
      n.first = j;
      n.indent = ind;
      n.end = block_end(j, ind, dash);
      refuse_special(*this, lines_.begin(j) + ind, l[ind], path);
    }
    n.line = line;
    return n;
  }

  // The end of a block whose first content line is `first`, at `indent` (a sequence's items at
  // `indent` are dashes; a mapping's keys are there).
  std::size_t block_end(std::size_t first, std::size_t indent, bool seq) const {
    for (std::size_t i = first + 1; i < lines_.size(); ++i) {
      if (!lines_.content(i)) continue;
      const std::size_t ind = lines_.indent(i);
      if (ind < indent) return i;
      if (seq && ind == indent && lines_.line(i)[ind] != '-') return i;
    }
    return lines_.size();
  }

  // "key:" at offset `at`: the key and the offset of its ':' (nullopt when it is not one).
  std::optional<std::pair<std::string, std::size_t>> key_at(std::size_t at, std::size_t stop, std::string_view path,
                                                            bool flow) const {
    if (at >= stop) return std::nullopt;
    std::string key;
    std::size_t i = at;
    if (text_[at] == '"' || text_[at] == '\'') {
      i = quoted_end(at, stop, path);
      const std::optional<std::string> k = unquote(text_.substr(at, i - at));
      key = k ? *k : std::string();
      while (i < stop && text_[i] == ' ') ++i;
      if (i >= stop || text_[i] != ':') return std::nullopt;
    } else {
      for (; i < stop; ++i) {
        const char c = text_[i];
        if (c == ':' &&
            (i + 1 == stop || text_[i + 1] == ' ' || (flow && (text_[i + 1] == ',' || text_[i + 1] == '}'))))
          break;
        if (c == '#' && i > at && text_[i - 1] == ' ') return std::nullopt;
        if (flow && (c == ',' || c == '}' || c == ']')) return std::nullopt;
      }
      if (i >= stop) return std::nullopt;
      std::size_t e = i;
      while (e > at && text_[e - 1] == ' ') --e;
      key = std::string(text_.substr(at, e - at));
    }
    return std::pair{key, i};
  }

  std::optional<Node> block_map_child(const Node& m, const std::string& key, std::string_view path) const {
    for (std::size_t i = m.first; i < m.end; ++i) {
      if (!lines_.content(i)) continue;
      // The first line of a sequence item's mapping has its key after the "- ".
      const std::size_t col = lines_.indent(i) == m.indent || i != m.first ? lines_.indent(i) : m.indent;
      if (col != m.indent) continue;
      const std::size_t at = lines_.begin(i) + col;
      if (text_[at] == '-' && (at + 1 == text_.size() || text_[at + 1] == ' ' || text_[at + 1] == '\n')) continue;
      const auto k = key_at(at, lines_.spans[i].second, path, false);
      if (!k) continue;
      if (k->first == "<<") fail(at, path, "a merge key (<<) pulls keys from an alias: edit them by hand");
      if (k->first != key) continue;
      Node n = value_at(i, k->second + 1, m.indent, path);
      n.entry = true;
      n.key_line = i;
      n.key_at = at;
      n.colon = k->second;
      return n;
    }
    return std::nullopt;
  }

  std::optional<Node> block_seq_item(const Node& s, std::size_t wanted, std::string_view path) const {
    std::size_t count = 0;
    for (std::size_t i = s.first; i < s.end; ++i) {
      if (!lines_.content(i) || lines_.indent(i) != s.indent || lines_.line(i)[s.indent] != '-') continue;
      if (count++ != wanted) continue;
      const std::size_t stop = lines_.spans[i].second;
      std::size_t at = lines_.begin(i) + s.indent + 1;
      while (at < stop && text_[at] == ' ') ++at;
      if (at < stop && text_[at] != '{' && text_[at] != '[' && text_[at] != '#' && key_at(at, stop, path, false)) {
        Node n;
        n.kind = Node::block_map;
        n.first = i;
        n.indent = at - lines_.begin(i);
        n.end = block_end(i, s.indent + 1, false);
        n.line = i;
        return n;
      }
      return value_at(i, at, s.indent, path, false);
    }
    return std::nullopt;
  }

  std::optional<Node> flow_child(const Node& f, const std::string& key, std::string_view path) const {
    const bool map = f.kind == Node::flow_map;
    const std::size_t wanted = map ? 0 : index(f, key, path);
    const std::size_t stop = f.b - 1;  // the closing bracket
    std::size_t at = f.a + 1, count = 0, prev_end = kNone;
    std::optional<Node> hit;
    while (true) {
      while (at < stop && text_[at] == ' ') ++at;
      if (at >= stop) break;
      const std::size_t entry_at = at;
      std::string k;
      if (map) {
        const auto kk = key_at(at, stop, path, true);
        if (!kk) fail(at, path, "a flow mapping entry without 'key: value' cannot be edited here");
        k = kk->first;
        at = kk->second + 1;
      }
      Node v = value_at(f.line, at, 0, path);
      // A plain scalar in a flow collection ends at ',' or the closing bracket.
      if (v.kind == Node::scalar && text_[v.a] != '"' && text_[v.a] != '\'') {
        std::size_t e = v.a;
        while (e < stop && text_[e] != ',') ++e;
        while (e > v.a && text_[e - 1] == ' ') --e;
        v.b = e;
      } else if (v.kind == Node::empty) {
        v.a = v.b = at;
      }
      if (hit && hit->next_at == kNone) hit->next_at = entry_at;
      if (map ? k == key : count == wanted) {
        hit = v;
        hit->entry = map;
        hit->key_line = f.line;
        hit->key_at = entry_at;
        hit->colon = at - 1;
        hit->prev_end = prev_end;
      }
      ++count;
      prev_end = v.b;
      at = v.b;
      while (at < stop && text_[at] == ' ') ++at;
      if (at < stop && text_[at] == ',')
        ++at;
      else if (at < stop)
        fail(at, path, "expected ',' in the flow collection");
    }
    return hit;
  }

 public:
  static std::optional<std::string> unquote(std::string_view s) {
    if (s.size() < 2) return std::string(s);
    if (s.front() == '\'') {
      std::string out;
      for (std::size_t i = 1; i + 1 < s.size(); ++i) {
        out += s[i];
        if (s[i] == '\'') ++i;
      }
      return out;
    }
    if (s.front() == '"') {
      try {
        return detail::load_yaml_text(s, "").as<std::string>();
      } catch (const YAML::Exception&) {
        return std::nullopt;
      } catch (const InputError&) {
        return std::nullopt;
      }
    }
    return std::string(s);
  }

 private:
  Lines lines_;
  std::string_view text_;
  std::string_view name_;
};

std::vector<std::string> split(std::string_view path) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (true) {
    const std::size_t dot = path.find('.', at);
    out.emplace_back(path.substr(at, dot == std::string_view::npos ? std::string_view::npos : dot - at));
    if (dot == std::string_view::npos) break;
    at = dot + 1;
  }
  return out;
}

std::string eol_of(std::string_view text) { return text.find("\r\n") != std::string_view::npos ? "\r\n" : "\n"; }

// `value` under the keys `rest` (after the first): "{k2: {k3: value}}".
std::string nested(const std::vector<std::string>& keys, std::size_t from, std::string_view value) {
  std::string out(value);
  for (std::size_t i = keys.size(); i-- > from;) out = "{" + keys[i] + ": " + out + "}";
  return out;
}

// The edited text must still read as YAML, as the readers read it (a bug here must not hand a
// person a broken file).
std::string checked(std::string text, std::string_view path, std::string_view name) {
  try {
    (void)detail::load_yaml_text(text, std::string(name));
  } catch (const InputError& e) {
    const Diagnostic& d = e.diagnostics().front();
    throw InputError(d.where, std::string(path),
                     fmt::format("the edit would not read as YAML ({}); the text was left as it was", d.message));
  }
  return text;
}

// Inserts `line` (without indentation or end of line) after line `after` at `indent`.
std::string insert_line(std::string_view text, const Lines& lines, std::size_t after, std::size_t indent,
                        const std::string& line) {
  const std::string eol = eol_of(text);
  const std::size_t at = lines.after(after);
  std::string out(text.substr(0, at));
  if (at == text.size() && !text.empty() && text.back() != '\n') out += eol;
  out += std::string(indent, ' ') + line + eol;
  out += text.substr(at);
  return out;
}

std::string splice(std::string_view text, std::size_t a, std::size_t b, std::string_view with) {
  return std::string(text.substr(0, a)) + std::string(with) + std::string(text.substr(b));
}

}  // namespace

std::string yaml_scalar(std::string_view s) {
  bool plain = !s.empty() && s.front() != ' ' && s.back() != ' ' &&
               std::string_view("-?:,[]{}#&*!|>'\"%@`").find(s.front()) == std::string_view::npos &&
               s.find(": ") == std::string_view::npos && s.find(" #") == std::string_view::npos &&
               s.find_first_of("\n\r\t,[]{}") == std::string_view::npos && s.back() != ':';
  if (plain) {
    // It must read back as the same string (not as null, a bool, or another spelling).
    try {
      const YAML::Node n = detail::load_yaml_text(s, "");
      plain = n.IsScalar() && n.Scalar() == s && n.Tag() != "!";
    } catch (const InputError&) {
      plain = false;
    }
  }
  if (plain) return std::string(s);
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::optional<std::string> yaml_value(std::string_view text, std::string_view path, std::string_view name) {
  const Editor ed(text, name);
  const std::vector<std::string> keys = split(path);
  const std::vector<Node> found = ed.walk(keys, path);
  if (found.size() != keys.size() + 1) return std::nullopt;
  const Node& n = found.back();
  if (n.kind == Node::scalar) return Editor::unquote(text.substr(n.a, n.b - n.a));
  if (n.kind == Node::flow_map || n.kind == Node::flow_seq) return std::string(text.substr(n.a, n.b - n.a));
  return std::string();
}

std::string yaml_set(std::string_view text, std::string_view path, std::string_view value, std::string_view name) {
  const Editor ed(text, name);
  if (value.find_first_of("\r\n") != std::string_view::npos) ed.fail(0, path, "the value must be one line");
  const std::vector<std::string> keys = split(path);
  const std::vector<Node> found = ed.walk(keys, path);
  const Lines& lines = ed.lines();
  if (found.size() == keys.size() + 1) {
    const Node& n = found.back();
    if (n.kind == Node::block_map || n.kind == Node::block_seq) {
      if (!n.entry) ed.fail(lines.begin(n.first), path, "a whole sequence item cannot be replaced here");
      // "key:" then the value; the block's lines go (comments after its last content line stay).
      const std::size_t from = lines.begin(n.first), to = lines.after(ed.last_content(n));
      std::string out = splice(text, from, to, "");
      out = splice(out, n.colon + 1, n.colon + 1, std::string(" ") + std::string(value));
      return checked(std::move(out), path, name);
    }
    if (n.kind == Node::empty)
      return checked(splice(text, n.colon + 1, n.colon + 1, " " + std::string(value)), path, name);
    return checked(splice(text, n.a, n.b, value), path, name);
  }
  // Absent: added under the deepest node present.
  const Node& parent = found.back();
  const std::size_t depth = found.size() - 1;  // keys[depth] is the first missing one
  const std::string entry = keys[depth] + ": " + nested(keys, depth + 1, value);
  switch (parent.kind) {
    case Node::block_map:
      return checked(insert_line(text, lines, ed.last_content(parent), parent.indent, entry), path, name);
    case Node::flow_map: {
      const std::size_t close = parent.b - 1;
      std::size_t last = close;
      while (last > parent.a + 1 && text[last - 1] == ' ') --last;
      const bool none = last == parent.a + 1;
      return checked(splice(text, last, last, (none ? "" : ", ") + entry), path, name);
    }
    case Node::empty:
      if (!parent.entry) break;
      return checked(splice(text, parent.colon + 1, parent.colon + 1, " {" + entry + "}"), path, name);
    case Node::block_seq:
    case Node::flow_seq:
      ed.fail(parent.kind == Node::block_seq ? lines.begin(parent.first) : parent.a, path,
              fmt::format("the sequence has no item {}", keys[depth]));
    case Node::scalar: break;
  }
  ed.fail(parent.a, path, "is a scalar, not a mapping");
}

std::string yaml_erase(std::string_view text, std::string_view path, std::string_view name) {
  const Editor ed(text, name);
  const std::vector<std::string> keys = split(path);
  const std::vector<Node> found = ed.walk(keys, path);
  if (found.size() != keys.size() + 1) return std::string(text);
  const Node& n = found.back();
  const Node& parent = found[found.size() - 2];
  const Lines& lines = ed.lines();
  if (!n.entry) ed.fail(n.a, path, "only mapping keys can be erased here, not sequence items");
  if (parent.kind == Node::flow_map) {
    // "a: 1, b: 2, c: 3": b goes with the ", " before it; a with the ", " after it.
    if (n.prev_end != kNone) return checked(splice(text, n.prev_end, n.b, ""), path, name);
    if (n.next_at != kNone) return checked(splice(text, n.key_at, n.next_at, ""), path, name);
    return checked(splice(text, n.key_at, n.b, ""), path, name);
  }
  if (n.key_at != lines.begin(n.key_line) + lines.indent(n.key_line))
    ed.fail(n.key_at, path, "the first key of a sequence item goes with its '- ': edit it by hand");
  const std::size_t last = n.kind == Node::block_map || n.kind == Node::block_seq ? ed.last_content(n) : n.key_line;
  return checked(splice(text, lines.begin(n.key_line), lines.after(last), ""), path, name);
}

std::string yaml_append_item(std::string_view text, std::string_view path,
                             const std::vector<std::pair<std::string, std::string>>& keys, std::string_view name) {
  const Editor ed(text, name);
  if (keys.empty()) ed.fail(0, path, "an item needs at least one key");
  for (const auto& [k, v] : keys)
    if (v.find_first_of("\r\n") != std::string::npos) ed.fail(0, path, "each value must be one line");
  const std::vector<std::string> path_keys = split(path);
  const std::vector<Node> found = ed.walk(path_keys, path);
  const Lines& lines = ed.lines();
  const auto item_lines = [&](std::size_t indent) {
    const std::string eol = eol_of(text);
    std::string out;
    for (std::size_t i = 0; i < keys.size(); ++i)
      out += std::string(i == 0 ? indent : indent + 2, ' ') + (i == 0 ? "- " : "") + keys[i].first + ": " +
             keys[i].second + eol;
    return out;
  };
  const auto insert_after = [&](std::size_t line, std::size_t indent) {
    const std::size_t at = lines.after(line);
    std::string out(text.substr(0, at));
    if (at == text.size() && !text.empty() && text.back() != '\n') out += eol_of(text);
    return checked(out + item_lines(indent) + std::string(text.substr(at)), path, name);
  };
  if (found.size() == path_keys.size() + 1) {
    const Node& n = found.back();
    if (n.kind == Node::block_seq) return insert_after(ed.last_content(n), n.indent);
    if (n.kind == Node::empty && n.entry) return insert_after(n.key_line, lines.indent(n.key_line) + 2);
    ed.fail(n.kind == Node::block_map ? lines.begin(n.first) : n.a, path,
            "is not a block sequence ('- ' items on lines of their own)");
  }
  if (found.size() != path_keys.size() || found.back().kind != Node::block_map)
    ed.fail(0, path, "its parent is missing or not a block mapping");
  const Node& parent = found.back();
  std::string out = insert_line(text, lines, ed.last_content(parent), parent.indent, path_keys.back() + ":");
  return yaml_append_item(out, path, keys, name);
}

}  // namespace ftplan::io
