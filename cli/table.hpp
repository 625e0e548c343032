// Plain-text tables for people (aligned columns), and CSV for programs.
#pragma once

#include <string>
#include <vector>

namespace ftplan::cli {

class Table {
 public:
  enum class Align { left, right };
  void columns(std::vector<std::pair<std::string, Align>> cols);
  void row(std::vector<std::string> cells);
  std::string text() const;
  std::string csv() const;

 private:
  std::vector<std::pair<std::string, Align>> cols_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace ftplan::cli
