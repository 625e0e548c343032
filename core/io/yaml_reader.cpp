#include "io/yaml_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml.h>

#include "common/strings.hpp"

namespace ftplan::io::detail {
namespace {

// Position (1-based line, column) of byte `offset` in `text`.
std::pair<int, int> line_column(std::string_view text, std::size_t offset) {
  int line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// Offset of the first byte that is not valid UTF-8, or npos.
std::size_t invalid_utf8_at(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    if (c < 0x80)
      extra = 0;
    else if ((c >> 5) == 0x6)
      extra = 1;
    else if ((c >> 4) == 0xE)
      extra = 2;
    else if ((c >> 3) == 0x1E)
      extra = 3;
    else
      return i;
    if (i + extra >= s.size() && extra > 0) return i;  // truncated sequence at the end
    for (int k = 1; k <= extra; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return i;
    i += extra + 1;
  }
  return std::string_view::npos;
}

// Limits on the parser's events, checked as they come (the document is built from the same events,
// TreeBuilder below, so nothing walks it before they hold). Two:
// - A parser that emits events without end: yaml-cpp 0.7 (Debian 12), which parsed before
//   libyaml, never returned from "{ }, b" (it filled memory; found by fuzz/readers_fuzz.cpp on an
//   HF config). A document cannot hold more nodes than its text has bytes, give or take (an
//   implicit null still takes its ',', ':' or '-'), so the pass stops the parse at 4 events per
//   byte plus a margin: text anywhere near that is not a document the parser read.
// - A document whose aliases expand it past kMaxYamlNodes (YAML's "billion laughs": nine anchors
//   of ten aliases each are 10^9 nodes written in 200 bytes). yaml-cpp shares an anchored node
//   among its aliases, so the parse itself is small; what explodes is every walk that follows
//   them (the sweep copies the whole tree). The pass counts the expanded document, every node once
//   per path to it through aliases, keeping each anchored node's expanded count so that an alias
//   adds it at once: linear in the text (a walk of the loaded tree took up to 10^6 steps an input,
//   0.55 s for a fuzzed sweep file). An alias inside the node it names expands without end.
class EventBudget : public YAML::EventHandler {
 public:
  EventBudget(std::size_t budget, std::string name) : left_(budget), name_(std::move(name)) {}
  void OnDocumentStart(const YAML::Mark& m) override {
    spend(m);
    expanded_ = 0;
    open_.clear();
  }
  void OnDocumentEnd() override { spend(last_); }
  void OnNull(const YAML::Mark& m, YAML::anchor_t anchor) override { leaf(m, anchor); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t anchor) override {
    spend(m);
    const auto it = counts_.find(anchor);
    // (An unknown anchor: yaml-cpp's own parse reports it.)
    const std::uint64_t n = it == counts_.end() ? 1 : it->second == kOpen ? kCap : it->second;
    add(m, n);
  }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    leaf(m, anchor);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(m, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open(m, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  static constexpr std::uint64_t kCap = kMaxYamlNodes + 1;   // counts saturate here
  static constexpr std::uint64_t kOpen = ~std::uint64_t{0};  // an anchored node not yet closed
  struct Frame {
    YAML::anchor_t anchor;
    std::uint64_t count;  // the open collection's expanded nodes so far, itself included
  };

  void spend(const YAML::Mark& m) {
    last_ = m;
    if (left_-- > 0) return;
    throw InputError({name_, m.is_null() ? 0 : m.line + 1, m.is_null() ? 0 : m.column + 1}, "",
                     "YAML syntax error: the parser does not come to an end here (a stray ',' after a "
                     "'{...}' or '[...]'?)");
  }
  // `n` more expanded nodes at `m`, in the innermost open collection.
  void add(const YAML::Mark& m, std::uint64_t n) {
    expanded_ = std::min(expanded_ + n, kCap);
    if (!open_.empty()) open_.back().count = std::min(open_.back().count + n, kCap);
    if (expanded_ <= kMaxYamlNodes) return;
    throw InputError({name_, m.is_null() ? 0 : m.line + 1, m.is_null() ? 0 : m.column + 1}, "",
                     fmt::format("with its aliases (*name) expanded the document holds more than {} values; "
                                 "an ftplan input holds far fewer (aliases repeated inside aliases?)",
                                 kMaxYamlNodes));
  }
  void leaf(const YAML::Mark& m, YAML::anchor_t anchor) {
    spend(m);
    add(m, 1);
    if (anchor != YAML::NullAnchor) counts_[anchor] = 1;
  }
  void open(const YAML::Mark& m, YAML::anchor_t anchor) {
    spend(m);
    add(m, 1);
    if (anchor != YAML::NullAnchor) counts_[anchor] = kOpen;
    open_.push_back({anchor, 1});
  }
  void close() {
    spend(last_);
    if (open_.empty()) return;
    const Frame f = open_.back();
    open_.pop_back();
    if (f.anchor != YAML::NullAnchor) counts_[f.anchor] = f.count;
    // Its nodes are in expanded_ already; the enclosing collection's count takes them now.
    if (!open_.empty()) open_.back().count = std::min(open_.back().count + f.count - 1, kCap);
  }

  std::size_t left_;
  std::string name_;
  YAML::Mark last_ = YAML::Mark::null_mark();
  std::uint64_t expanded_ = 0;
  std::vector<Frame> open_;
  std::unordered_map<YAML::anchor_t, std::uint64_t> counts_;
};

// The document as yaml-cpp's own loader builds it (YAML::LoadAll: its parser's events fed to its
// NodeBuilder, which is not part of the installed interface), built from the events EventBudget
// counts, in the same pass: the text is parsed once. It was parsed twice, once for the budget and
// once by LoadAll, about half of reading a profile or a scenario (callgrind). The nodes are
// yaml-cpp's own (detail::node, from its public headers) with the marks, tags and styles
// LoadAll gives them; an alias is the node its anchor names, shared, as there.
// tests/unit/sweep_test.cpp compares the two trees on every shipped, test and corpus file.
class TreeBuilder {
 public:
  using Node = YAML::detail::node;

  void start_document() {
    memory_ = std::make_shared<YAML::detail::memory_holder>();
    root_ = nullptr;
    stack_.clear();
    keys_.clear();
    anchors_.clear();
    maps_ = 0;
  }
  YAML::Node document() const;

  void null(const YAML::Mark& m, YAML::anchor_t anchor) {
    push(m, anchor).set_null();
    pop();
  }
  void alias(const YAML::Mark& m, YAML::anchor_t anchor) {
    // (LibyamlEvents refuses an unknown anchor before it hands on the alias.)
    if (anchor >= anchors_.size() || !anchors_[anchor]) throw_at(m, "an alias (*name) to no anchor (&name) before it");
    push(*anchors_[anchor]);
    pop();
  }
  void scalar(const YAML::Mark& m, const std::string& tag, YAML::anchor_t anchor, const std::string& value) {
    Node& n = push(m, anchor);
    n.set_scalar(value);
    n.set_tag(tag);
    pop();
  }
  // A sequence or a mapping opens; it is complete at its end().
  void collection(YAML::NodeType::value type, const YAML::Mark& m, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value style) {
    Node& n = push(m, anchor);
    n.set_type(type);
    n.set_tag(tag);
    n.set_style(style);
    if (type == YAML::NodeType::Map) ++maps_;
  }
  void end() {
    if (!stack_.empty() && stack_.back()->type() == YAML::NodeType::Map && maps_ > 0) --maps_;
    pop();
  }

 private:
  [[noreturn]] static void throw_at(const YAML::Mark& m, const std::string& what) {
    throw YAML::ParserException(m, what);  // load_yaml_text reports it as a syntax error
  }
  Node& push(const YAML::Mark& m, YAML::anchor_t anchor) {
    Node& n = memory_->create_node();
    n.set_mark(m);
    if (anchor != YAML::NullAnchor) {
      if (anchor >= anchors_.size()) anchors_.resize(anchor + 1, nullptr);
      anchors_[anchor] = &n;
    }
    push(n);
    return n;
  }
  // A node inside a mapping is its next key when the mapping has no key waiting for its value.
  void push(Node& n) {
    const bool key = !stack_.empty() && stack_.back()->type() == YAML::NodeType::Map && keys_.size() < maps_;
    stack_.push_back(&n);
    if (key) keys_.push_back({&n, false});
  }
  // The node on top is complete: it becomes the root, an element of its sequence, or its
  // mapping's key (then the value that follows completes the pair).
  void pop() {
    if (stack_.empty()) throw_at(YAML::Mark::null_mark(), "the parser ended a collection it did not start");
    Node& n = *stack_.back();
    stack_.pop_back();
    if (stack_.empty()) {
      root_ = &n;
      return;
    }
    Node& collection = *stack_.back();
    if (collection.type() == YAML::NodeType::Sequence) {
      collection.push_back(n, memory_);
    } else if (collection.type() == YAML::NodeType::Map && !keys_.empty()) {
      auto& [k, has_value] = keys_.back();
      if (has_value) {
        collection.insert(*k, n, memory_);
        keys_.pop_back();
      } else {
        has_value = true;
      }
    } else {
      throw_at(YAML::Mark::null_mark(), "a value outside any collection");
    }
  }

  YAML::detail::shared_memory_holder memory_;
  Node* root_ = nullptr;
  std::vector<Node*> stack_;
  std::vector<std::pair<Node*, bool>> keys_;  // a mapping's key, and whether its value has come
  std::vector<Node*> anchors_;                // by anchor number (from 1, per document)
  std::size_t maps_ = 0;                      // mappings open on the stack
};

// EventBudget's limits and TreeBuilder's tree from one parse.
class BudgetedBuilder : public YAML::EventHandler {
 public:
  BudgetedBuilder(std::size_t budget, std::string name) : budget_(budget, std::move(name)) {}
  YAML::Node document() const { return tree_.document(); }

  void OnDocumentStart(const YAML::Mark& m) override {
    budget_.OnDocumentStart(m);
    tree_.start_document();
  }
  void OnDocumentEnd() override { budget_.OnDocumentEnd(); }
  void OnNull(const YAML::Mark& m, YAML::anchor_t anchor) override {
    budget_.OnNull(m, anchor);
    tree_.null(m, anchor);
  }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t anchor) override {
    budget_.OnAlias(m, anchor);
    tree_.alias(m, anchor);
  }
  void OnScalar(const YAML::Mark& m, const std::string& tag, YAML::anchor_t anchor, const std::string& value) override {
    budget_.OnScalar(m, tag, anchor, value);
    tree_.scalar(m, tag, anchor, value);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value style) override {
    budget_.OnSequenceStart(m, tag, anchor, style);
    tree_.collection(YAML::NodeType::Sequence, m, tag, anchor, style);
  }
  void OnSequenceEnd() override {
    budget_.OnSequenceEnd();
    tree_.end();
  }
  void OnMapStart(const YAML::Mark& m, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value style) override {
    budget_.OnMapStart(m, tag, anchor, style);
    tree_.collection(YAML::NodeType::Map, m, tag, anchor, style);
  }
  void OnMapEnd() override {
    budget_.OnMapEnd();
    tree_.end();
  }

 private:
  EventBudget budget_;
  TreeBuilder tree_;
};

struct BuiltDocument;  // names the Node-making specialization below

}  // namespace
}  // namespace ftplan::io::detail

// yaml-cpp makes a Node of its own node only in its NodeBuilder; Node's header declares every
// specialization of `as_if` a friend too, and this one is how TreeBuilder's root becomes a Node.
template <>
struct YAML::as_if<ftplan::io::detail::BuiltDocument, void> {
  static Node make(detail::node& root, const detail::shared_memory_holder& memory) { return Node(root, memory); }
};

namespace ftplan::io::detail {
namespace {

YAML::Node TreeBuilder::document() const {
  if (!root_) return YAML::Node();
  return YAML::as_if<BuiltDocument, void>::make(*root_, memory_);
}

// yaml-cpp's parser replaced by libyaml's (the reference C parser, Debian's libyaml-dev), its
// events handed on in yaml-cpp's form: the readers keep yaml-cpp's nodes, marks, tags and styles
// (sweep_test compares the tree with YAML::LoadAll's on every shipped and test input; on fuzz
// input they part only where yaml-cpp departs from the YAML spec).
// yaml-cpp's scanner spent ~1,100 instructions a byte (a sweep through the CLI spent 12% of its
// time reading the 97 KB hardware catalog); libyaml's ~150 (callgrind, the catalog's six files).
// What yaml-cpp's SingleDocParser (src/singledocparser.cpp, 0.7) does that libyaml leaves to its
// caller, done here:
// - tags: an untagged plain scalar or collection is "?", an untagged quoted or block scalar "!";
//   an untagged plain "", "~", "null", "Null" or "NULL" is a null (OnNull);
// - anchors are numbered from 1 in each document as they are defined (a name defined again
//   names the later node), an alias to no anchor before it is refused;
// - marks are yaml-cpp's: byte columns ('\n' alone ends a line; libyaml counts characters and
//   also ends lines at '\r', NEL, LS and PS); an empty node stands at the token after it.
// One more limit than the pre-scan's: lists and mappings in any style nest at most kMaxFlowDepth
// deep (yaml-cpp refused 500; walks of the tree recurse).
class LibyamlEvents {
 public:
  LibyamlEvents(std::string_view text, const std::string& name) : text_(text), name_(name) {
    // A byte order mark: libyaml skips it and counts from the text after it, as yaml-cpp did.
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") text_.remove_prefix(3);
    if (!yaml_parser_initialize(&parser_)) throw std::bad_alloc();
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text_.data()), text_.size());
    yaml_parser_set_encoding(&parser_, YAML_UTF8_ENCODING);
  }
  LibyamlEvents(const LibyamlEvents&) = delete;
  LibyamlEvents& operator=(const LibyamlEvents&) = delete;
  ~LibyamlEvents() { yaml_parser_delete(&parser_); }

