// The plain-language verdict of a comparison: each plan against the first, stating the trade-off
// honestly (GPUs, peak power, cost, time, energy), and which plans do not fit.
#pragma once

#include <string>
#include <vector>

#include "io/results.hpp"
#include "model/model.hpp"
#include "plan/plan.hpp"

namespace ftplan::io {

std::string verdict(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& evaluations);

// What a comparison hinges on that the scenario left at a setting: one line per feasible plan whose
// micro-batch leaves more than half of its GPUs' memory unused while a larger one fits, saying
// how large, and whether its step re-streams the parameters once per micro-batch (ZeRO-3 or
// offloaded parameters with accumulation steps) and is bound by that traffic's link.
std::vector<std::string> advice(const model::ModelSpec& model, const std::vector<plan::Plan>& plans,
                                const std::vector<evaluate::Evaluation>& evaluations);

// "4x fewer", "2.3x more", "63% lower", "41% less": how b compares with a.
std::string ratio_words(double a, double b, const char* less_word, const char* more_word);

}  // namespace ftplan::io
