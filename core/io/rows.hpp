// Result rows: the one shape every verb's results take before they are written. A row is an
// ordered list of (key, value); dotted keys ("memory.gpu.weights_bytes") become nested objects
// in JSON and columns in CSV. Field names follow DESIGN.md's contract (snake_case, unit suffix).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ftplan::io {

using Value = std::variant<std::nullptr_t, bool, std::int64_t, double, std::string>;

struct Row {
  std::vector<std::pair<std::string, Value>> fields;
  void set(std::string key, Value value);  // replaces an existing key, else appends
  const Value* get(const std::string& key) const;
};

// {"schema_version": N, "<kind>": [rows...]} plus any top-level extras, pretty-printed.
std::string rows_to_json(const std::vector<Row>& rows, const std::string& kind, int schema_version,
                         const Row& top_level = {});
// The one CSV writer (RFC 4180: comma-separated, CRLF-free lines ending in \n, a cell quoted when it
// holds a comma, quote or newline, quotes doubled). Header = union of keys in first-seen order;
// missing cells are empty.
std::string rows_to_csv(const std::vector<Row>& rows);
// The same with the columns given, in that order (keys not among them are left out).
std::string rows_to_csv(const std::vector<Row>& rows, const std::vector<std::string>& columns);
// The one CSV reader (RFC 4180 as rows_to_csv writes it: a quoted cell may hold commas, doubled
// quotes and line breaks; CRLF line ends read as LF): each record's cells as text and the line it
// starts on (1-based). A blank line is a record of one empty cell. Throws InputError naming `name`
// and the line when a quoted cell is never closed.
struct CsvRecord {
  std::vector<std::string> cells;
  int line = 0;
};
std::vector<CsvRecord> read_csv(std::string_view text, const std::string& name);
// One CSV line of cells already as text, each quoted as csv_cell quotes text.
std::string csv_line(const std::vector<std::string>& cells);
// One CSV cell: null and non-finite numbers empty, numbers shortest round-trip, text quoted when it
// holds a comma, quote or newline.
std::string csv_cell(const Value& v);

}  // namespace ftplan::io
