#include "sweep/output.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <optional>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "io/json_value.hpp"
#include "io/results.hpp"

namespace ftplan::sweep {

using nlohmann::ordered_json;

namespace {

// nullopt for a JSON value a row cannot hold (object, array).
std::optional<io::Value> from_json(const ordered_json& j) {
  switch (j.type()) {
    case ordered_json::value_t::null: return io::Value(nullptr);
    case ordered_json::value_t::boolean: return io::Value(j.get<bool>());
    case ordered_json::value_t::number_integer: return io::Value(j.get<std::int64_t>());
    case ordered_json::value_t::number_unsigned: return io::Value(static_cast<std::int64_t>(j.get<std::uint64_t>()));
    case ordered_json::value_t::number_float: return io::Value(j.get<double>());
    case ordered_json::value_t::string: return io::Value(j.get<std::string>());
    default: return std::nullopt;
  }
}

// A JSON string: nlohmann's escaping (and its refusal of bytes that are not UTF-8).
void append_json_string(std::string& out, const std::string& s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x80 && c != '"' && c != '\\';
  });
  if (plain) {
    out += '"';
    out += s;
    out += '"';
  } else {
    out += ordered_json(s).dump();
  }
}

// A row's value as its journal holds it: a double the shortest text that reads back as the same
// double, and as a double (a whole one with ".0"); one that is not finite as null (io::json_null).
void append_json_value(std::string& out, const io::Value& v) {
  if (io::json_null(v)) {
    out += "null";
    return;
  }
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>) {
          out += "null";
        } else if constexpr (std::is_same_v<T, bool>) {
          out += x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          fmt::format_to(std::back_inserter(out), "{}", x);
        } else if constexpr (std::is_same_v<T, double>) {
          const std::size_t at = out.size();
          fmt::format_to(std::back_inserter(out), "{}", x);
          if (out.find_first_of(".e", at) == std::string::npos) out += ".0";
        } else {
          append_json_string(out, x);
        }
      },
      v);
}

std::optional<io::Row> row_of(const ordered_json& o) {
  if (!o.is_object()) return std::nullopt;
  io::Row row;
  for (const auto& [k, v] : o.items()) {
    auto value = from_json(v);
    if (!value) return std::nullopt;
    row.fields.emplace_back(k, std::move(*value));
  }
  return row;
}

// The result fields in io::cost_row's order, for column_order.
const std::unordered_map<std::string, std::size_t>& result_rank() {
  static const std::unordered_map<std::string, std::size_t> rank = [] {
    std::unordered_map<std::string, std::size_t> r;
    const io::Row t =
        io::cost_row(plan::Plan{}, footprint::Footprint{}, sim::StepResult{}, cost::PowerReport{}, cost::CostReport{});
    for (const auto& [k, v] : t.fields) r.emplace(k, r.size());
    for (const char* k : {"meets_constraints", "cheapest_plan"}) r.emplace(k, r.size());  // Sweep::evaluate's own
    return r;
  }();
  return rank;
}

std::int64_t point_of(const io::Row& row, const std::string& name, std::size_t line) {
  if (const io::Value* v = row.get("point")) {
    if (const auto* i = std::get_if<std::int64_t>(v)) return *i;
    if (const auto* s = std::get_if<std::string>(v)) {
      std::int64_t p = 0;
      const auto r = std::from_chars(s->data(), s->data() + s->size(), p);
      if (r.ec == std::errc() && r.ptr == s->data() + s->size() && p >= 0) return p;
    }
  }
  throw InputError({name, static_cast<int>(line), 0}, "point",
                   "a row without a point number; is this a sweep's output?");
}

std::vector<std::string> axis_columns_of(const std::vector<io::Row>& rows) {
  std::vector<std::string> out;
  if (!rows.empty())
    for (const auto& [k, v] : rows.front().fields)
      if (k.rfind("axis.", 0) == 0) out.push_back(k);
  return out;
}

