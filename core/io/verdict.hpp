// The plain-language verdict of a comparison: each plan against the first, stating the trade-off
// honestly (GPUs, peak power, cost, time, energy), and which plans do not fit.
#pragma once

#include <string>
#include <vector>

#include "io/results.hpp"
#include "plan/plan.hpp"

namespace ftplan::io {

std::string verdict(const std::vector<plan::Plan>& plans, const std::vector<Evaluation>& evaluations);

// "4x fewer", "2.3x more", "63% lower", "41% less": how b compares with a.
std::string ratio_words(double a, double b, const char* less_word, const char* more_word);

}  // namespace ftplan::io
