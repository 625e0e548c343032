// Batch sweeps (docs/sweep-format.md): a base scenario and axes of values for any of its keys,
// expanded into points (grid, zip, or random / Latin-hypercube samples). Each point is the base
// scenario with its values applied, read by the scenario reader exactly like a file, and
// evaluated plan by plan; its rows carry the point's index and axis values beside the full
// result fields. Pure: no printing, no threads of its own except in run().
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "hardware/hardware.hpp"
#include "io/rows.hpp"
#include "model/zoo.hpp"

namespace ftplan::sweep {

// The sweep-format version this ftplan reads.
inline constexpr int kSweepSchemaVersion = 1;

// One axis: a dotted scenario key and the values it takes.
struct Axis {
  std::string key;       // as written: "job.seq_len", "plans.*.cluster.gpus", "plans[8x H100].parallel.zero"
  std::string column;    // its output column: "axis." + (the axis `name`, else the key)
  SourceLocation where;  // of the axis in the sweep file
};

// The K-th (1-based) of N disjoint slices of a sweep's points: point p belongs to slice p mod N + 1,
// so every slice gets a mix of the grid (neighbouring points cost alike).
struct Shard {
  int index = 1;
  int count = 1;
  bool contains(std::int64_t point) const { return point >= 0 && point % count == index - 1; }
  // How many of the points 0 .. total-1 the slice holds, and its i-th (0-based, ascending) one.
  std::int64_t size_of(std::int64_t total) const { return total >= index ? (total - index + count) / count : 0; }
  std::int64_t point(std::int64_t i) const { return index - 1 + i * count; }
  std::int64_t index_of(std::int64_t point) const { return point / count; }  // REQUIRES: contains(point)
};
// "K/N" with 1 <= K <= N. Throws UsageError with a message for a person.
Shard parse_shard(std::string_view text);

// A loaded sweep. Immutable and safe to evaluate from several threads at once; it keeps
// references to the zoo and catalog it was loaded with, which must outlive it.
class Sweep {
 public:
  // Reads and validates a sweep file; `base:` resolves against the file's folder. Every problem
  // (unknown key, bad axis, a key the scenario does not have, a base scenario that does not
  // load) throws one InputError naming file:line:column and key.
  static Sweep load(const std::filesystem::path& file, const model::Zoo& zoo, const hardware::Catalog& catalog);
  // The same from text; `name` stands for the file and relative paths resolve against `base_dir`.
  static Sweep parse(std::string_view text, const std::string& name, const std::filesystem::path& base_dir,
                     const model::Zoo& zoo, const hardware::Catalog& catalog);

  const std::string& name() const;
  const std::vector<Axis>& axes() const;
  std::int64_t size() const;  // points
  // Hash of everything the rows depend on that the files hold: the sweep text and the base scenario's.
  std::uint64_t fingerprint() const;

  // The point's value of each axis, as its column shows it (number, bool or text).
  std::vector<io::Value> values(std::int64_t point) const;
  // The scenario of one point as YAML text (what the scenario reader is given).
  std::string scenario_yaml(std::int64_t point) const;
  // The rows of one point: one per plan of its scenario, each `point`, the axis columns,
  // io::cost_row's fields, `meets_constraints` (feasible and within the scenario's `constraints`,
  // as `ftplan plan` judges them) and `cheapest_plan` (of this point's plans that meet them, the
  // one of least cost_usd; null if none). A point whose scenario does not validate gives one row per plan with
  // feasible = false and the reader's messages as infeasible_reason. Thread-safe; nothing is
  // reused across points.
  std::vector<io::Row> evaluate(std::int64_t point) const;

 private:
  struct Impl;
  explicit Sweep(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Evaluates `points` on `threads` workers (0: all cores), one point per task. `done` is called
// once per point with its rows, never two at a time, in the order points finish. If `done`
// throws, the workers stop after their current point and the exception is rethrown.
void run(const Sweep& sweep, const std::vector<std::int64_t>& points, int threads,
         const std::function<void(std::int64_t point, std::vector<io::Row>& rows)>& done);

}  // namespace ftplan::sweep
