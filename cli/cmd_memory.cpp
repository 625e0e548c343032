// `ftplan memory`: does it fit, and where does the memory go.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "app.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"
#include "footprint/footprint.hpp"
#include "inventory/inventory.hpp"
#include "io/results.hpp"
#include "plan/checks.hpp"
#include "present/layout.hpp"
#include "scenario_source.hpp"
#include "table.hpp"

namespace ftplan::cli {
namespace {

using inventory::Category;

std::string gib(double bytes) { return bytes > 0 ? fmt::format("{:.2f}", bytes / (1u << 30)) : "-"; }

const char* lifetime_name(inventory::Lifetime l) {
  switch (l) {
    case inventory::Lifetime::persistent: return "whole run";
    case inventory::Lifetime::gradients: return "backward to optimizer";
    case inventory::Lifetime::forward_backward: return "forward and backward";
    case inventory::Lifetime::saved: return "forward to backward of its layer";
    case inventory::Lifetime::layer: return "while a layer runs";
    case inventory::Lifetime::backward_layer: return "one layer's backward";
    case inventory::Lifetime::loss: return "loss forward to backward";
    case inventory::Lifetime::loss_peak: return "while the loss runs";
    case inventory::Lifetime::optimizer: return "optimizer step";
  }
  return "?";
}

// Every tensor group of the inventory behind the peak: what, where, how much, when.
void print_detail(const model::ModelSpec& m, const plan::Plan& p, const footprint::Footprint& f) {
  const inventory::Inventory inv = inventory::build_inventory(m, p, f.peak_stage);
  Table t;
  using A = Table::Align;
  t.columns({{"tensors (stage " + std::to_string(inv.stage) + ")", A::left},
             {"category", A::left},
             {"tier", A::left},
             {"GiB each", A::right},
             {"count", A::right},
             {"GiB", A::right},
             {"alive", A::left}});
  for (const auto& g : inv.groups)
    t.row({g.name, inventory::to_string(g.category), plan::to_string(g.tier),
           fmt::format("{:.3f}", g.bytes / (1u << 30)), std::to_string(g.count),
           fmt::format("{:.3f}", g.total() / (1u << 30)), lifetime_name(g.lifetime)});
  fmt::print("{}", t.text());
  fmt::print(
      "parameters on this rank: {} total, {} trainable; sharded over {} ranks; {} micro-batches in flight, "
      "{} accumulation steps, {:.0f} tokens per micro-batch\n\n",
      ftplan::format_count(inv.params.total), ftplan::format_count(inv.params.trainable), inv.shard_degree,
      inv.micro_batches_in_flight, inv.grad_accumulation, inv.tokens_per_micro_batch);
}

// Less than this apart, the node's most demanding stage is the GPU-peak stage (rounding).
constexpr double kOtherStagesShown = 1 << 20;

void print_plan(const plan::Plan& p, const model::ModelSpec& model, const footprint::Footprint& f, int max_mb,
                std::int64_t max_seq, const std::vector<footprint::FitChange>& changes) {
  fmt::print("== {} — {} x {}, {}, {}, micro-batch {} x seq {}\n", p.name, p.cluster.gpus(), p.cluster.gpu.display_name,
             present::layout_words(p, model), plan::sharding_in_effect(p).label, p.job.micro_batch, p.job.seq_len);
  // The node's tiers beside the GPU's columns: host DRAM and NVMe always, CXL memory where the node
  // has expanders or the plan places state there.
  std::vector<plan::Tier> node_tiers;
  for (const plan::TierInfo& t : plan::kTiers)
    if (t.tier != plan::Tier::gpu && (t.always || f.capacity(t.tier) > 0 || f.peak(t.tier) > 0))
      node_tiers.push_back(t.tier);
  Table t;
  using A = Table::Align;
  std::vector<std::pair<std::string, Table::Align>> columns = {
      {"GiB", A::left}, {"GPU at its peak", A::right}, {"each own peak", A::right}};
  for (plan::Tier n : node_tiers) columns.push_back({std::string(plan::tier_info(n).label) + " (per node)", A::right});
  t.columns(columns);
  // A row: its name, the GPU's two figures, and one per node tier.
  const auto row = [&](std::string name, std::string at_peak, std::string own_peak, auto node_figure) {
    std::vector<std::string> cells = {std::move(name), std::move(at_peak), std::move(own_peak)};
    for (plan::Tier n : node_tiers) cells.push_back(node_figure(n));
    t.row(cells);
  };
  const auto blank = [](plan::Tier) { return std::string(); };
  for (int c = 0; c < inventory::kCategories; ++c)
    row(inventory::to_string(static_cast<Category>(c)), gib(f.gpu().bytes[c]), gib(f.gpu_category_peaks.bytes[c]),
        [&](plan::Tier n) { return gib(f.bytes(n).bytes[c]); });
  // The caching allocator's slack at the peak (reserved but not allocated): with it the GPU total
  // is the device figure fit is judged on, the one every verb prints as peak GPU memory (issue 41:
  // this table's total was the live tensors alone, a third figure for one peak).
  row("allocator slack", gib(f.gpu_peak_bytes() - f.gpu().total()), "", blank);
  // The node tiers' categories are the GPU-peak stage's; their totals are the node's most
  // demanding stage's (footprint: every rank taken as that stage, an upper bound). Where that is
  // another stage, the difference has a row, so the column adds up (the GUI's host chart shows the
  // same part as "other stages").
  const auto other = [&](plan::Tier n) { return f.peak(n) - f.bytes(n).total(); };
  if (std::any_of(node_tiers.begin(), node_tiers.end(), [&](plan::Tier n) { return other(n) > kOtherStagesShown; }))
    row("other stages", "", "", [&](plan::Tier n) { return gib(other(n)); });
  row("total (judged for fit)", gib(f.gpu_peak_bytes()), "", [&](plan::Tier n) { return gib(f.peak(n)); });
  row("capacity", gib(f.gpu_capacity_bytes()), "", [&](plan::Tier n) { return gib(f.capacity(n)); });
  fmt::print("{}", t.text());
  fmt::print("GPU peak at {} (stage {}): allocated {} GiB, reserved {} GiB, device (nvidia-smi) {} GiB\n",
             footprint::to_string(f.peak_phase), f.peak_stage, gib(f.gpu_allocated_peak_bytes),
             gib(f.gpu_reserved_peak_bytes), gib(f.gpu_peak_bytes()));
  if (f.fits)
    fmt::print("fits: yes, {} GiB of GPU memory to spare\n", gib(f.gpu_capacity_bytes() - f.gpu_peak_bytes()));
  else
    fmt::print("fits: NO — {}\n", f.infeasible_reason);
  if (!f.fits && !changes.empty()) {
    fmt::print("it would fit with one of these changes (nearest first; GPU memory then, of {} GiB):\n",
               gib(f.gpu_capacity_bytes()));
    for (const auto& c : changes) fmt::print("  {:<60} {} GiB\n", c.change, gib(c.gpu_peak_bytes));
  } else if (!f.fits) {
    fmt::print(
        "no single change of micro-batch, checkpointing, sharding, offload, precision or up to 8x the GPUs makes it "
        "fit\n");
  }
  fmt::print("largest micro-batch that fits at seq {}: {}; largest seq at micro-batch {}: {}\n\n", p.job.seq_len,
             max_mb > 0 ? std::to_string(max_mb) : "none", p.job.micro_batch,
             max_seq > 0 ? std::to_string(max_seq) : "none");
}

}  // namespace

int cmd_memory(const std::vector<std::string>& argv) {
  auto options = scenario_options();
  options.push_back({"detail", false, "also list every tensor group behind the peak"});
  // The job's length changes no step's memory: taken, it would be ignored (issue 41).
  std::erase_if(options, [](const OptionSpec& o) { return o.name == "tokens" || o.name == "steps"; });
  for (const auto& a : argv)
    if (a == "--tokens" || a == "--steps" || a.starts_with("--tokens=") || a.starts_with("--steps="))
      throw UsageError(
          fmt::format("{}: memory sizes one step, which the job's length does not change (simulate and "
                      "compare take it)",
                      a.substr(0, a.find('='))));
  const Args args(argv, 2, options);
  App app(args);
  const plan::Scenario s = scenario_from_args(app, args);
  std::vector<io::Row> rows;
  print_headline(app, s);
  for (const auto& p : s.plans) {
    const footprint::Footprint f = footprint::footprint(s.model, p);
    const int max_mb = footprint::max_micro_batch(s.model, p);
    const std::int64_t max_seq = footprint::max_seq_len(s.model, p);
    const auto changes = footprint::what_would_fit(s.model, p);
    if (app.format() == Format::table) {
      print_plan(p, s.model, f, max_mb, max_seq, changes);
      if (args.flag("detail")) print_detail(s.model, p, f);
      continue;
    }
    io::Row r = io::footprint_row(p, f);
    // Each category's own peak over the step (footprint::Footprint::gpu_category_peaks).
    for (int c = 0; c < inventory::kCategories; ++c)
      r.set(std::string("peaks.") + inventory::to_string(static_cast<Category>(c)) + "_bytes",
            static_cast<std::int64_t>(std::llround(f.gpu_category_peaks.bytes[c])));
    // 0 means no micro-batch (or length) fits: no such value, written null as the table writes "none".
    r.set("max_micro_batch", max_mb > 0 ? io::Value(static_cast<std::int64_t>(max_mb)) : io::Value(nullptr));
    r.set("max_seq_len", max_seq > 0 ? io::Value(max_seq) : io::Value(nullptr));
    std::vector<std::string> fixes;
    for (const auto& c : changes) fixes.push_back(c.change);
    r.set("fits_with", fixes.empty() ? io::Value(nullptr) : io::Value(join(fixes, "; ")));
    rows.push_back(std::move(r));
  }
  print_rows(app, s, rows);
  return 0;
}

}  // namespace ftplan::cli