  // Every event of the text to `handler`; each document, at its end, onto `docs`.
  void parse(BudgetedBuilder& handler, std::vector<YAML::Node>& docs) {
    for (;;) {
      Event e(parser_);
      if (!e.ok) fail();
      const yaml_event_t& ev = e.event;
      switch (ev.type) {
        case YAML_STREAM_END_EVENT: return;
        case YAML_DOCUMENT_START_EVENT:
          anchors_.clear();
          last_anchor_ = 0;
          open_ = 0;
          handler.OnDocumentStart(mark(ev.start_mark));
          break;
        case YAML_DOCUMENT_END_EVENT:
          handler.OnDocumentEnd();
          docs.push_back(handler.document());
          break;
        case YAML_ALIAS_EVENT: {
          const YAML::Mark m = node_mark(ev, false);
          const char* alias = reinterpret_cast<const char*>(ev.data.alias.anchor);
          const auto it = anchors_.find(alias);
          if (it == anchors_.end())
            throw YAML::ParserException(m, fmt::format("an alias (*{}) to no anchor (&{}) before it", alias, alias));
          handler.OnAlias(m, it->second);
          break;
        }
        case YAML_SCALAR_EVENT: {
          const auto& s = ev.data.scalar;
          const bool empty = s.length == 0 && ev.start_mark.index == ev.end_mark.index;
          const YAML::Mark m = node_mark(ev, empty && !s.anchor && !s.tag);
          const YAML::anchor_t anchor = define(s.anchor);
          const std::string value(reinterpret_cast<const char*>(s.value), s.length);
          const bool plain = s.style == YAML_PLAIN_SCALAR_STYLE;
          if (!s.tag && plain && is_null_string(value))
            handler.OnNull(m, anchor);
          else
            handler.OnScalar(m, s.tag ? reinterpret_cast<const char*>(s.tag) : plain ? "?" : "!", anchor, value);
          break;
        }
        case YAML_SEQUENCE_START_EVENT: {
          const auto& s = ev.data.sequence_start;
          const YAML::Mark m = node_mark(ev, false);
          handler.OnSequenceStart(
              m, s.tag ? reinterpret_cast<const char*>(s.tag) : "?", define(s.anchor),
              s.style == YAML_FLOW_SEQUENCE_STYLE ? YAML::EmitterStyle::Flow : YAML::EmitterStyle::Block);
          open(m);
          break;
        }
        case YAML_MAPPING_START_EVENT: {
          const auto& s = ev.data.mapping_start;
          const YAML::Mark m = node_mark(ev, false);
          handler.OnMapStart(m, s.tag ? reinterpret_cast<const char*>(s.tag) : "?", define(s.anchor),
                             s.style == YAML_FLOW_MAPPING_STYLE ? YAML::EmitterStyle::Flow : YAML::EmitterStyle::Block);
          open(m);
          break;
        }
        case YAML_SEQUENCE_END_EVENT:
          --open_;
          handler.OnSequenceEnd();
          break;
        case YAML_MAPPING_END_EVENT:
          --open_;
          handler.OnMapEnd();
          break;
        default: break;  // the stream's start, or none
      }
    }
  }

