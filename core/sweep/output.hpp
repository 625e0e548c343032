// Sweep output files (docs/sweep-format.md): the finished table (CSV or JSON Lines), the journal
// a running sweep appends to, and merging the files of shards. Text in, text out: the CLI does
// the file handling.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/rows.hpp"

namespace ftplan::sweep {

enum class OutputFormat { csv, jsonl };

// By the file's extension: .csv, or .jsonl / .ndjson. Throws UsageError.
OutputFormat output_format(const std::filesystem::path& path);

// The columns of a sweep table, in an order that depends only on which columns there are (so
// merged shards and one unsharded run agree): `point`, the axis columns in `axis_columns`'
// order, the result fields in io::cost_row's order, then any others by name.
std::vector<std::string> column_order(const std::vector<std::string>& keys,
                                      const std::vector<std::string>& axis_columns);

// The finished file: rows in the order given (by point, then plan), columns by column_order.
// CSV: a header and one line per row. JSON Lines: one object per row with the CSV's column
// names as keys (flat, dotted), so both read into the same table. It is table_header(columns)
// followed by table_lines(rows, columns), columns = column_order(every key of the rows).
std::string format_table(OutputFormat format, const std::vector<io::Row>& rows,
                         const std::vector<std::string>& axis_columns);
// The same file piece by piece, for a table too large to hold (a sweep streams its journal):
// the header ("" for JSON Lines), then the lines of any run of rows. `columns` as column_order gives.
std::string table_header(OutputFormat format, const std::vector<std::string>& columns);
std::string table_lines(OutputFormat format, const std::vector<io::Row>& rows, const std::vector<std::string>& columns);

// A finished file read back: rows in file order (CSV cells come back as text, empty as null).
// Malformed input throws InputError naming the file and line.
std::vector<io::Row> parse_table(OutputFormat format, std::string_view text, const std::string& name);

// The journal beside a running sweep's output: a header line naming the sweep, then one line per
// finished point holding its rows. Lines are appended whole; a crash can only cut the last one.
std::string journal_header(std::uint64_t fingerprint);
std::string journal_line(std::int64_t point, const std::vector<io::Row>& rows);
// `rows` as a journal line holds them, read back: what JSON cannot hold (a value that is not
// finite) as null (io::json_null). A sweep that keeps a point's rows in memory writes these.
void as_journaled(std::vector<io::Row>& rows);

// One whole line of a journal (without its '\n'), line 1 (the header) or a point's. Throws
// InputError naming `name` and `line` for a damaged one.
struct JournalLine {
  bool is_header = false;
  std::uint64_t fingerprint = 0;  // the header's
  std::int64_t point = -1;        // a point line's, with its rows
  std::vector<io::Row> rows;
};
JournalLine parse_journal_line(std::string_view text, int line, const std::string& name);

// A whole journal in memory (parse_journal_line on each whole line).
struct Journal {
  bool has_header = false;
  std::uint64_t fingerprint = 0;
  std::map<std::int64_t, std::vector<io::Row>> points;  // the first line of a point wins
  std::size_t complete_bytes = 0;                       // length of the whole lines; the rest is a line cut short
};
// Throws InputError for a damaged line other than a cut-short last one.
Journal parse_journal(std::string_view text, const std::string& name);

// Joins the finished files of a sweep's shards (same format) into the file one unsharded run
// writes. Throws InputError when a point is in two inputs or points are missing.
struct MergeInput {
  std::string name;
  std::string text;
};
struct Merged {
  std::string text;
  std::int64_t points = 0;
  std::int64_t rows = 0;
};
Merged merge(OutputFormat format, const std::vector<MergeInput>& inputs);

}  // namespace ftplan::sweep