std::vector<io::Row> parse_csv(std::string_view text, const std::string& name) {
  const std::vector<io::CsvRecord> records = io::read_csv(text, name);
  std::vector<io::Row> rows;
  if (records.empty()) return rows;
  const std::vector<std::string>& header = records.front().cells;
  if (header.size() == 1 && header.front().empty()) return rows;  // a header-less empty table
  for (std::size_t r = 1; r < records.size(); ++r) {
    const std::vector<std::string>& cells = records[r].cells;
    if (cells.size() != header.size())
      throw InputError({name, records[r].line, 0}, "",
                       fmt::format("{} cells where the header has {} (the file is cut short or not a sweep's output?)",
                                   cells.size(), header.size()));
    io::Row row;
    for (std::size_t c = 0; c < header.size(); ++c)
      row.fields.emplace_back(header[c], cells[c].empty() ? io::Value(nullptr) : io::Value(cells[c]));
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

OutputFormat output_format(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".csv") return OutputFormat::csv;
  if (ext == ".jsonl" || ext == ".ndjson") return OutputFormat::jsonl;
  throw UsageError(
      fmt::format("'{}': the output's extension says its format: .csv, or .jsonl (JSON Lines)", path.string()));
}

std::vector<std::string> column_order(const std::vector<std::string>& keys,
                                      const std::vector<std::string>& axis_columns) {
  const auto& rank = result_rank();
  std::set<std::string> left(keys.begin(), keys.end());
  std::vector<std::string> out;
  const auto take = [&](const std::string& k) {
    if (left.erase(k)) out.push_back(k);
  };
  take("point");
  for (const auto& a : axis_columns) take(a);
  std::vector<std::pair<std::size_t, std::string>> results;
  for (const auto& k : left)
    if (auto it = rank.find(k); it != rank.end()) results.emplace_back(it->second, k);
  std::sort(results.begin(), results.end());
  for (const auto& [r, k] : results) take(k);
  out.insert(out.end(), left.begin(), left.end());  // std::set: by name
  return out;
}

std::string table_header(OutputFormat format, const std::vector<std::string>& columns) {
  std::string out;
  if (format == OutputFormat::csv && !columns.empty()) out += io::csv_line(columns);
  return out;
}

std::string table_lines(OutputFormat format, const std::vector<io::Row>& rows,
                        const std::vector<std::string>& columns) {
  std::string out;
  std::unordered_map<std::string_view, const io::Value*> cells;
  for (const auto& row : rows) {
    cells.clear();
    for (const auto& [k, v] : row.fields) cells.emplace(k, &v);
    if (format == OutputFormat::csv) {
      // Cells as the one CSV writer quotes them (io::csv_cell); a missing cell is empty.
      for (std::size_t i = 0; i < columns.size(); ++i) {
        if (i) out += ',';
        if (auto it = cells.find(columns[i]); it != cells.end()) out += io::csv_cell(*it->second);
      }
    } else {
      ordered_json o = ordered_json::object();
      for (const auto& c : columns)
        if (auto it = cells.find(c); it != cells.end()) o[c] = io::json_value(*it->second);
      out += o.dump();
    }
    out += '\n';
  }
  return out;
}

std::string format_table(OutputFormat format, const std::vector<io::Row>& rows,
                         const std::vector<std::string>& axis_columns) {
  std::vector<std::string> keys;
  {
    std::set<std::string> seen;
    for (const auto& row : rows)
      for (const auto& [k, v] : row.fields)
        if (seen.insert(k).second) keys.push_back(k);
  }
  const std::vector<std::string> columns = column_order(keys, axis_columns);
  return table_header(format, columns) + table_lines(format, rows, columns);
}

std::vector<io::Row> parse_table(OutputFormat format, std::string_view text, const std::string& name) {
  if (format == OutputFormat::csv) return parse_csv(text, name);
  std::vector<io::Row> rows;
  std::size_t start = 0;
  int line = 0;
  while (start < text.size()) {
    ++line;
    auto nl = text.find('\n', start);
    const std::string_view l = text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    start = nl == std::string_view::npos ? text.size() : nl + 1;
    if (l.empty()) continue;
    const ordered_json j = ordered_json::parse(l, nullptr, false);
    auto row = j.is_discarded() ? std::nullopt : row_of(j);
    if (!row)
      throw InputError({name, line, 0}, "",
                       "not a JSON object of a sweep row (the file is cut short or not a sweep's output?)");
    rows.push_back(std::move(*row));
  }
  return rows;
}

std::string journal_header(std::uint64_t fingerprint) {
  ordered_json h;
  h["ftplan_sweep_journal"] = 1;
  h["fingerprint"] = fmt::format("{:016x}", fingerprint);
  return h.dump() + "\n";
}

// Written directly rather than built as a JSON document and dumped (the document's allocations
// were most of a line's cost); read back by parse_journal_line as any JSON.
std::string journal_line(std::int64_t point, const std::vector<io::Row>& rows) {
  std::string out = fmt::format("{{\"point\":{},\"rows\":[", point);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    out += r ? ",{" : "{";
    for (std::size_t f = 0; f < rows[r].fields.size(); ++f) {
      if (f) out += ',';
      append_json_string(out, rows[r].fields[f].first);
      out += ':';
      append_json_value(out, rows[r].fields[f].second);
    }
    out += '}';
  }
  out += "]}\n";
  return out;
}

