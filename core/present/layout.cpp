#include "present/layout.hpp"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "inventory/inventory.hpp"
#include "plan/checks.hpp"

namespace ftplan::present {

std::string layout_words(const plan::Plan& p, const model::ModelSpec& model) {
  const plan::Parallel& q = p.parallel;
  std::string out = fmt::format("dp {} x tp {}{} x pp {}", q.dp, q.tp,
                                q.sequence_parallel ? (q.async_tp ? " (SP, async)" : " (SP)") : "", q.pp);
  if (q.pp > 1)
    out += q.schedule == plan::PipelineSchedule::interleaved ? fmt::format(" (interleaved 1F1B x{})", q.virtual_stages)
                                                             : fmt::format(" ({})", plan::to_string(q.schedule));
  if (q.pp > 1 && (q.first_stage_layers > 0 || q.last_stage_layers > 0)) {
    std::vector<int> layers;
    for (int s = 0; s < q.pp; ++s) {
      const auto [a, b] =
          inventory::stage_layers(model.total_layers(), q.pp, s, q.first_stage_layers, q.last_stage_layers);
      layers.push_back(b - a);
    }
    out += fmt::format(" layers {}", fmt::join(layers, "/"));
  }
  if (q.cp > 1) out += fmt::format(" x cp {}", q.cp);
  if (q.ep > 1) out += fmt::format(", ep {}", q.ep);
  return out;
}

}  // namespace ftplan::present
