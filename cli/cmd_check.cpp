// `ftplan check SCENARIO`: read and validate a scenario, list its plans as understood.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app.hpp"
#include "common/units.hpp"
#include "evaluate/evaluate.hpp"
#include "io/scenario_io.hpp"
#include "plan/checks.hpp"
#include "plan/framework.hpp"
#include "scenario_source.hpp"
#include "table.hpp"

namespace ftplan::cli {

int cmd_check(const std::vector<std::string>& argv) {
  const Args args(argv, 2, common_options());
  App app(args);
  if (args.positionals().size() != 1) throw UsageError("usage: ftplan check SCENARIO");
  plan::Scenario s = load_scenario_file(app, args.positionals()[0]);
  evaluate::choose_open_knobs(s);  // listed as each plan runs
  const auto params = model::count_params(s.model).total;
  if (app.format() == Format::json) {
    nlohmann::ordered_json doc;
    doc["schema_version"] = kOutputSchemaVersion;
    doc["scenario"] = s.name;
    doc["model"] = s.model.name;
    doc["params"] = params;
    doc["plans"] = nlohmann::ordered_json::array();
    for (const auto& p : s.plans)
      doc["plans"].push_back({{"plan", p.name},
                              {"gpu", p.cluster.gpu.name},
                              {"gpu_count", p.cluster.gpus()},
                              {"nodes", p.cluster.nodes},
                              {"node", p.cluster.node.name},
                              {"dp", p.parallel.dp},
                              {"tp", p.parallel.tp},
                              {"pp", p.parallel.pp},
                              {"cp", p.parallel.cp},
                              {"ep", p.parallel.ep},
                              {"zero", plan::sharding_in_effect(p).zero},
                              {"micro_batch", p.job.micro_batch},
                              {"grad_accumulation", plan::grad_accumulation_steps(p)},
                              {"global_batch", plan::global_batch_samples(p)}});
    fmt::print("{}\n", doc.dump(2));
    return 0;
  }
  // CSV is the table alone, so a CSV reader gets a header line first.
  if (app.format() == Format::table)
    fmt::print("{}: {} ({} params), {} fine-tune, seq {}\n\n", s.file, s.model.display_name,
               ftplan::format_count(static_cast<double>(params)), plan::to_string(s.job.method), s.job.seq_len);
  Table t;
  using A = Table::Align;
  t.columns({{"plan", A::left},
             {"GPUs", A::right},
             {"node", A::left},
             {"dp x tp x pp x cp", A::left},
             {"ZeRO", A::right},
             {"micro x accum", A::left},
             {"offload (params/grads/optim/acts)", A::left}});
  for (const auto& p : s.plans) {
    const auto& o = p.offload;
    t.row({p.name, fmt::format("{}x {}", p.cluster.gpus(), p.cluster.gpu.name),
           fmt::format("{}x {}", p.cluster.nodes, p.cluster.node.name),
           fmt::format("{} x {} x {} x {}", p.parallel.dp, p.parallel.tp, p.parallel.pp, p.parallel.cp),
           std::to_string(plan::sharding_in_effect(p).zero),  // as the framework shards (FSDP: full_shard by default)
           fmt::format("{} x {}", p.job.micro_batch, plan::grad_accumulation_steps(p)),
           fmt::format("{}/{}/{}/{}", plan::to_string(o.params), plan::to_string(o.gradients),
                       plan::to_string(o.optimizer), plan::to_string(plan::activation_tier(p)))});
  }
  fmt::print("{}", app.format() == Format::csv ? t.csv() : t.text());
  if (app.format() == Format::table) fmt::print("\nscenario is valid: {} plan(s)\n", s.plans.size());
  return 0;
}

}  // namespace ftplan::cli
