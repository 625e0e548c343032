// A sweep's rows as a grid over two of its axes, for the GUI's heatmap: one cell per pair of axis
// values, holding one output field of one plan. Other axes are held at one value each (their
// first, unless chosen). Qt-free.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "io/rows.hpp"

namespace ftplan::gui {

struct SweepGrid {
  std::vector<std::string> x, y;  // the axes' values, in the order the sweep gives them
  // Row-major over y then x: the field's text ("" where no row) and its number (NaN where none).
  std::vector<std::string> text;
  std::vector<double> number;
  // The other axes and the value each is held at (its first), in the sweep's order; an axis that
  // moves with x or y (zipped) is not held.
  std::vector<std::pair<std::string, std::string>> held;
  // For each held axis (same order), every value it takes in the sweep: what it can be held at.
  std::vector<std::vector<std::string>> held_values;
  const std::string& text_at(std::size_t xi, std::size_t yi) const { return text[yi * x.size() + xi]; }
  double number_at(std::size_t xi, std::size_t yi) const { return number[yi * x.size() + xi]; }
};

// `rows` as ftplan::sweep::run hands them (each with `point`, the axis columns and `plan`);
// `axes` every axis column, `x_axis` and `y_axis` two of them; `plan` "" takes the point's first.
// `hold`: the value to hold an axis at, by column; an axis it does not name, or names at a value
// the axis never takes, is held at its first value.
SweepGrid sweep_grid(const std::vector<io::Row>& rows, const std::vector<std::string>& axes, const std::string& x_axis,
                     const std::string& y_axis, const std::string& field, const std::string& plan,
                     const std::map<std::string, std::string>& hold = {});

// The fields of `rows` a heatmap can show: numbers and bools, and `cheapest_plan`.
std::vector<std::string> grid_fields(const std::vector<io::Row>& rows);

}  // namespace ftplan::gui