 private:
  // One parsed event, deleted when it goes.
  struct Event {
    explicit Event(yaml_parser_t& parser) : ok(yaml_parser_parse(&parser, &event) != 0) {}
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    ~Event() {
      if (ok) yaml_event_delete(&event);
    }
    yaml_event_t event{};
    bool ok;
  };

  static bool is_null_string(const std::string& s) {  // yaml-cpp's IsNullString
    return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
  }

  [[noreturn]] void fail() {
    if (parser_.error == YAML_MEMORY_ERROR) throw std::bad_alloc();
    std::string what = parser_.problem ? parser_.problem : "unreadable text";
    if (parser_.context)
      what += fmt::format(", {} that starts at line {}", parser_.context, mark(parser_.context_mark).line + 1);
    throw YAML::ParserException(mark(parser_.problem_mark), what);
  }

  YAML::anchor_t define(const yaml_char_t* anchor) {
    if (!anchor) return YAML::NullAnchor;
    return anchors_[reinterpret_cast<const char*>(anchor)] = ++last_anchor_;
  }

  // The mark of a node's first event. An empty node (a mapping's missing value, a list's empty
  // entry) stands where yaml-cpp's parser saw it: at the token after it, the first character past
  // libyaml's place for it (after the ':' or '-') that is not white space or a comment.
  YAML::Mark node_mark(const yaml_event_t& ev, bool empty) {
    YAML::Mark m = mark(ev.start_mark);
    if (!empty) return m;
    auto at = static_cast<std::size_t>(m.pos);
    while (at < text_.size()) {
      const char c = text_[at];
      if (c == '#') {
        while (at < text_.size() && text_[at] != '\n') ++at;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        if (c == '\n') {
          ++m.line;
          m.column = 0;
        } else {
          ++m.column;
        }
        ++at;
      } else {
        break;
      }
    }
    m.pos = static_cast<int>(at);
    if (at == text_.size()) m.column = 0;  // yaml-cpp's scanner ends the stream on a new line
    return m;
  }
  void open(const YAML::Mark& m) {
    if (open_ >= static_cast<std::size_t>(kMaxFlowDepth))
      throw InputError({name_, m.line + 1, m.column + 1}, "",
                       fmt::format("lists or mappings nested more than {} deep; no input needs that", kMaxFlowDepth));
    ++open_;
  }

