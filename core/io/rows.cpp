#include "io/rows.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "io/json_value.hpp"

namespace ftplan::io {

using nlohmann::ordered_json;

void Row::set(std::string key, Value value) {
  for (auto& [k, v] : fields)
    if (k == key) {
      v = std::move(value);
      return;
    }
  fields.emplace_back(std::move(key), std::move(value));
}

const Value* Row::get(const std::string& key) const {
  for (const auto& [k, v] : fields)
    if (k == key) return &v;
  return nullptr;
}

nlohmann::ordered_json json_value(const Value& v) {
  if (json_null(v)) return nullptr;
  return std::visit([](const auto& x) -> ordered_json { return x; }, v);
}

namespace {

void put(ordered_json& obj, const std::string& dotted, const Value& v) {
  ordered_json* cur = &obj;
  std::size_t start = 0;
  for (;;) {
    const auto dot = dotted.find('.', start);
    if (dot == std::string::npos) {
      (*cur)[dotted.substr(start)] = json_value(v);
      return;
    }
    cur = &(*cur)[dotted.substr(start, dot - start)];
    start = dot + 1;
  }
}

}  // namespace

std::string csv_cell(const Value& v) {
  std::string s = std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>)
          return "";
        else if constexpr (std::is_same_v<T, bool>)
          return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::int64_t>)
          return std::to_string(x);
        else if constexpr (std::is_same_v<T, double>)
          return std::isfinite(x) ? fmt::format("{}", x) : "";
        else
          return x;
      },
      v);
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string rows_to_json(const std::vector<Row>& rows, const std::string& kind, int schema_version,
                         const Row& top_level) {
  ordered_json doc;
  doc["schema_version"] = schema_version;
  for (const auto& [k, v] : top_level.fields) put(doc, k, v);
  doc[kind] = ordered_json::array();
  for (const auto& row : rows) {
    ordered_json obj = ordered_json::object();
    for (const auto& [k, v] : row.fields) put(obj, k, v);
    doc[kind].push_back(std::move(obj));
  }
  return doc.dump(2) + "\n";
}

std::string rows_to_csv(const std::vector<Row>& rows) {
  std::vector<std::string> header;
  std::unordered_set<std::string_view> seen;
  for (const auto& row : rows)
    for (const auto& [k, v] : row.fields)
      if (seen.insert(k).second) header.push_back(k);
  return rows_to_csv(rows, header);
}

std::string rows_to_csv(const std::vector<Row>& rows, const std::vector<std::string>& columns) {
  std::string out = csv_line(columns);
  // A row's cells by key, so that a sweep's thousands of rows of ~100 columns cost one lookup a cell.
  std::unordered_map<std::string_view, const Value*> cells;
  for (const auto& row : rows) {
    cells.clear();
    for (const auto& [k, v] : row.fields) cells.emplace(k, &v);
    for (std::size_t i = 0; i < columns.size(); ++i) {
      if (i) out += ',';
      if (auto it = cells.find(columns[i]); it != cells.end()) out += csv_cell(*it->second);
    }
    out += '\n';
  }
  return out;
}

std::string csv_line(const std::vector<std::string>& cells) {
  std::string out;
  for (std::size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + csv_cell(cells[i]);
  return out + '\n';
}

std::vector<CsvRecord> read_csv(std::string_view text, const std::string& name) {
  std::vector<CsvRecord> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, field_started = false;
  int line = 1, record_line = 1;
  const auto end_record = [&] {
    record.push_back(std::move(field));
    field.clear();
    records.push_back({std::move(record), record_line});
    record.clear();
    field_started = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"' && field.empty()) {
      quoted = true;
      field_started = true;
    } else if (c == ',') {
      record.push_back(std::move(field));
      field.clear();
      field_started = true;
    } else if (c == '\n') {
      if (!field.empty() && field.back() == '\r') field.pop_back();
      end_record();
      record_line = ++line;
    } else {
      field += c;
      field_started = true;
    }
  }
  if (quoted) throw InputError({name, line, 0}, "", "a quoted CSV cell is not closed (the file is cut short?)");
  if (field_started || !record.empty()) end_record();
  return records;
}

}  // namespace ftplan::io
