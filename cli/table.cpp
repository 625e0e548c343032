#include "table.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "io/rows.hpp"

namespace ftplan::cli {

void Table::columns(std::vector<std::pair<std::string, Align>> cols) { cols_ = std::move(cols); }

void Table::row(std::vector<std::string> cells) {
  cells.resize(cols_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::text() const {
  std::vector<std::size_t> width(cols_.size());
  for (std::size_t c = 0; c < cols_.size(); ++c) {
    width[c] = cols_[c].first.size();
    for (const auto& r : rows_) width[c] = std::max(width[c], r[c].size());
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < cols_.size(); ++c) {
      if (c) out += "  ";
      out += cols_[c].second == Align::left ? fmt::format("{:<{}}", cells[c], width[c])
                                            : fmt::format("{:>{}}", cells[c], width[c]);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::vector<std::string> header;
  for (const auto& c : cols_) header.push_back(c.first);
  std::string out = line(header);
  std::vector<std::string> rule;
  for (std::size_t c = 0; c < cols_.size(); ++c) rule.push_back(std::string(width[c], '-'));
  out += line(rule);
  for (const auto& r : rows_) out += line(r);
  return out;
}

std::string Table::csv() const {
  // Headers are for people ("dp x tp x pp x cp"); CSV columns are plain identifiers (dp_x_tp_x_pp_x_cp).
  std::vector<std::string> header;
  for (const auto& c : cols_) header.push_back(identifier(c.first));
  std::string out = io::csv_line(header);
  for (const auto& r : rows_) out += io::csv_line(r);
  return out;
}

}  // namespace ftplan::cli