  // libyaml's mark (characters from the start) as yaml-cpp's (bytes; lines end at '\n'), by a
  // cursor that moves forward with the events and starts over where one goes back.
  YAML::Mark mark(const yaml_mark_t& at) {
    if (at.index < chars_) {
      cursor_ = {};
      chars_ = 0;
    }
    while (chars_ < at.index && cursor_.pos < text_.size()) {
      const auto c = static_cast<unsigned char>(text_[cursor_.pos]);
      const std::size_t width = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;  // (valid UTF-8: checked)
      for (std::size_t b = 0; b < width && cursor_.pos < text_.size(); ++b) {
        if (text_[cursor_.pos] == '\n') {
          ++cursor_.line;
          cursor_.column = 0;
        } else {
          ++cursor_.column;
        }
        ++cursor_.pos;
      }
      ++chars_;
    }
    YAML::Mark m;
    m.pos = static_cast<int>(cursor_.pos);
    m.line = cursor_.line;
    m.column = cursor_.column;
    return m;
  }

  std::string_view text_;
  const std::string& name_;
  yaml_parser_t parser_{};
  std::unordered_map<std::string, YAML::anchor_t> anchors_;
  YAML::anchor_t last_anchor_ = 0;
  std::size_t open_ = 0;  // collections open
  struct Cursor {
    std::size_t pos = 0;
    int line = 0, column = 0;
  } cursor_;
  std::size_t chars_ = 0;  // the characters before cursor_.pos
};

}  // namespace

// Where '[' and '{' first stand more than `limit` deeper than the ']' and '}' before them, or npos:
// a pre-scan in one pass, before the parser, whose scanner may tokenize a whole run of '[' before
// any depth guard sees it (yaml-cpp's did: 8 MB of '[' took 50 s and 1.9 GB). Every bracket
// counts, in strings and comments too: any YAML-aware shortcut (quotes, comments, plain scalars)
// can be fooled into skipping real nesting, and no real input holds 256 unbalanced brackets.
std::size_t flow_too_deep_at(std::string_view text, int limit) {
  int depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

YAML::Node load_yaml_text(std::string_view text, const std::string& name) {
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    const auto [line, column] = line_column(text, nul);
    throw InputError({name, line, column}, "", "this is a binary file, not YAML text (NUL byte)");
  }
  if (const auto bad = invalid_utf8_at(text); bad != std::string_view::npos) {
    const auto [line, column] = line_column(text, bad);
    throw InputError({name, line, column}, "", "the file is not UTF-8 text");
  }
  if (trim(text).empty()) throw InputError({name, 0, 0}, "", "the file is empty");
  if (const auto deep = flow_too_deep_at(text, kMaxFlowDepth); deep != std::string_view::npos) {
    const auto [line, column] = line_column(text, deep);
    throw InputError(
        {name, line, column}, "",
        fmt::format("lists or mappings nested more than {} deep ('[' or '{{'); no input needs that", kMaxFlowDepth));
  }
  std::vector<YAML::Node> docs;
  try {
    BudgetedBuilder builder(4 * text.size() + 1024, name);
    LibyamlEvents(text, name).parse(builder, docs);
  } catch (const YAML::Exception& e) {
    // yaml-cpp's messages read "yaml-cpp: error at line L, column C: what"; keep only `what`.
    const int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    const int column = e.mark.is_null() ? 0 : e.mark.column + 1;
    throw InputError({name, line, column}, "", "YAML syntax error: " + e.msg);
  }
  if (docs.empty() || docs.front().IsNull()) throw InputError({name, 0, 0}, "", "the file holds no YAML document");
  if (docs.size() > 1)
    throw InputError({name, docs[1].Mark().line + 1, docs[1].Mark().column + 1}, "",
                     "the file holds more than one YAML document ('---'); expected one");
  return docs.front();
}

std::string read_input_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw InputError({name, 0, 0}, "", "no such file");
  if (std::filesystem::is_directory(status)) throw InputError({name, 0, 0}, "", "is a directory, not a file");
  if (std::filesystem::is_regular_file(status)) {
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxInputBytes)
      throw InputError(
          {name, 0, 0}, "",
          fmt::format("the file is {} bytes; input files are limited to {} MiB", size, kMaxInputBytes >> 20));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({name, 0, 0}, "", "cannot open the file for reading");
  // Read at most the limit plus one byte, so a pipe or device cannot make us read forever.
  // Chunk by chunk: a buffer of the whole limit would be zero-filled for every small file.
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= kMaxInputBytes && in.read(chunk, sizeof chunk).gcount() > 0)
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxInputBytes)
    throw InputError({name, 0, 0}, "", fmt::format("the input is larger than {} MiB", kMaxInputBytes >> 20));
  return text;
}

