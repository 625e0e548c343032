// A plan's layout in words, one wording for every verb that says it (simulate's and memory's
// headings): "dp 24 x tp 8 (SP) x pp 8 (interleaved 1F1B x2)", with the pipeline's schedule and an
// uneven split of its layers, cp and ep where used.
#pragma once

#include <string>

#include "model/model.hpp"
#include "plan/plan.hpp"

namespace ftplan::present {

std::string layout_words(const plan::Plan& p, const model::ModelSpec& model);

}  // namespace ftplan::present