void as_journaled(std::vector<io::Row>& rows) {
  for (auto& r : rows)
    for (auto& [k, v] : r.fields)
      if (io::json_null(v)) v = io::Value(nullptr);
}

namespace {

// A journal line's points and rows, read as the parser meets them (nlohmann's SAX interface)
// rather than built as a document first and copied out: a sweep reads back every line it wrote,
// and the document's allocations were most of that (56 M instructions of a 128-point sweep's
// 1,250 M). Anything but {"point": N, "rows": [{key: scalar, ...}, ...]} (other keys at the top
// ignored, as before) leaves `ok` false.
class JournalSax {
 public:
  explicit JournalSax(JournalLine& out) : out_(out) {}
  // Whether the line was a journal line: a point and its rows.
  bool complete() const { return ok_ && has_point_ && has_rows_; }

  bool null() { return value(io::Value(nullptr)); }
  bool boolean(bool b) { return value(io::Value(b)); }
  bool number_integer(std::int64_t i) { return value(io::Value(i)); }
  bool number_unsigned(std::uint64_t u) { return value(io::Value(static_cast<std::int64_t>(u))); }
  bool number_float(double d, const std::string&) { return value(io::Value(d)); }
  bool string(std::string& s) { return value(io::Value(std::move(s))); }
  bool binary(ordered_json::binary_t&) { return fail(); }
  bool start_object(std::size_t) {
    if (in_rows_ && depth_ != 2) return fail();  // an object in a row's field
    if (in_rows_) out_.rows.emplace_back();      // a row
    ++depth_;
    return true;
  }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    if (in_rows_) return fail();  // an array in the rows array or in a row
    if (depth_ == 1 && key_ == "rows") {
      if (has_rows_) return fail();  // the rows twice
      in_rows_ = has_rows_ = true;
    }
    ++depth_;
    return true;
  }
  bool end_array() {
    if (--depth_ == 1) in_rows_ = false;
    return true;
  }
  bool key(std::string& k) {
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return fail(); }

 private:
  JournalLine& out_;
  bool ok_ = true;
  bool has_point_ = false, has_rows_ = false;
  int depth_ = 0;         // objects and arrays open
  bool in_rows_ = false;  // inside the top object's "rows" array
  std::string key_;       // the last key read

  bool fail() { return ok_ = false; }
  // A scalar: a row's field, the top object's point, or part of another top-level key's value
  // (ignored, as the document reader ignored such keys).
  bool value(io::Value v) {
    if (in_rows_) {
      if (depth_ != 3) return fail();  // a scalar in the rows array itself
      out_.rows.back().fields.emplace_back(std::move(key_), std::move(v));
      return true;
    }
    if (depth_ == 1 && key_ == "point") {
      const auto* i = std::get_if<std::int64_t>(&v);
      if (!i) return fail();
      out_.point = *i;
      has_point_ = true;
    }
    return true;
  }
};

}  // namespace