YAML::Node load_yaml_file(const std::filesystem::path& path) {
  return load_yaml_text(read_input_file(path), path.string());
}

std::string describe_node(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  std::string s = node.Scalar();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return "'" + s + "'";
}

SourceLocation Reader::where(const YAML::Node& node) const {
  if (!node.IsDefined()) return {file_, 0, 0};
  const auto mark = node.Mark();
  if (mark.is_null()) return {file_, 0, 0};
  return {file_, mark.line + 1, mark.column + 1};
}

void Reader::error(const YAML::Node& at, std::string key, std::string message) {
  diagnostics_.error(where(at), std::move(key), std::move(message));
}

void Reader::error(SourceLocation where, std::string key, std::string message) {
  diagnostics_.error(std::move(where), std::move(key), std::move(message));
}

MapView::MapView(Reader& reader, YAML::Node node, std::string path)
    : reader_(&reader), node_(std::move(node)), path_(std::move(path)) {
  if (!node_.IsDefined() || node_.IsNull()) return;
  if (!node_.IsMap()) {
    reader_->error(node_, path_, fmt::format("expected a mapping of keys; got {}", describe_node(node_)));
    return;
  }
  valid_ = true;
  entries_.reserve(node_.size());
  for (const auto& item : node_)
    if (item.first.IsScalar()) entries_.emplace_back(item.first.Scalar(), item.second);
}

const YAML::Node* MapView::find(std::string_view key) const {
  for (const auto& [k, value] : entries_)
    if (k == key) return &value;
  return nullptr;
}

const YAML::Node& MapView::at(std::string_view key) const {
  const YAML::Node* n = find(key);
  return n ? *n : node_;
}

bool MapView::has(std::string_view key) const { return find(key) != nullptr; }

std::string MapView::key_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

SourceLocation MapView::location() const { return reader_->where(node_); }

SourceLocation MapView::location_of(std::string_view key) const {
  if (const YAML::Node* n = find(key)) return reader_->where(*n);
  return location();
}

YAML::Node MapView::take(std::string_view key) {
  known_.emplace_back(key);
  if (const YAML::Node* n = find(key)) return *n;
  // An absent key: one undefined node shared by every reader (a node of its own cost a handful of
  // allocations, a fifth of reading a sweep point's scenario). yaml-cpp's copies share their node,
  // so a reader that assigned to its copy would define it for all: none does, and this says so.
  static const YAML::Node absent(YAML::NodeType::Undefined);
  FTPLAN_ASSERT(!absent.IsDefined(), "a reader assigned to the node of an absent key");
  return absent;
}

bool MapView::require(std::string_view key, std::string_view what) {
  if (has(key)) return true;
  known_.emplace_back(key);
  if (!valid_ && node_.IsDefined() && !node_.IsNull()) return false;  // already reported as not a mapping
  reader_->error(location(), key_path(key), what.empty() ? "is required" : fmt::format("is required: {}", what));
  return false;
}