JournalLine parse_journal_line(std::string_view text, int line, const std::string& name) {
  const auto damaged = [&] {
    return InputError(
        {name, line, 0}, "",
        "a damaged line: this is not a sweep journal, or it was edited; delete it to start the sweep over");
  };
  JournalLine out;
  if (line == 1) {
    const ordered_json j = ordered_json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw damaged();
    // (find, not operator[]: a const document's operator[] of a missing key reads past its end; a
    // header without "fingerprint" did, found by the sweep_output fuzzer.)
    const auto fingerprint = j.find("fingerprint");
    if (!j.contains("ftplan_sweep_journal") || fingerprint == j.end() || !fingerprint->is_string()) throw damaged();
    out.is_header = true;
    try {
      out.fingerprint = std::stoull(fingerprint->get<std::string>(), nullptr, 16);
    } catch (const std::exception&) {
      throw damaged();
    }
    return out;
  }
  JournalSax sax(out);
  const bool parsed = ordered_json::sax_parse(text, &sax, nlohmann::detail::input_format_t::json, true);
  if (!parsed || !sax.complete()) throw damaged();
  return out;
}

Journal parse_journal(std::string_view text, const std::string& name) {
  Journal out;
  std::size_t start = 0;
  int line = 0;
  for (;;) {
    const auto nl = text.find('\n', start);
    if (nl == std::string_view::npos) break;  // a line cut short (or nothing) at the end
    JournalLine l = parse_journal_line(text.substr(start, nl - start), ++line, name);
    if (l.is_header) {
      out.has_header = true;
      out.fingerprint = l.fingerprint;
    } else {
      out.points.emplace(l.point, std::move(l.rows));
    }
    start = nl + 1;
    out.complete_bytes = start;
  }
  return out;
}

Merged merge(OutputFormat format, const std::vector<MergeInput>& inputs) {
  std::map<std::int64_t, std::pair<std::size_t, std::vector<io::Row>>> points;
  std::vector<std::string> axis_columns;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<io::Row> rows = parse_table(format, inputs[i].text, inputs[i].name);
    if (axis_columns.empty()) axis_columns = axis_columns_of(rows);
    std::size_t line = format == OutputFormat::csv ? 1 : 0;
    for (auto& row : rows) {
      const std::int64_t p = point_of(row, inputs[i].name, ++line);
      auto [it, fresh] = points.try_emplace(p, i, std::vector<io::Row>{});
      if (!fresh && it->second.first != i)
        throw InputError({inputs[i].name, static_cast<int>(line), 0}, "point",
                         fmt::format("point {} is also in {}: shards are disjoint, so these are not shards of one run",
                                     p, inputs[it->second.first].name));
      it->second.second.push_back(std::move(row));
    }
  }
  Merged m;
  std::vector<std::int64_t> missing;
  std::int64_t expect = 0;
  for (const auto& [p, v] : points) {
    for (; expect < p && missing.size() < 6; ++expect) missing.push_back(expect);
    expect = p + 1;
  }
  if (!missing.empty()) {
    std::vector<std::string> shown;
    for (auto p : missing) shown.push_back(std::to_string(p));
    throw InputError(
        {inputs.empty() ? std::string() : inputs.front().name, 0, 0}, "point",
        fmt::format("no input has point{} {}{}: is a shard missing or unfinished?", missing.size() > 1 ? "s" : "",
                    fmt::join(shown.begin(), shown.begin() + std::min<std::size_t>(5, shown.size()), ", "),
                    missing.size() > 5 ? ", ..." : ""));
  }
  std::vector<io::Row> all;
  for (auto& [p, v] : points)
    for (auto& row : v.second) all.push_back(std::move(row));
  m.points = static_cast<std::int64_t>(points.size());
  m.rows = static_cast<std::int64_t>(all.size());
  m.text = format_table(format, all, axis_columns);
  return m;
}

}  // namespace ftplan::sweep