bool MapView::scalar_of(std::string_view key, std::string& out) {
  const YAML::Node n = take(key);
  if (!n.IsDefined()) return false;
  if (!n.IsScalar()) {
    reader_->error(n, key_path(key), fmt::format("expected a single value; got {}", describe_node(n)));
    return false;
  }
  out = n.Scalar();
  return true;
}

bool MapView::number_of(std::string_view key, std::string_view what, std::string& text, double& value) {
  if (!scalar_of(key, text)) return false;
  try {
    value = parse_quantity(text, Quantity::count);
  } catch (const UnitError&) {
    reader_->error(at(key), key_path(key), fmt::format("expected {}; got '{}'", what, text));
    return false;
  }
  return true;
}

bool MapView::get(std::string_view key, std::int64_t& out, std::int64_t min, std::int64_t max) {
  std::string text;
  double value = 0;
  if (!number_of(key, "a whole number", text, value)) return false;
  const YAML::Node n = at(key);
  if (value != std::floor(value) || std::abs(value) > 9.0e18) {
    reader_->error(n, key_path(key), fmt::format("expected a whole number; got '{}'", text));
    return false;
  }
  const auto v = static_cast<std::int64_t>(value);
  if (v < min || v > max) {
    if (max == std::numeric_limits<std::int64_t>::max())
      reader_->error(n, key_path(key), fmt::format("must be at least {}; got {}", min, v));
    else
      reader_->error(n, key_path(key), fmt::format("must be between {} and {}; got {}", min, max, v));
    return false;
  }
  out = v;
  return true;
}

bool MapView::get(std::string_view key, int& out, int min, int max) {
  std::int64_t v = out;
  if (!get(key, v, min, max)) return false;
  out = static_cast<int>(v);
  return true;
}

bool MapView::get(std::string_view key, double& out, double min, double max) {
  std::string text;
  double value = 0;
  if (!number_of(key, "a number", text, value)) return false;
  const YAML::Node n = at(key);
  if (value < min || value > max) {
    if (std::isinf(max))
      reader_->error(n, key_path(key), fmt::format("must be at least {}; got {}", min, text));
    else
      reader_->error(n, key_path(key), fmt::format("must be between {} and {}; got {}", min, max, text));
    return false;
  }
  out = value;
  return true;
}

bool MapView::get(std::string_view key, bool& out) {
  std::string text;
  if (!scalar_of(key, text)) return false;
  const std::string t = to_lower(text);
  if (t == "true" || t == "yes" || t == "on") {
    out = true;
    return true;
  }
  if (t == "false" || t == "no" || t == "off") {
    out = false;
    return true;
  }
  reader_->error(at(key), key_path(key), fmt::format("expected true or false; got '{}'", text));
  return false;
}

bool MapView::get(std::string_view key, std::string& out) {
  std::string text;
  if (!scalar_of(key, text)) return false;
  if (trim(text).empty()) {
    reader_->error(at(key), key_path(key), "expected a value; got an empty string");
    return false;
  }
  out = text;
  return true;
}

bool MapView::get_quantity(std::string_view key, Quantity kind, double& out, double min, double max) {
  std::string text;
  if (!scalar_of(key, text)) return false;
  const YAML::Node n = at(key);
  double value = 0;
  try {
    value = parse_quantity(text, kind);
  } catch (const UnitError& e) {
    reader_->error(n, key_path(key), e.what());
    return false;
  }
  if (value < min || value > max) {
    reader_->error(n, key_path(key),
                   value < min ? fmt::format("must not be below {}; got '{}'", min, text)
                               : fmt::format("must not be above {}; got '{}'", max, text));
    return false;
  }
  out = value;
  return true;
}

bool MapView::get_strings(std::string_view key, std::vector<std::string>& out) {
  const YAML::Node n = take(key);
  if (!n.IsDefined()) return false;
  std::vector<std::string> values;
  if (n.IsScalar()) {
    values.push_back(n.Scalar());
  } else if (n.IsSequence()) {
    for (const auto& item : n) {
      if (!item.IsScalar()) {
        reader_->error(item, key_path(key), fmt::format("expected a list of names; got {}", describe_node(item)));
        return false;
      }
      values.push_back(item.Scalar());
    }
  } else {
    reader_->error(n, key_path(key), fmt::format("expected a list of names; got {}", describe_node(n)));
    return false;
  }
  out = std::move(values);
  return true;
}

MapView MapView::map(std::string_view key) {
  const YAML::Node n = take(key);
  return MapView(*reader_, n, key_path(key));
}

std::vector<YAML::Node> MapView::seq(std::string_view key) {
  const YAML::Node n = take(key);
  std::vector<YAML::Node> items;
  if (!n.IsDefined() || n.IsNull()) return items;
  if (!n.IsSequence()) {
    reader_->error(n, key_path(key), fmt::format("expected a list; got {}", describe_node(n)));
    return items;
  }
  for (const auto& item : n) items.push_back(item);
  return items;
}

void MapView::report_bad_choice(std::string_view key, const std::string& text,
                                const std::vector<std::string>& options) {
  reader_->error(at(key), key_path(key),
                 fmt::format("'{}' is not one of {}{}", text, join(options, ", "), did_you_mean(text, options)));
}

void MapView::finish() {
  if (!valid_) return;
  std::sort(known_.begin(), known_.end());
  known_.erase(std::unique(known_.begin(), known_.end()), known_.end());
  std::vector<std::string> seen;
  for (const auto& item : node_) {
    if (!item.first.IsScalar()) {
      reader_->error(item.first, path_, "keys must be plain names");
      continue;
    }
    const std::string& key = item.first.Scalar();
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      reader_->error(item.first, key_path(key), "appears twice in the same mapping");
      continue;
    }
    seen.push_back(key);
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    reader_->error(item.first, key_path(key),
                   fmt::format("unknown key{}; expected one of {}", did_you_mean(key, known_), join(known_, ", ")));
  }
}

void read_schema_version(MapView& root, int& version, int reads, std::string_view format) {
  root.require("schema_version", fmt::format("the {} version; this ftplan reads {}", format, reads));
  if (root.get("schema_version", version, 0) && version != reads)
    root.reader().error(root.location_of("schema_version"), "schema_version",
                        version > reads
                            ? fmt::format("{} is newer than this ftplan reads ({}); update ftplan", version, reads)
                            : fmt::format("{} is not a version this ftplan reads; it reads {}", version, reads));
}

}  // namespace ftplan::io::detail
